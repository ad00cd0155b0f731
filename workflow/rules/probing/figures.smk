# Figures of paper §4 and Appendix D, each as PDF with a PNG beside it.


rule plot_validity_heatmaps:
    input:
        "results/tables/validity_{dimension}_averaged.csv",
    output:
        png=report(
            "results/figures/validity_{dimension}.png",
            caption="../../report/validity.rst",
            category="Construct validity",
            labels={"figure": "within-group correlations", "dimension": "{dimension}"},
        ),
        pdf="results/figures/validity_{dimension}.pdf",
    params:
        kind="within",
    log:
        "logs/figures/validity_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_validity_heatmaps.py"


rule plot_validity_across:
    input:
        "results/tables/validity_{dimension}_averaged.csv",
    output:
        png=report(
            "results/figures/validity_{dimension}_across.png",
            caption="../../report/validity_across.rst",
            category="Construct validity",
            labels={"figure": "cross-group correlations", "dimension": "{dimension}"},
        ),
        pdf="results/figures/validity_{dimension}_across.pdf",
    params:
        kind="across",
    log:
        "logs/figures/validity_{dimension}_across.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_validity_heatmaps.py"


rule plot_outcome_ratios:
    input:
        "results/tables/ratios_{dimension}.csv",
    output:
        png=report(
            "results/figures/ratios_{dimension}.png",
            caption="../../report/ratios.rst",
            category="Outcome ratios",
            labels={"figure": "intergroup outcome ratios", "dimension": "{dimension}"},
        ),
        pdf="results/figures/ratios_{dimension}.pdf",
    log:
        "logs/figures/ratios_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_outcome_ratios.py"


rule plot_group_means:
    input:
        "results/tables/means_{dimension}.csv",
    output:
        png=report(
            "results/figures/means_{dimension}.png",
            caption="../../report/means.rst",
            category="Average outcomes",
            labels={"figure": "average outcomes", "dimension": "{dimension}"},
        ),
        pdf="results/figures/means_{dimension}.pdf",
    log:
        "logs/figures/means_{dimension}.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_group_means.py"
