"""Export prompts and parsed responses in the layout and encoding of the authors' replication
package (manueltonneau/llm-demographic-cues), so their scripts read our outputs unchanged::

    prompts/<task>/<task>_<cue>_constrained.parquet
    decoder_model_responses_cleaned/<task>_<cue>_constrained_<model>_seed_<n>.csv
    decoder_model_responses_race_pred/<task>_<cue>_constrained_<model>_seed_<n>.csv
    MANIFEST.csv

Each column, and the line of their code that reads it, is documented in
docs/replication-export.md. In short: the package's merge keys ``prompt_id`` (integer id of
the base prompt within its task), ``name`` (name cues), ``convo_concat_id`` (dialog cues),
``race`` (``none`` on no-cue rows) and ``gender``; ``response_final`` ``Yes``/``No`` for yes/no
tasks (empty when unparsed) and ``salary_final`` for USD tasks; the race label in the
race-prediction files' ``response_text``. cueaudit's own values are kept as extra columns
(``answer``, ``p_yes``, ``parse_error``, ``prompt_uid``, ``base_id``, ``cue``, ...).

Nothing holds every text of a task at once: prompt files are streamed per (task, cue) with
polars sinks, responses a shard (or a batch of outcomes) at a time. The export is built in
``<out_dir>.partial`` and renamed at the end, so a failure leaves no partial export.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Final

import polars as pl
import pyarrow.parquet as pq

from cueaudit.cues.registry import REGISTRY
from cueaudit.cues.vocabulary import NO_CUE
from cueaudit.errors import InputError
from cueaudit.io import atomic_directory, check_within, write_csv
from cueaudit.prompts import TEXT_PARTS, text_expr

TASK_NAMES: dict[str, str] = {
    "healthcare": "medical_advice",
    "legal": "legal_advice",
    "salary": "salary_rec",
}
CUE_NAMES: Final[dict[str, str]] = REGISTRY.export_names()
# The package's columns that carry a cue value (name, convo_concat_id), set on the rows of
# the cue types that name them and null elsewhere.
VALUE_KINDS: Final = REGISTRY.export_columns()
VALUE_COLUMNS: Final = tuple(VALUE_KINDS)
RACE_PREDICTION_TASK = "race_prediction"
#: The race their aggregation looks the no-cue baseline up under (``pooled("neutral", "none")``).
NO_CUE_RACE: Final = "none"
YES, NO = "Yes", "No"
KEY_COLUMNS: Final = ("prompt_id", *VALUE_COLUMNS, "race", "gender")
RESPONSE_COLUMNS: Final = (*KEY_COLUMNS, "response_text", "response_final", "salary_final",
                           "p_yes", "yes_no_mass", "answer", "parse_error", "prompt_uid",
                           "base_id", "cue", "model", "seed")  # fmt: skip
RACE_PRED_COLUMNS: Final = (*KEY_COLUMNS, "response_text", "response_final", "race_pred_status",
                            "prompt_uid", "base_id", "cue", "model", "seed")  # fmt: skip
PROMPT_COLUMNS: Final = (*KEY_COLUMNS, "prompt", "prompt_uid", "base_id", "cue", "cue_value",
                         "task")  # fmt: skip
#: Prompt rows written at once (their texts assembled together): 16k dialog prompts of
#: 2,400 characters are 40 MB.
TEXT_BATCH_ROWS: Final = 16_384
#: Outcome rows handled at once when no response shard bounds the batch.
BATCH_ROWS: Final = 250_000
MANIFEST_SCHEMA: Final = {"path": pl.String(), "rows": pl.Int64(), "content": pl.String()}

Manifest = list[tuple[str, int, str]]


def package_name(task: str, cue: str) -> tuple[str, str]:
    """The package's file-name parts of a cueaudit task and cue (their own id if unnamed)."""
    return TASK_NAMES.get(task, task), CUE_NAMES.get(cue, cue)


