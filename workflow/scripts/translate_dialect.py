import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.cues.dialect.translate import audit_summary, run_dialect_translation  # noqa: E402
from cueaudit.probing.base_prompts import load_task_base_prompts  # noqa: E402

audit = run_dialect_translation(
    load_task_base_prompts(snakemake.params.tasks),
    snakemake.params.dialect,
    translations_path=snakemake.output.translations,
    audit_path=snakemake.output.audit,
    flagged_path=snakemake.output.flagged,
)
log.info("translation audit:\n%s", audit_summary(audit))
