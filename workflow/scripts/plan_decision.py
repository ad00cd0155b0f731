import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

log = setup_logging(snakemake.log[0])

from cueaudit.decision.analysis.outputs import write_plan  # noqa: E402

plan, cost = write_plan(
    config=snakemake.params.config,
    preregistration=snakemake.input.preregistration,
    prompt_tables=dict(zip(snakemake.params.tasks, snakemake.input.prompts, strict=True)),
    max_new_tokens=snakemake.params.max_new_tokens,
    out=snakemake.output,
)
# On the terminal, before any inference job when decision.plan.before_inference is set
shown = ["domain", "format", "contrast", "power", "mde", "equivalence_floor", "margin"]
print("decision plan (simulated):", plan.select(*shown, "extra_units", "unit"), sep="\n")
print("decision cost:", cost.drop("task").group_by("model").sum(), sep="\n")
log.info("\n%s\n%s", plan, cost)
