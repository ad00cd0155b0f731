# The decision audit's pre-registration lock and prompt tables.


rule freeze_preregistration:
    input:
        # ancient: editing the file later never re-locks it; the analysis labels results
        # exploratory instead (cueaudit.decision.preregistration.status).
        ancient(config["decision"]["preregistration"]),
    output:
        protected(PREREGISTRATION_LOCK),
    log:
        "logs/decision/freeze_preregistration.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../../scripts/freeze_preregistration.py"


rule build_decision_prompts:
    input:
        profiles=config["decision"]["profiles"],
        name_pairs=config["decision"]["name_pairs"],
        hobbies=config["decision"]["hobbies"],
        neighbourhoods=config["decision"]["neighbourhoods"],
        terms=config["decision"]["demographic_terms"],
        prompts=decision_prompt_resources(),
    output:
        decision_prompt_tables(),
    params:
        tasks=decision_task_names(),
        designs=decision_arms(),
        **config_slice(config["decision"], "profiles_format", "strip_suffixes", "audit_cues"),
    log:
        "logs/decision/build_decision_prompts.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/build_decision_prompts.py"