def export_replication(
    out_dir: str | Path,
    *,
    prompts: Sequence[str | Path],
    outcomes: Sequence[str | Path],
    responses: Sequence[str | Path] = (),
    task_outcomes: Mapping[str, str],
    batch_rows: int = BATCH_ROWS,
) -> pl.DataFrame:
    """Write the replication-package layout under ``out_dir``; returns the manifest (one row
    per file: path, rows, content), also written as ``MANIFEST.csv``."""
    with atomic_directory(out_dir) as stage:
        manifest = _Export(stage, prompts, outcomes, responses, task_outcomes, batch_rows).run()
        frame = pl.DataFrame(manifest, schema=MANIFEST_SCHEMA, orient="row").sort("path")
        write_csv(frame, stage / "MANIFEST.csv")
    return frame


def _require(path: str | Path, columns: Sequence[str]) -> list[str]:
    """The columns of the parquet file ``path``, or InputError naming the ones it lacks."""
    names = pl.scan_parquet(path).collect_schema().names()
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(str(path), f"missing column(s): {', '.join(missing)}", missing[0])
    return names


def _combos(
    paths: Sequence[str | Path], columns: Sequence[str], race_columns: Sequence[str] | None = None
) -> dict[tuple[str, int, str], list[Path]]:
    """(model, seed, task) -> the files holding rows of it (read from the files, not names).

    Files of advice tasks must hold ``columns``; race-prediction files ``race_columns``
    (default the same).
    """
    found: dict[tuple[str, int, str], list[Path]] = {}
    for path in paths:
        _require(path, ("prompt_uid", "model", "seed", "task"))
        keys = (
            pl.scan_parquet(path)
            .select(pl.col("model").cast(pl.String), pl.col("seed"), pl.col("task").cast(pl.String))
            .unique()
            .collect()
        )
        tasks = set(keys["task"].to_list())
        if tasks - {RACE_PREDICTION_TASK}:
            _require(path, columns)
        if RACE_PREDICTION_TASK in tasks:
            _require(path, columns if race_columns is None else race_columns)
        for model, seed, task in keys.iter_rows():
            found.setdefault((str(model), int(seed), str(task)), []).append(Path(path))
    return found


def _of(model: str, seed: int, task: str) -> pl.Expr:
    return (
        (pl.col("model").cast(pl.String) == model)
        & (pl.col("seed") == seed)
        & (pl.col("task").cast(pl.String) == task)
    )


class _CsvParts:
    """CSV files of one folder, model and seed, one per (task, cue), appended a chunk at a
    time (header once)."""

    def __init__(self, root: Path, folder: str, model: str, seed: int, columns: Sequence[str]):
        self.root, self.folder, self.columns = root, folder, list(columns)
        self.model = model
        self.seed = seed
        self.handles: dict[tuple[str, str], IO[bytes]] = {}
        self.rows: dict[tuple[str, str], int] = {}

    def path(self, task: str, cue: str) -> Path:
        t, c = package_name(task, cue)
        name = f"{t}_{c}_constrained_{self.model}_seed_{self.seed}.csv"
        return check_within(self.root / self.folder / name, self.root)

    def add(self, frame: pl.DataFrame) -> None:
        for (task, cue), part in frame.partition_by(["task", "cue"], as_dict=True).items():
            key = (str(task), str(cue))
            handle = self.handles.get(key)
            if handle is None:
                path = self.path(*key)
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = self.handles[key] = path.open("wb")
                self.rows[key] = 0
            part.select(self.columns).write_csv(handle, include_header=self.rows[key] == 0)
            self.rows[key] += part.height

    def close(self, content: str) -> Manifest:
        for handle in self.handles.values():
            handle.close()
        return [
            (str(self.path(*key).relative_to(self.root)), rows, content)
            for key, rows in self.rows.items()
        ]


