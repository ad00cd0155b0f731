import _library  # noqa: F401  (puts src/ on the import path)

# It imports the analyses' registry, whose analyses may spawn processes: under the guard as
# every script that does.
if __name__ == "__main__":
    from cueaudit.io import setup_logging

    setup_logging(snakemake.log[0])

    from cueaudit.decision.analysis.registry import draw_figure

    outputs = dict(snakemake.output.items())
    draw_figure(
        snakemake.params.figure, dict(snakemake.input.items()), outputs.get("pdf", outputs["png"])
    )
