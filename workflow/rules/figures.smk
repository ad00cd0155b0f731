rule plot_validity_heatmaps:
    input:
        "results/tables/validity_{dimension}_averaged.csv",
    output:
        report(
            "results/figures/validity_{dimension}.png",
            caption="../report/validity.rst",
            category="Construct validity",
            labels={"figure": "correlations of cue-induced shifts", "dimension": "{dimension}"},
        ),
    log:
        "logs/figures/validity_{dimension}.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/plot_validity_heatmaps.py"


rule plot_outcome_ratios:
    input:
        "results/tables/ratios_{dimension}.csv",
    output:
        report(
            "results/figures/ratios_{dimension}.png",
            caption="../report/ratios.rst",
            category="Outcome ratios",
            labels={"figure": "intergroup outcome ratios", "dimension": "{dimension}"},
        ),
    log:
        "logs/figures/ratios_{dimension}.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/plot_outcome_ratios.py"
