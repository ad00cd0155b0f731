"""The decision-audit study (Vohra & Ravikiran, *The Audit Decides the Verdict*): hiring,
lending and triage profiles under 40 race × gender name pairs, judged as 1–5 ratings, yes/no
decisions and four-candidate rankings with ties, each also as a native tool call.

Its contract with the shared stages, which it uses like any study:

- **Prompts.** One table per inference task under ``results/prompts/{task}.parquet`` with the
  shared columns ``prompt_uid``, ``task``, ``text`` (and ``group`` when prompts share a long
  prefix), plus the design columns its analyses need (domain, format, bundle type and id,
  profile, name pair, position). Ids come from :func:`cueaudit.prompts.stable_uid`.
- **Answers.** Each task names an outcome kind of :mod:`cueaudit.parsing` (``rating``,
  ``binary``, ``ranking``) and its settings; the kind builds the :class:`AnswerSpec` (options
  to score, the ranking schema, the ``submit_*`` tools), so inference and parsing never see
  study code.
- **Registration.** :mod:`cueaudit.decision.study` is the study as the shared stages see it
  (a :class:`cueaudit.study.Study`: config checks, input files, arms, inference tasks, views,
  parse-rate grouping); ``workflow/rules/decision/common.smk`` registers its tables and
  outputs with the shared workflow (``register_study``), and its DuckDB views live in
  ``cueaudit.decision.views``.

The design, bundles, probes, pre-registration and analyses are built in this package.
"""
