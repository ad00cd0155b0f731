# The decision audit's analyses: outcome summary, analysis frames, composition checks,
# non-response, pre-registered contrasts, planted disparities, instrument effects, figures,
# the wording arm and the paired reasoning rerun. Each table is
# a CSV + Markdown under results/tables/ and a table in results/cueaudit.duckdb.


rule summarise_decision_outcomes:
    input:
        prompts=decision_prompt_tables(),
        outcomes=all_outcome_tables(decision_task_names()),
    output:
        csv=report(
            "results/tables/decision_outcome_summary.csv",
            caption="../../report/decision_outcomes.rst",
            category="Decision audit",
        ),
        md="results/tables/decision_outcome_summary.md",
    params:
        tasks=decision_task_names(),
    log:
        "logs/decision/outcomes.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/summarise_decision_outcomes.py"


rule build_decision_frames:
    input:
        prompts=decision_prompt_tables(),
        outcomes=all_outcome_tables(decision_task_names()),
    output:
        **DECISION_FRAMES,
    params:
        tasks=decision_task_names(),
        rank_points=decision_analysis_settings()["rank_points"],
    log:
        "logs/decision/frames.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/build_decision_frames.py"


rule check_decision_composition:
    input:
        **DECISION_FRAMES,
    output:
        **decision_table_outputs("composition"),
    params:
        alpha=decision_analysis_settings()["composition_alpha"],
        stop=decision_analysis_settings()["stop_on_differential_nonresponse"],
        confounded_arms=decision_confounded_arms(),
    log:
        "logs/decision/composition.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/check_decision_composition.py"


# Differential non-response per model and format: a finding the contrast tables are flagged
# with, or a stop (decision.analysis.stop_on_differential_nonresponse).
rule analyse_decision_nonresponse:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        outcomes=all_outcome_tables(decision_task_names()),
    output:
        **decision_table_outputs("nonresponse"),
    params:
        alpha=decision_analysis_settings()["nonresponse_alpha"],
        stop=decision_analysis_settings()["stop_on_differential_nonresponse"],
    log:
        "logs/decision/nonresponse.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/analyse_decision_nonresponse.py"


rule estimate_decision_contrasts:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        nonresponse_tests=decision_tables("nonresponse")["nonresponse_tests"],
        preregistration=config["decision"]["preregistration"],
        check=PREREGISTRATION_CHECK,
        files=list(decision_registered_files().values()),
    output:
        **decision_table_outputs("contrasts"),
    params:
        pooled_extensions=decision_pooled_extensions(),
        lock=PREREGISTRATION_LOCK,
        files=decision_registered_files(),
        design=decision_registered_design(),
    log:
        "logs/decision/contrasts.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/estimate_decision_contrasts.py"


rule plant_decision_disparities:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
        prompts=decision_design().get("prompts", DEFAULT_PROMPTS),
    output:
        **decision_table_outputs("planted"),
    params:
        settings=config_slice(
            decision_analysis_settings(), "planted_sizes", "planted_contrast", "simulate", "seed"
        ),
    log:
        "logs/decision/planted.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/plant_decision_disparities.py"


rule measure_decision_instrument:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        contrasts=decision_tables("contrasts")["contrasts"],
    output:
        **decision_table_outputs("instrument"),
    log:
        "logs/decision/instrument.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/measure_decision_instrument.py"


rule plot_decision_figures:
    input:
        contrasts=decision_tables("contrasts")["contrasts"],
        planted=decision_tables("planted")["planted"],
        position=decision_tables("instrument")["position"],
        ties=decision_tables("instrument")["ties"],
        recognition=decision_tables("instrument")["recognition"],
        nonresponse=decision_tables("nonresponse")["nonresponse"],
        contrasts_by=decision_tables("heterogeneity")["contrasts_by"],
        specification_curve=decision_tables("specification_curve")["specification_curve"],
    output:
        **{
            name: report(path, caption=f"../../report/decision_{name}_figure.rst", category="Decision audit")
            for name, path in decision_figures().items()
        },
        specification_curve_pdf="results/figures/decision_specification_curve.pdf",
    log:
        "logs/decision/figures.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/plot_decision_figures.py"


