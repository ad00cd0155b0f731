import _library  # noqa: F401  (puts src/ on the import path)

# The specification curve refits in spawned processes, which import this file again as
# "__mp_main__" (where `snakemake` is not defined): everything runs under the guard.
if __name__ == "__main__":
    from cueaudit.io import setup_logging

    setup_logging(snakemake.log[0])

    from cueaudit.decision.analysis.registry import run_analysis

    params = dict(snakemake.params.items())
    run_analysis(
        params.pop("analysis"),
        files=dict(snakemake.input.items()),
        params=params,
        out=dict(snakemake.output.items()),
        threads=snakemake.threads,
    )
