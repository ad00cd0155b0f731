import _library  # noqa: F401  (puts src/ on the import path)

from cueaudit.io import setup_logging

setup_logging(snakemake.log[0])

from cueaudit.decision.build import write_decision_prompts  # noqa: E402

params = snakemake.params
write_decision_prompts(
    profiles_path=snakemake.input.profiles,
    profiles_format=params.profiles_format,
    strip_suffixes=params.strip_suffixes,
    audit_cues=params.audit_cues,
    name_pairs_path=snakemake.input.name_pairs,
    hobbies_path=snakemake.input.hobbies,
    neighbourhoods_path=snakemake.input.neighbourhoods,
    terms_path=snakemake.input.terms,
    designs=params.designs,
    out_paths=dict(zip(params.tasks, snakemake.output, strict=True)),
    allowed_phrases=params.allowed_phrases,
    fairfund_stimuli_path=(snakemake.input.fairfund_stimuli or [None])[0],
    first_names_path=(snakemake.input.first_names or [None])[0],
    dialect=dict(params.items()).get("dialect"),  # only when an arm lists the dialect cue
)
