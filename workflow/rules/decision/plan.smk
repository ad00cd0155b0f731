# The power and sample-size planner: the configured design simulated at the effect sizes the
# user names, before any model call (the inference jobs wait for it when
# decision.plan.before_inference is set).


rule plan_decision:
    input:
        preregistration=config["decision"]["preregistration"],
        prompts=decision_prompt_tables(),
        profiles=config["decision"]["profiles"],
        name_pairs=config["decision"]["name_pairs"],
        fairfund_stimuli=decision_fairfund_stimuli(),
    output:
        **decision_table_outputs("plan"),
    params:
        tasks=decision_task_names(),
        max_new_tokens=decision_max_new_tokens(),
        config=decision_plan_config(),
    log:
        "logs/decision/plan.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 2
    resources:
        mem_mb=4000,
        runtime=60,
    script:
        "../../scripts/plan_decision.py"


rule decision_plan:
    input:
        decision_tables("plan").values(),