class _Export:
    def __init__(
        self,
        root: Path,
        prompts: Sequence[str | Path],
        outcomes: Sequence[str | Path],
        responses: Sequence[str | Path],
        task_outcomes: Mapping[str, str],
        batch_rows: int,
    ) -> None:
        self.root, self.task_outcomes, self.batch_rows = root, dict(task_outcomes), batch_rows
        self.outcomes = _combos(outcomes, ("answer",), race_columns=("answer_label",))
        self.responses = _combos(responses, ("completion",))
        self.prompt_files: dict[str, Path] = {}  # advice task -> prompt table
        self.rp_files: list[Path] = []
        for path in prompts:
            columns = _require(path, ("prompt_uid", "task", "base_id", "cue"))
            if "source_prompt_uid" not in columns:
                _require(path, ("cue_type", "cue_value", "race", "gender"))
                text_expr(columns)  # InputError when the table has no text
            tasks = pl.scan_parquet(path).select(pl.col("task").cast(pl.String).unique()).collect()
            for task in tasks["task"]:
                if task == RACE_PREDICTION_TASK:
                    self.rp_files.append(Path(path))
                else:
                    self.prompt_files[str(task)] = Path(path)
        self.prompt_ids = {task: self._prompt_ids(task) for task in self.prompt_files}

    def run(self) -> Manifest:
        manifest = self.write_prompts()
        cleaned = self.write_responses()
        predicted = self.write_race_predictions()
        manifest += cleaned + predicted
        manifest += self.write_missing_predictions(cleaned, predicted)
        return manifest

    # -- prompts ---------------------------------------------------------------------------

    def _scan(self, task: str) -> pl.LazyFrame:
        return pl.scan_parquet(self.prompt_files[task]).filter(
            pl.col("task").cast(pl.String) == task
        )

    def _prompt_ids(self, task: str) -> dict[str, int]:
        """base_id -> prompt_id: the dense rank of base_id within the task, from 0."""
        ids = self._scan(task).select(pl.col("base_id").cast(pl.String).unique().sort()).collect()
        return {b: i for i, b in enumerate(ids["base_id"])}

    def _keys(self, task: str) -> list[pl.Expr]:
        """The package's merge keys (and our ids) of a prompt table's rows, as expressions."""
        cue = pl.col("cue").cast(pl.String)
        cue_type = pl.col("cue_type").cast(pl.String)
        value = pl.col("cue_value").cast(pl.String)
        return [
            pl.col("base_id")
            .cast(pl.String)
            .replace_strict(self.prompt_ids[task], return_dtype=pl.Int64)
            .alias("prompt_id"),
            *(
                pl.when(cue_type.is_in(kinds)).then(value).alias(c)
                for c, kinds in VALUE_KINDS.items()
            ),
            pl.when(cue == NO_CUE)
            .then(pl.lit(NO_CUE_RACE))
            .otherwise(pl.col("race").cast(pl.String))
            .alias("race"),
            pl.col("gender").cast(pl.String),
            pl.col("prompt_uid").cast(pl.String),
            pl.col("base_id").cast(pl.String),
            cue.alias("cue"),
        ]

    def _key_frame(self, task: str, uids: pl.Series) -> pl.DataFrame:
        """Merge keys of the prompts of ``task`` with these uids (no text is read)."""
        return (
            self._scan(task)
            .filter(pl.col("prompt_uid").cast(pl.String).is_in(uids.implode()))
            .select(*self._keys(task), task=pl.lit(task))
            .collect()
        )

    def write_prompts(self) -> Manifest:
        manifest: Manifest = []
        for task in sorted(self.prompt_files):
            scan = self._scan(task)
            columns = scan.collect_schema().names()
            cues = scan.select(pl.col("cue").cast(pl.String).unique().sort()).collect()["cue"]
            extra = ["fk_grade"] if "fk_grade" in columns else []
            for cue in cues:
                t, c = package_name(task, cue)
                path = check_within(
                    self.root / "prompts" / t / f"{t}_{c}_constrained.parquet", self.root
                )
                lazy = scan.filter(pl.col("cue").cast(pl.String) == cue).select(
                    *self._keys(task),
                    *extra,
                    *(pl.col(part) for part in columns if part in ("text", *TEXT_PARTS)),
                    cue_value=pl.col("cue_value").cast(pl.String),
                    task=pl.lit(task),
                )
                path.parent.mkdir(parents=True, exist_ok=True)
                rows = self._write_texts(lazy, columns, [*PROMPT_COLUMNS, *extra], path)
                manifest.append((str(path.relative_to(self.root)), rows, "prompts"))
        return manifest

    def _write_texts(
        self, lazy: pl.LazyFrame, columns: Sequence[str], order: Sequence[str], path: Path
    ) -> int:
        """Write ``lazy`` with its ``prompt`` text as parquet, ``TEXT_BATCH_ROWS`` rows (one
        row group) at a time: the texts are assembled per batch, never for the whole file."""
        rows, writer = 0, None
        try:
            for batch in lazy.collect_batches(chunk_size=TEXT_BATCH_ROWS):
                batch = batch.with_columns(prompt=text_expr(columns).cast(pl.String))
                table = batch.select(order).to_arrow(compat_level=pl.CompatLevel.oldest())
                if writer is None:
                    writer = pq.ParquetWriter(path, table.schema, compression="zstd")
                writer.write_table(table)
                rows += batch.height
        finally:
            if writer is not None:
                writer.close()
        if writer is None:  # no rows: an empty file with the columns
            lazy.with_columns(prompt=pl.lit(None, dtype=pl.String)).select(order).sink_parquet(path)
        return rows

    # -- responses -------------------------------------------------------------------------

    def _outcome_batches(self, model: str, seed: int, task: str) -> Iterator[pl.DataFrame]:
        """The outcomes of one model, seed and task with their completions: a response shard
        at a time, then (outcomes without a shard row) ``batch_rows`` at a time."""
        outcomes = pl.scan_parquet(self.outcomes[(model, seed, task)]).filter(
            _of(model, seed, task)
        )
        outcomes = outcomes.with_columns(pl.col("prompt_uid").cast(pl.String))
        shards = self.responses.get((model, seed, task), [])
        for shard in shards:
            done = (
                pl.scan_parquet(shard)
                .filter(_of(model, seed, task))
                .select(pl.col("prompt_uid").cast(pl.String), pl.col("completion").cast(pl.String))
                .collect()
            )
            if done.height:
                uids = done["prompt_uid"].implode()
                part = outcomes.filter(pl.col("prompt_uid").is_in(uids)).collect()
                yield part.join(done, on="prompt_uid", how="left")
        rest = outcomes
        if shards:
            seen = pl.scan_parquet(shards).filter(_of(model, seed, task))
            seen = seen.select(pl.col("prompt_uid").cast(pl.String))
            rest = outcomes.join(seen, on="prompt_uid", how="anti")
        for part in rest.collect_batches(chunk_size=self.batch_rows):
            yield part.with_columns(completion=pl.lit(None, dtype=pl.String))

    def _response_columns(self, frame: pl.DataFrame, task: str) -> pl.DataFrame:
        kind = self.task_outcomes.get(task)
        answer = pl.col("answer").cast(pl.Float64)
        if kind == "binary":
            final = pl.when(answer == 1.0).then(pl.lit(YES)).when(answer == 0.0).then(pl.lit(NO))
        else:
            final = answer.cast(pl.String)
        optional = {
            c: pl.col(c) if c in frame.columns else pl.lit(None, dtype=dtype)
            for c, dtype in (
                ("parse_error", pl.String()),
                ("p_affirmative", pl.Float64()),
                ("answer_mass", pl.Float64()),
            )
        }
        return frame.with_columns(
            response_text=pl.col("completion"),
            response_final=final,
            salary_final=pl.when(pl.lit(kind == "usd")).then(answer),
            p_yes=optional["p_affirmative"].cast(pl.Float64),
            yes_no_mass=optional["answer_mass"].cast(pl.Float64),
            answer=answer,
            parse_error=optional["parse_error"].cast(pl.String),
            model=pl.col("model").cast(pl.String),
        )

    def write_responses(self) -> Manifest:
        manifest: Manifest = []
        combos = sorted(k for k in self.outcomes if k[2] in self.prompt_files)
        for model, seed, task in combos:
            parts = _CsvParts(
                self.root, "decoder_model_responses_cleaned", model, seed, RESPONSE_COLUMNS
            )
            try:
                for batch in self._outcome_batches(model, seed, task):
                    keys = self._key_frame(task, batch["prompt_uid"])
                    joined = batch.drop("task").join(keys, on="prompt_uid", how="inner")
                    parts.add(self._response_columns(joined, task))
            finally:
                manifest += parts.close("responses")
        return manifest

    # -- race predictions ------------------------------------------------------------------

    def write_race_predictions(self) -> Manifest:
        if not self.rp_files:
            return []
        rp_columns = set(pl.scan_parquet(self.rp_files[0]).collect_schema().names())
        if not {"source_prompt_uid", "source_task"} <= rp_columns:
            return []
        sources = pl.scan_parquet(self.rp_files).select(
            pl.col("prompt_uid").cast(pl.String),
            pl.col("source_prompt_uid").cast(pl.String),
            pl.col("source_task").cast(pl.String),
        )
        manifest: Manifest = []
        combos = sorted(k for k in self.outcomes if k[2] == RACE_PREDICTION_TASK)
        for model, seed, task in combos:
            scan = pl.scan_parquet(self.outcomes[(model, seed, task)]).filter(
                _of(model, seed, task)
            )
            if "answer_label" not in scan.collect_schema().names():
                continue
            labels = scan.select(
                pl.col("prompt_uid").cast(pl.String), pl.col("answer_label").cast(pl.String)
            )
            parts = _CsvParts(
                self.root, "decoder_model_responses_race_pred", model, seed, RACE_PRED_COLUMNS
            )
            try:
                for batch in labels.collect_batches(chunk_size=self.batch_rows):
                    src = sources.filter(pl.col("prompt_uid").is_in(batch["prompt_uid"].implode()))
                    batch = batch.join(src.collect(), on="prompt_uid", how="inner")
                    for (source_task,), part in batch.partition_by(
                        "source_task", as_dict=True
                    ).items():
                        if source_task not in self.prompt_files:
                            continue
                        keys = self._key_frame(str(source_task), part["source_prompt_uid"])
                        part = part.drop("prompt_uid").rename({"source_prompt_uid": "prompt_uid"})
                        joined = part.join(keys, on="prompt_uid", how="inner")
                        parts.add(
                            joined.with_columns(
                                response_text=pl.col("answer_label"),
                                response_final=pl.col("answer_label"),
                                race_pred_status=pl.when(pl.col("answer_label").is_null())
                                .then(pl.lit("unparsed"))
                                .otherwise(pl.lit("predicted")),
                                model=pl.lit(model),
                                seed=pl.lit(seed),
                            )
                        )
            finally:
                manifest += parts.close("race_pred")
        return manifest

    def write_missing_predictions(self, cleaned: Manifest, predicted: Manifest) -> Manifest:
        """Race-prediction files for the cued responses that have none (race prediction not
        run for that task, model or seed), with the merge keys and an empty label: their
        master builder (build_masters.py) stops when a master table gets no rows, and it
        merges responses with race predictions on the keys (inner join). No-cue files are
        left out so neutral_default_race.py does not count a model without predictions."""
        have = {Path(p).name for p, _, _ in predicted}
        neutral = CUE_NAMES.get(NO_CUE, NO_CUE)
        manifest: Manifest = []
        for path, _, _ in cleaned:
            name = Path(path).name
            if name in have or f"_{neutral}_constrained_" in name:
                continue
            target = self.root / "decoder_model_responses_race_pred" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            lazy = pl.scan_csv(self.root / path, infer_schema=False).with_columns(
                response_text=pl.lit(None, dtype=pl.String),
                response_final=pl.lit(None, dtype=pl.String),
                race_pred_status=pl.lit("not_run"),
            )
            lazy.select(RACE_PRED_COLUMNS).sink_csv(target)
            rows = pl.scan_csv(target, infer_schema=False).select(pl.len()).collect().item()
            manifest.append((str(target.relative_to(self.root)), rows, "race_pred_not_run"))
        return manifest