# Every planned contrast per model, mode and paraphrase, its heterogeneity (Cochran's Q and
# the factor x group interaction of a joint fit), race x gender cells and the mode differences
# of each contrast from one joint fit: exploratory, beside the pre-registered family.
rule estimate_decision_heterogeneity:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
        check=PREREGISTRATION_CHECK,
        files=list(decision_registered_files().values()),
    output:
        **decision_table_outputs("heterogeneity"),
    params:
        lock=PREREGISTRATION_LOCK,
        files=decision_registered_files(),
        design=decision_registered_design(),
    log:
        "logs/decision/heterogeneity.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/estimate_decision_heterogeneity.py"


# Every estimate the design's own choices give for each contrast of interest (arm, domain,
# format, mode, paraphrase, model, bundle type, estimator, outcome source), its verdict, and
# permutation tests of the whole curve: exploratory, beside the pre-registered family. Its
# time is specifications x (1 + 2 x permutations) fits: about a minute for the default design.
rule estimate_decision_specification_curve:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
        check=PREREGISTRATION_CHECK,
        files=list(decision_registered_files().values()),
    output:
        **decision_table_outputs("specification_curve"),
    params:
        settings=decision_analysis_settings()["specification_curve"],
        lock=PREREGISTRATION_LOCK,
        files=decision_registered_files(),
        design=decision_registered_design(),
    log:
        "logs/decision/specification_curve.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=240,
    script:
        "../../scripts/estimate_decision_specification_curve.py"


# The aid domain's contrasts on FairFund-Bench's stimuli beside the published ones (an empty
# table when no arm runs the aid domain).
rule estimate_decision_aid_replication:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
        published=decision_fairfund_published(),
    output:
        **decision_table_outputs("aid_replication"),
    log:
        "logs/decision/aid_replication.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/estimate_decision_aid_replication.py"


# The wording arm: every extension arm with several paraphrases, by paraphrase and as
# paraphrase x group, each cell marked where the composition check flagged it.
rule estimate_decision_wording:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        composition_flags=decision_tables("composition")["composition_flags"],
        preregistration=config["decision"]["preregistration"],
    output:
        **decision_table_outputs("wording"),
    params:
        name_assignments=decision_name_assignments(),
    log:
        "logs/decision/wording.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/estimate_decision_wording.py"


# A paired arm (`paired_with`: the reasoning rerun) against the same model without reasoning,
# on the prompts both answered.
rule compare_decision_reasoning:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
    output:
        **decision_table_outputs("reasoning_paired"),
    params:
        pairs=decision_paired_arms(),
    log:
        "logs/decision/reasoning_paired.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/compare_decision_reasoning.py"


# The exploratory bundle types (paraphrase_matched, name_matched, position_balanced): the
# paper's two open questions, recognition against ties and position against demographics.
rule measure_decision_bundle_designs:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
    output:
        **decision_table_outputs("bundle_designs"),
    log:
        "logs/decision/bundle_designs.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/measure_decision_bundle_designs.py"


# Cue types beyond name pairs (decision.design.cues): every planned contrast per cue type, each
# on its own rows with its composition check, and the cue types' convergent validity.
rule estimate_decision_cues:
    input:
        **DECISION_FRAMES,
        composition=decision_tables("composition")["composition"],
        preregistration=config["decision"]["preregistration"],
    output:
        **decision_table_outputs("cues"),
    params:
        composition_alpha=decision_analysis_settings()["composition_alpha"],
    log:
        "logs/decision/cues.log",
    conda:
        "../../../envs/analysis.yaml"
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/estimate_decision_cues.py"


# `snakemake decision`: this study alone.
rule decision:
    input:
        decision_outputs(),
