import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import write_aid_replication  # noqa: E402

log.info("\n%s", write_aid_replication(snakemake.input, snakemake.output.aid_replication))
