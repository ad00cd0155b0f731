import dataclasses
from pathlib import Path

import pytest
import yaml

from cueaudit.config import (
    check_config_files,
    check_input_files,
    load_config_file,
    shards_warning,
    validate_config,
)
from cueaudit.decision import study as decision_study
from cueaudit.decision.design_settings import DesignSettings
from cueaudit.errors import InputError
from cueaudit.studies import STUDIES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def default_config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults() -> None:
    config = default_config()
    validate_config(config, SCHEMA, STUDIES)
    check_input_files(config, STUDIES, ROOT)
    assert config["decoding"]["temperature"] == 1.0
    assert config["probing"]["tasks"]["salary"]["limit"] is None


def test_every_violation_is_reported_by_key() -> None:
    config = default_config()
    config["probing"]["tasks"]["legal"]["outcome"] = "ternary"
    config["probing"]["tasks"]["legal"]["shards"] = 0
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    message = str(error.value)
    assert "config key probing.tasks.legal.outcome: 'ternary' is not one of" in message
    assert "config key probing.tasks.legal.shards: 0 is less than the minimum of 1" in message


def test_model_needs_a_source() -> None:
    config = default_config()
    config["models"] = {"m": {"backend": "hf"}}
    with pytest.raises(InputError, match=r"models\.m: give 'path'"):
        validate_config(config, SCHEMA, STUDIES)


def test_missing_dialog_file_is_named(tmp_path: Path) -> None:
    config = default_config()
    config["cues"]["dialog"] = {"cad": {"path": str(tmp_path / "cad.csv")}}
    validate_config(config, SCHEMA, STUDIES)
    with pytest.raises(InputError, match=r"cues\.dialog\.cad\.path: not found: .*cad\.csv"):
        check_input_files(config, STUDIES, ROOT)


def test_the_commented_openai_example_is_valid() -> None:
    """The GPT-5.2 block in config/config.yaml validates once uncommented."""
    text = (ROOT / "config/config.yaml").read_text()
    lines = text.splitlines()
    start = lines.index("  # gpt-5.2:")
    block = []
    for line in lines[start:]:
        if not line.startswith("  #"):
            break
        block.append(line.replace("  # ", "  ", 1).split("  #", 1)[0].rstrip())
    example = yaml.safe_load("models:\n" + "\n".join(block))["models"]
    config = default_config()
    config["models"] = example
    validate_config(config, SCHEMA, STUDIES)
    assert config["models"]["gpt-5.2"]["openai"]["batch"]["dry_run"] is True


def test_a_config_without_a_study_is_refused() -> None:
    config = default_config()
    del config["probing"], config["decision"]
    with pytest.raises(InputError, match=r"give at least one study block \(probing, decision\)"):
        validate_config(config, SCHEMA, STUDIES)


def test_the_schema_lists_the_registered_cue_sources() -> None:
    from cueaudit.cues import REGISTRY

    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["cues"]["properties"]
    assert schema["names"]["properties"]["lists"]["propertyNames"]["enum"] == list(
        REGISTRY["name"].sources
    )
    dialog = set(schema["dialog"]["properties"]) - {"n_clusters", "seed"}
    assert dialog == set(REGISTRY["dialog"].sources)


def test_a_config_without_models_names_the_key() -> None:
    config = default_config()
    del config["models"]
    with pytest.raises(InputError, match=r"config key \(top level\): 'models' is a required"):
        validate_config(config, SCHEMA, STUDIES)


def test_a_probing_block_without_tasks_names_the_key() -> None:
    config = default_config()
    del config["probing"]["tasks"]
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n  config key probing: 'tasks' is a required property"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda c: c["probing"]["tasks"]["legal"].update(shards=2.0),
            "config key probing.tasks.legal.shards: 2.0 is not of type 'integer'",
        ),
        (lambda c: c.update(seeds=[0.0]), "config key seeds.0: 0.0 is not of type 'integer'"),
        (
            lambda c: c["probing"]["tasks"]["salary"].update(max_new_tokens=16.0),
            "config key probing.tasks.salary.max_new_tokens: 16.0 is not of type 'integer'",
        ),
        (
            lambda c: c["cues"]["names"].update(per_group=True),
            "config key cues.names.per_group: True is not of type 'integer', 'null'",
        ),
    ],
)
def test_whole_number_floats_and_booleans_are_not_integers(change, message: str) -> None:
    config = default_config()
    change(config)
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == f"config: invalid configuration:\n  {message}"


