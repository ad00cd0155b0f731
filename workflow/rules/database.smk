# Everything in one DuckDB file: the shared tables of every study and each study's views.
# Its determinism table (each response shard's answers re-answered alone, read from the
# shards' parquet metadata) is also written as CSV for the report.

# A database changed after it was built (damaged, or written to) reruns nothing by itself:
# say so where Snakemake was started.
if not (workflow.remote_exec or workflow.subprocess_exec):
    DATABASE_CHANGED = database_changed(DATABASE)
    if DATABASE_CHANGED:
        print(f"Warning: {DATABASE_CHANGED}", file=sys.stderr)


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
