import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.probing.augmentation import run_augmentation  # noqa: E402

spec = snakemake.params.augment
prompts = run_augmentation(
    snakemake.wildcards.task,
    snakemake.input.templates,
    {name: snakemake.input[f"component_{name}"] for name in spec["components"]},
    snakemake.output[0],
    total=spec.get("total"),
    seed=spec.get("seed", 0),
)
log.info(
    "%d base prompts from %d templates (total %s, seed %s)",
    prompts.height,
    prompts["template_id"].n_unique(),
    spec.get("total"),
    spec.get("seed", 0),
)