def test_a_probing_task_named_race_prediction_is_refused() -> None:
    config = default_config()
    config["probing"]["tasks"]["race_prediction"] = config["probing"]["tasks"]["legal"]
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n  config key probing.tasks.race_prediction: the name is "
        "reserved for the race-prediction task (set it up under probing.race_prediction)"
    )


def test_an_unknown_race_prediction_task_is_named() -> None:
    config = default_config()
    config["probing"]["race_prediction"]["tasks"] = ["legal", "housing"]
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n  config key probing.race_prediction.tasks: unknown "
        "task 'housing' (probing.tasks has: healthcare, legal, salary)"
    )


def test_the_probing_study_needs_name_cues() -> None:
    config = default_config()
    del config["cues"]["names"]
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n  config key cues.names: required by the probing "
        "study (the name cues)"
    )


def test_the_decision_study_alone_needs_no_name_lists() -> None:
    config = default_config()
    del config["cues"]["names"], config["probing"]
    validate_config(config, SCHEMA, STUDIES)


@pytest.mark.parametrize("device", ["gpu", "cuda0", "CPU", "cuda:", ""])
def test_a_free_text_device_is_refused(device: str) -> None:
    config = default_config()
    config["models"]["smollm2-135m"]["device"] = device
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n  config key models.smollm2-135m.device: "
        f"{device!r} is not valid (expected auto, cpu, cuda or cuda:N)"
    )


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:11"])
def test_every_documented_device_is_accepted(device: str) -> None:
    config = default_config()
    config["models"]["smollm2-135m"]["device"] = device
    validate_config(config, SCHEMA, STUDIES)


def test_a_folder_given_as_a_file_is_named() -> None:
    config = default_config()
    config["probing"]["tasks"]["legal"]["base_prompts"] = "resources/prompts"
    validate_config(config, SCHEMA, STUDIES)
    with pytest.raises(InputError) as error:
        check_input_files(config, STUDIES, ROOT)
    assert str(error.value) == (
        "config: unusable input files:\n  config key probing.tasks.legal.base_prompts: a "
        "folder, not a file: resources/prompts"
    )


def test_the_ssa_source_may_be_a_folder(tmp_path: Path) -> None:
    config = default_config()
    config["cues"]["names"]["derive"] = {"ssa": {"path": str(tmp_path)}}
    validate_config(config, SCHEMA, STUDIES)
    check_input_files(config, STUDIES, ROOT)


def test_a_key_given_twice_is_named_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "seeds: [0]\nprobing:\n  tasks:\n    legal:\n      shards: 2\n"
        "      outcome: binary\n      shards: 4\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        load_config_file(path)
    assert str(error.value) == (
        f"{path}: field 'probing.tasks.legal.shards': key 'shards' given twice, at lines 5 and "
        "7 (only the last one would count)"
    )


def test_a_top_level_key_given_twice_is_found(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("seeds: [0]\nmodels: {}\nseeds: [1]\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        check_config_files([tmp_path / "absent.yaml", path])
    assert str(error.value) == (
        f"{path}: field 'seeds': key 'seeds' given twice, at lines 1 and 3 (only the last one "
        "would count)"
    )


def test_the_same_key_in_different_mappings_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "a: {shards: 1}\nb: {shards: 2}\nlist: [{x: 1}, {x: 2}]\n'1': one\n1: int\n",
        encoding="utf-8",
    )
    assert load_config_file(path) == {
        "a": {"shards": 1},
        "b": {"shards": 2},
        "list": [{"x": 1}, {"x": 2}],
        "1": "one",
        1: "int",
    }


def test_the_shipped_config_files_have_no_repeated_keys() -> None:
    for path in [ROOT / "config/config.yaml", *sorted((ROOT / "config").rglob("*.yaml"))]:
        assert isinstance(load_config_file(path), dict)
    assert load_config_file(ROOT / "config/config.yaml") == default_config()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "seeds: [0]\nprobing:\n  tasks:\n\tlegal: {}\n",
            "YAML syntax error at line 4, column 1: while scanning for the next token; found "
            "character '\\t' that cannot start any token",
        ),
        (
            "seeds: [0\nmodels: {}\n",
            "YAML syntax error at line 2, column 7: while parsing a flow sequence; expected ',' "
            "or ']', but got ':'",
        ),
        (
            "probing:\n  tasks: x\n   legal: 1\n",
            "YAML syntax error at line 3, column 9: mapping values are not allowed here",
        ),
    ],
)
def test_a_yaml_syntax_error_gives_line_and_column(tmp_path: Path, text: str, message) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_config_file(path)
    assert str(error.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "list"), ("just text\n", "str"), ("42\n", "int")]
)
def test_a_config_file_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_config_file(path)
    assert str(error.value) == f"{path}: the top level must be a mapping of keys, not {kind}"


