# Shared cue resources: name lists, explicit descriptors and dialog-history clusters; each
# rule writes the resource_path of its cue type's row (cueaudit.cues.registry).


rule derive_names:
    input:
        name_derivation_files(),
        published=list(name_list_files().values()),
    output:
        derived="results/resources/names_derived.parquet",
        overlap=report(
            "results/tables/name_overlap.csv",
            caption="../report/name_overlap.rst",
            category="Cue resources",
        ),
    params:
        derive=name_derivation_config(),
        published=name_list_files(),
    log:
        "logs/resources/derive_names.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/derive_names.py"


rule prepare_names:
    input:
        **prepare_names_inputs(),
    output:
        "results/resources/names.parquet",
    log:
        "logs/resources/prepare_names.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/prepare_names.py"


# A cue type whose resource comes from its config block alone is prepared by the generic
# script, which calls the `prepare` of the type named by `kind` on its block.
rule build_explicit_descriptors:
    output:
        "results/resources/explicit_descriptors.parquet",
    params:
        kind="explicit",
        settings=cue_settings("explicit"),
    log:
        "logs/resources/build_explicit_descriptors.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/prepare_cue_resource.py"


rule build_dialog_clusters:
    input:
        dialog_source_files,
    output:
        clusters="results/resources/dialog_{source}.parquet",
        counts=report(
            "results/tables/dialog_clusters_{source}.csv",
            caption="../report/dialog_clusters.rst",
            category="Cue resources",
        ),
    wildcard_constraints:
        source=any_of(CUE_TYPES["dialog"].sources),
    params:
        paths=dialog_source_paths,
        settings=dialog_settings(),
    log:
        "logs/resources/dialog_{source}.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/build_dialog_clusters.py"
