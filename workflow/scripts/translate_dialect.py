import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.cues.dialect.translate import audit_summary, run_dialect_translation  # noqa: E402

audit = run_dialect_translation(
    {task: (path, limit) for task, (path, limit) in snakemake.params.tasks.items()},
    snakemake.params.dialect,
    translations_path=snakemake.output.translations,
    audit_path=snakemake.output.audit,
    flagged_path=snakemake.output.flagged,
)
log.info("translation audit:\n%s", audit_summary(audit))