def test_a_config_file_that_is_a_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"cannot read the config file: \[Errno 21\] Is a dir"):
        load_config_file(tmp_path)


def test_an_unknown_decision_model_is_named() -> None:
    config = default_config()
    config["decision"]["models"] = ["smollm2-135m", "gpt-9"]
    config["decision"]["extensions"] = {
        "topup": {"extension": True, "models": ["llama"], "design": {"replicates": 2}}
    }
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA, STUDIES)
    assert str(error.value) == (
        "config: invalid configuration:\n"
        "  config key decision.models: unknown models 'gpt-9' (models has: smollm2-135m)\n"
        "  config key decision.extensions.topup.models: unknown models 'llama' (models has: "
        "smollm2-135m)"
    )


def test_an_empty_config_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_config_file(path)
    assert str(error.value) == f"{path}: the file is empty (it must hold the config's keys)"


def test_a_json_config_is_read_as_json(tmp_path: Path) -> None:
    """Snakemake reads JSON first: tabs between tokens are fine there, and 1e5 is a number."""
    path = tmp_path / "config.json"
    path.write_text('{\n\t"seeds": [0],\n\t"probing": {"scale": 1e5}\n}\n', encoding="utf-8")
    assert load_config_file(path) == {"seeds": [0], "probing": {"scale": 100000.0}}


def test_a_key_given_twice_in_a_json_config_is_named_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        '{\n\t"seeds": [0],\n\t"probing": {\n\t\t"tasks": {},\n\t\t"tasks": {"a": 1}\n\t}\n}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        load_config_file(path)
    assert str(error.value) == (
        f"{path}: field 'probing.tasks': key 'tasks' given twice, at lines 4 and 5 (only the last "
        "one would count)"
    )


def test_the_decision_design_defaults_live_in_the_schema() -> None:
    """Validation fills every design setting of the pre-registered design from the schema
    (the lock binds the design as it runs), and the library reads the same defaults for a
    design it is handed unvalidated; an extension's design gets none of its own: it inherits
    what it leaves out from the pre-registered design."""
    config = default_config()
    config["decision"]["design"] = {"paraphrases": 3}
    config["decision"]["extensions"] = {
        "lending": {"extension": True, "design": {"domains": ["lending"]}}
    }
    validate_config(config, SCHEMA, STUDIES)
    design = config["decision"]["design"]
    assert set(design) == {field.name for field in dataclasses.fields(DesignSettings)}
    assert design["cues"] == ["name_pair"] and design["bundles_per_type"] == 24
    assert DesignSettings.of(design) == DesignSettings.of({"paraphrases": 3})
    assert config["decision"]["extensions"]["lending"]["design"] == {"domains": ["lending"]}
    lending = decision_study.arms(config)["lending"]
    assert lending["paraphrases"] == 3 and lending["domains"] == ["lending"]


def test_very_many_shards_are_warned_of_with_the_keys_that_set_them() -> None:
    """12 decision tasks at shards: 100 are 1,200 response shards, each its own jobs: a
    warning names the tasks with the most and the key that sets them; 1,000 pass quietly."""
    keys = {f"decision_t{i}": "decision.shards" for i in range(12)}
    assert shards_warning(dict.fromkeys(keys, 100), keys) is not None
    warning = shards_warning(dict.fromkeys(keys, 100) | {"legal": 7}, keys | {"legal": "x"})
    assert warning is not None and warning.startswith("1207 response shards")
    assert "decision_t0: 100 (decision.shards)" in warning and "legal" not in warning
    assert shards_warning({"legal": 1000}, {"legal": "probing.tasks.legal.shards"}) is None
