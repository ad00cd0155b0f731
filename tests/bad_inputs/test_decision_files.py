"""Bad decision-audit files and settings, and a few bad configs: the exact message of each.

Cases by category (34):

- the decision prompts file (``cueaudit.decision.formats.load_prompt_resources``): 8
- the pre-registration (``cueaudit.decision.preregistration``, through ``freeze`` into
  ``results/``: a malformed file is never locked): 11
- decision design settings (``cueaudit.decision.design_settings.DesignSettings.of``): 8
- bundle sizes (``cueaudit.decision.design.bundle_sizes``): 4
- config (``cueaudit.config.validate_config``; its messages are being reworded elsewhere,
  so these cases check the key and the file-free source only): 3
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from cueaudit.config import validate_config
from cueaudit.decision.design import bundle_sizes
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.decision.formats import load_prompt_resources
from cueaudit.decision.preregistration import freeze
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES
from tests.bad_inputs.battery import ROOT, Case, Where, params, run_case
from tests.conftest import tiny_config

# -- the decision prompts file ---------------------------------------------------------------

PROMPTS = yaml.safe_load((ROOT / "resources/decision/prompts.yaml").read_text(encoding="utf-8"))


def prompts_with(change: Any) -> dict[str, str]:
    """The shipped prompts file with one change applied to its parsed content."""
    data = copy.deepcopy(PROMPTS)
    change(data)
    return {"prompts.yaml": yaml.safe_dump(data, sort_keys=False)}


def prompts(w: Where) -> object:
    return load_prompt_resources(w / "prompts.yaml")


def set_key(path: str, value: Any) -> Any:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data[key]
        data[last] = value

    return change


def drop_key(path: str) -> Any:
    def change(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data[key]
        del data[last]

    return change


PROMPT_CASES = [
    Case(
        "prompts-yaml-syntax-error-line-2",
        prompts,
        "{in}/prompts.yaml: not valid YAML: line 2, column 8: expected ',' or ']', but got ':'",
        {"prompts.yaml": "candidate_labels: [A, B, C, D\ndomains:\n  hiring: {name_line: x}\n"},
    ),
    Case(
        "prompts-top-key-layout-missing",
        prompts,
        "{in}/prompts.yaml: missing key 'layout'",
        prompts_with(drop_key("layout")),
    ),
    Case(
        "prompts-domain-triage-missing",
        prompts,
        "{in}/prompts.yaml: field 'domains': missing key 'triage'",
        prompts_with(drop_key("domains.triage")),
    ),
    Case(
        "prompts-template-field-unknown",
        prompts,
        "{in}/prompts.yaml: field 'domains.hiring.name_line': unknown field {salary} "
        "(allowed: {name})",
        prompts_with(set_key("domains.hiring.name_line", "Applicant: {name} ({salary})")),
    ),
    Case(
        "prompts-template-empty",
        prompts,
        "{in}/prompts.yaml: field 'candidate_header': expected a non-empty string",
        prompts_with(set_key("candidate_header", "  ")),
    ),
    Case(
        "prompts-one-paraphrase-only",
        prompts,
        "{in}/prompts.yaml: field 'instructions.rate': expected at least two paraphrases",
        prompts_with(set_key("instructions.rate", {"p1": PROMPTS["instructions"]["rate"]["p1"]})),
    ),
    Case(
        "prompts-three-candidate-labels",
        prompts,
        "{in}/prompts.yaml: field 'candidate_labels': expected a list of at least 4 strings",
        prompts_with(set_key("candidate_labels", ["A", "B", "C"])),
    ),
    Case(
        "prompts-candidate-labels-repeated",
        prompts,
        "{in}/prompts.yaml: field 'candidate_labels': entries must be distinct",
        prompts_with(set_key("candidate_labels", ["A", "B", "C", "A"])),
    ),
]

# -- the pre-registration ------------------------------------------------------------------------

PREREG = (ROOT / "config/decision/preregistration.yaml").read_text(encoding="utf-8")


def prereg_with(old: str, new: str) -> dict[str, str]:
    assert old in PREREG, old
    return {"prereg.yaml": PREREG.replace(old, new)}


def lock(w: Where) -> object:
    """Freezing writes the lock under results/ only for a valid file."""
    return freeze(w / "prereg.yaml", w.results / "decision" / "preregistration.lock")


PREREG_CASES = [
    Case("prereg-file-missing", lock, "{in}/prereg.yaml: file not found"),
    Case(
        "prereg-yaml-syntax-error",
        lock,
        "{in}/prereg.yaml: not valid YAML: line 2, column 12: mapping values are not allowed here",
        {"prereg.yaml": "alpha: 0.05\nprimary: id: x\n"},
    ),
    Case(
        "prereg-top-level-a-list",
        lock,
        "{in}/prereg.yaml: expected a mapping at the top level",
        {"prereg.yaml": "- alpha: 0.05\n"},
    ),
    Case(
        "prereg-alpha-missing",
        lock,
        "{in}/prereg.yaml: field 'alpha': missing key 'alpha'",
        prereg_with("alpha: 0.05\n", ""),
    ),
    Case(
        "prereg-alpha-not-a-number",
        lock,
        "{in}/prereg.yaml: field 'alpha': a number between 0 and 1, got 'five percent'",
        prereg_with("alpha: 0.05", "alpha: five percent"),
    ),
    Case(
        "prereg-format-unknown",
        lock,
        "{in}/prereg.yaml: field 'family.formats': unknown format 'choose' "
        "(known: rate, decide, rank)",
        prereg_with("formats: [rate, decide, rank]", "formats: [rate, choose]"),
    ),
    Case(
        "prereg-domain-unknown",
        lock,
        "{in}/prereg.yaml: field 'family.domains': unknown domain 'housing' "
        "(known: hiring, lending, triage, aid)",
        prereg_with("domains: [hiring, lending, triage]", "domains: [hiring, housing]"),
    ),
    Case(
        "prereg-family-without-contrasts",
        lock,
        "{in}/prereg.yaml: field 'family': missing key 'contrasts'",
        {"prereg.yaml": PREREG.split("  contrasts:\n")[0] + PREREG.split("reference: male}\n")[1]},
    ),
    Case(
        "prereg-contrast-without-focal",
        lock,
        "{in}/prereg.yaml: field 'family.contrasts.black_vs_white': missing key 'focal'",
        prereg_with("{dimension: race, focal: Black, reference: White}", "{dimension: race}"),
    ),
    Case(
        "prereg-margins-unknown-format",
        lock,
        "{in}/prereg.yaml: field 'equivalence_margins': margins for unknown formats ['vote']",
        prereg_with("  decide: null\n", "  decide: null\n  vote: 0.1\n"),
    ),
    Case(
        "prereg-margin-negative",
        lock,
        "{in}/prereg.yaml: field 'equivalence_margins.rate': a positive number or null, got -0.09",
        prereg_with("rate: 0.090 ", "rate: -0.09 "),
    ),
]

# -- design settings and bundle sizes --------------------------------------------------------------


def settings(**values: Any) -> Any:
    return lambda w: DesignSettings.of(values)


DESIGN_CASES = [
    Case(
        "design-seed-negative",
        settings(seed=-1),
        "decision settings: field 'seed': an integer of at least 0",
    ),
    Case(
        "design-seed-a-float",
        settings(seed=1.0),
        "decision settings: field 'seed': an integer of at least 0",
    ),
    Case(
        "design-paraphrases-a-boolean",
        settings(paraphrases=True),
        "decision settings: field 'paraphrases': an integer of at least 1",
    ),
    Case(
        "design-domains-a-string",
        settings(domains="hiring"),
        "decision settings: field 'domains': a non-empty list of: hiring, lending, triage, aid",
    ),
    Case(
        "design-domain-unknown",
        settings(domains=["hiring", "retail"]),
        "decision settings: field 'domains': unknown 'retail' (known: "
        "('hiring', 'lending', 'triage', 'aid'))",
    ),
    Case(
        "design-task-unknown",
        settings(tasks=["decision_rate_voice"]),
        "decision settings: field 'tasks': unknown 'decision_rate_voice' (known: "
        "('decision_rate_text', 'decision_rate_tool', 'decision_decide_text', "
        "'decision_decide_tool', 'decision_rank_text', 'decision_rank_json', "
        "'decision_rank_tool', 'decision_probe_choice', 'decision_probe_free'))",
    ),
    Case(
        "design-prompts-path-empty",
        settings(prompts=""),
        "decision settings: field 'prompts': a path",
    ),
    Case(
        "design-probe-bundles-negative",
        settings(probe_bundles=-4),
        "decision settings: field 'probe_bundles': an integer of at least 0",
    ),
]

BUNDLE_CASES = [
    Case(
        "bundles-not-a-multiple-of-the-block",
        lambda w: bundle_sizes(6),
        "bundles_per_type: field 'demographic_matched': a multiple of 4, got 6",
    ),
    Case(
        "bundles-a-string",
        lambda w: bundle_sizes("24"),  # type: ignore[arg-type]
        "bundles_per_type: field 'demographic_matched': a multiple of 4, got '24'",
    ),
    Case(
        "bundles-type-unknown",
        lambda w: bundle_sizes({"demographic_matched": 4, "name_only": 4}),
        "bundles_per_type: unknown bundle type 'name_only'",
    ),
    Case(
        "bundles-disguised-not-a-multiple-of-12",
        lambda w: bundle_sizes({"disguised_placebo": 8}),
        "bundles_per_type: field 'disguised_placebo': a multiple of 12, got 8",
    ),
]


@pytest.mark.parametrize("case", params(PROMPT_CASES + PREREG_CASES + DESIGN_CASES + BUNDLE_CASES))
def test_bad_decision_file_or_setting(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)


# -- config (a few: another change rewords these messages) -------------------------------------


@pytest.mark.parametrize(
    ("change", "key"),
    [
        pytest.param(lambda c: c.update(seeds=["zero"]), "seeds.0", id="config-seed-a-string"),
        pytest.param(
            lambda c: c["models"]["smollm2-135m"].update(backend="tpu"),
            "models.smollm2-135m.backend",
            id="config-backend-unknown",
        ),
        pytest.param(
            lambda c: c["probing"]["tasks"]["healthcare"].update(shards=0),
            "probing.tasks.healthcare.shards",
            id="config-shards-zero",
        ),
    ],
)
def test_bad_config_names_the_key(change: Any, key: str) -> None:
    config = tiny_config()
    change(config)
    with pytest.raises(InputError) as info:
        validate_config(config, ROOT / "workflow/schemas/config.schema.yaml", STUDIES)
    assert info.value.source == "config"
    assert f"config key {key}: " in str(info.value)
