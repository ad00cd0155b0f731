import _library  # noqa: F401  (puts src/ on the import path)

# The permutations are refitted in spawned processes, which import this file again as
# "__mp_main__": everything runs under the guard.
if __name__ == "__main__":
    from cueaudit.io import setup_logging

    log = setup_logging(snakemake.log[0])

    from cueaudit.decision.analysis.outputs import read_frames, write_specification_curve
    from cueaudit.decision.preregistration import Registration

    summary = write_specification_curve(
        read_frames(snakemake.input),
        registration=Registration(
            snakemake.input.preregistration, snakemake.params.design, snakemake.params.files
        ),
        lock=snakemake.params.lock,
        settings=snakemake.params.settings,
        out=snakemake.output,
        workers=snakemake.threads,
    )
    log.info("\n%s", summary)
