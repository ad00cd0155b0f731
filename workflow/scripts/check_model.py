import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.inference.openai_protocol import OpenAISettings  # noqa: E402
from cueaudit.inference.preflight import probe_endpoint, write_record  # noqa: E402
from cueaudit.parsing import answer_spec  # noqa: E402

answers = {
    task: (answer_spec(spec["outcome"], spec["answer"]), spec["max_new_tokens"])
    for task, spec in snakemake.params.tasks.items()
}
record = probe_endpoint(
    snakemake.wildcards.model, OpenAISettings.from_spec(snakemake.params.model), answers
)
write_record(record, snakemake.output[0])
