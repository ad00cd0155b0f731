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


rule build_explicit_descriptors:
    output:
        "results/resources/explicit_descriptors.parquet",
    params:
        categories=explicit_categories(),
    log:
        "logs/resources/build_explicit_descriptors.log",
    conda:
        "../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/build_explicit_descriptors.py"
