# The decision audit's pre-registration lock and prompt tables.


rule freeze_preregistration:
    input:
        # Not ancient: an edited pre-registration or stimulus file reruns this (the lock is
        # kept: cueaudit.decision.preregistration.freeze), and the check it rewrites reruns
        # every analysis in the same run (decision_analysis_inputs), which relabels its tables
        # exploratory. Inference waits for the check as an ancient input: it never reruns.
        preregistration=config["decision"]["preregistration"],
        files=decision_registered_files().values(),
    output:
        PREREGISTRATION_CHECK,
    params:
        lock=PREREGISTRATION_LOCK,
        files=decision_registered_files(),
        design=decision_registered_design(),
        answers=decision_answer_folders(),
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
        fairfund_stimuli=decision_fairfund_stimuli(),
        first_names=decision_first_names(),
    output:
        decision_prompt_tables(),
    params:
        tasks=decision_task_names(),
        designs=decision_arms(),
        **config_slice(decision_cue_settings(), "dialect"),
        **config_slice(
            config["decision"], "profiles_format", "strip_suffixes", "audit_cues", "allowed_phrases"
        ),
    log:
        "logs/decision/build_decision_prompts.log",
    conda:
        "../../../envs/data.yaml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/build_decision_prompts.py"
