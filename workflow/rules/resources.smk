rule prepare_names:
    input:
        list(name_list_files().values()),
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
