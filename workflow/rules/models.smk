rule prepare_model:
    output:
        directory("results/models/{model}"),
    params:
        spec=model_spec,
    log:
        "logs/models/{model}.log",
    conda:
        "../../envs/inference.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/prepare_model.py"
