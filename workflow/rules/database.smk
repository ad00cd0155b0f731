# Everything in one DuckDB file: the shared tables of every study and each study's views.
# Its determinism table (each response shard's answers re-answered alone, read from the
# shards' parquet metadata) is also written as CSV for the report.


rule build_database:
    input:
        **database_inputs(),
    output:
        database=DATABASE,
        determinism=report(
            "results/tables/determinism.csv",
            caption="../report/determinism.rst",
            category="Data quality",
        ),
    params:
        table_names=list(study_tables()),
        studies=study_views(),
        task_outcomes=task_outcome_kinds(),
        models=config["models"],
        decoding=config["decoding"],
    log:
        "logs/analysis/build_database.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=8000,
        runtime=60,
    script:
        "../scripts/build_database.py"
