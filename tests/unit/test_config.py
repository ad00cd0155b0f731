from pathlib import Path

import pytest
import yaml

from cueaudit.config import check_input_files, validate_config
from cueaudit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def default_config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults() -> None:
    config = default_config()
    validate_config(config, SCHEMA)
    check_input_files(config, ROOT)
    assert config["decoding"]["temperature"] == 1.0
    assert config["probing"]["tasks"]["salary"]["limit"] is None


def test_every_violation_is_reported_by_key() -> None:
    config = default_config()
    config["probing"]["tasks"]["legal"]["outcome"] = "ternary"
    config["probing"]["tasks"]["legal"]["shards"] = 0
    with pytest.raises(InputError) as error:
        validate_config(config, SCHEMA)
    message = str(error.value)
    assert "config key probing.tasks.legal.outcome: 'ternary' is not one of" in message
    assert "config key probing.tasks.legal.shards: 0 is less than the minimum of 1" in message


def test_model_needs_a_source() -> None:
    config = default_config()
    config["models"] = {"m": {"backend": "hf"}}
    with pytest.raises(InputError, match=r"models\.m: give 'path'"):
        validate_config(config, SCHEMA)


def test_missing_dialog_file_is_named(tmp_path: Path) -> None:
    config = default_config()
    config["cues"]["dialog"] = {"cad": {"path": str(tmp_path / "cad.csv")}}
    validate_config(config, SCHEMA)
    with pytest.raises(InputError, match=r"cues\.dialog\.cad\.path: not found: .*cad\.csv"):
        check_input_files(config, ROOT)


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
    validate_config(config, SCHEMA)
    assert config["models"]["gpt-5.2"]["openai"]["batch"]["dry_run"] is True


def test_a_config_without_a_study_is_refused() -> None:
    config = default_config()
    del config["probing"], config["decision"]
    with pytest.raises(InputError, match=r"give at least one study block \(probing, decision\)"):
        validate_config(config, SCHEMA)


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
        validate_config(config, SCHEMA)
