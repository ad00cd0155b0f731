"""Clusters of exactly one dialog per Black/White × male/female group, uniformly sampled.

Dialogs sharing a ``cluster_key`` and a number of turns (CAD: the pre-generated first turn,
matched on turns as in Appendix A.3; PRISM: the number of turns) are shuffled within each
group with a seeded generator and zipped into clusters; then ``n_clusters`` of all candidate
clusters are drawn uniformly with the same seed. The result depends only on the dialogs and
the seed, not on row order. The dialog cue type's variants and count are here too (its row is
in :mod:`cueaudit.cues.registry`).
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import polars as pl

from cueaudit.cues.cue_type import CueType, VariantCount, variant_rows
from cueaudit.errors import InputError
from cueaudit.io import write_csv, write_parquet

log = logging.getLogger(__name__)

GROUPS: Final = (("Black", "male"), ("Black", "female"), ("White", "male"), ("White", "female"))
CLUSTER_SCHEMA: Final = {
    "cluster_id": pl.String,
    "source": pl.String,
    "race": pl.String,
    "gender": pl.String,
    "dialog_id": pl.String,
    "annotator_id": pl.String,
    "n_turns": pl.Int64,
    "cluster_key": pl.String,
    "prefix": pl.String,
}


def _rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def candidate_clusters(dialogs: pl.DataFrame, seed: int) -> list[list[dict[str, Any]]]:
    """All clusters (four dialogs, in GROUPS order) the dialogs allow, sorted by cluster id."""
    clusters: list[list[dict[str, Any]]] = []
    keyed = dialogs.filter(pl.col("cluster_key").is_not_null()).sort("dialog_id")
    # n_turns is part of every source's key already; grouping on it too keeps a source whose
    # key forgets it from mixing 1- and 2-turn dialogs in one cluster.
    groups = keyed.group_by("source", "cluster_key", "n_turns", maintain_order=True)
    for (source, key, _turns), frame in groups:
        by_group = []
        for race, gender in GROUPS:
            members = frame.filter((pl.col("race") == race) & (pl.col("gender") == gender))
            rows = members.to_dicts()
            _rng(seed, source, key, race, gender).shuffle(rows)
            by_group.append(rows)
        for members in zip(*by_group, strict=False):
            ids = "\x1f".join(m["dialog_id"] for m in members)
            cluster_id = f"{source}-{hashlib.sha256(ids.encode()).hexdigest()[:10]}"
            clusters.append([{**m, "cluster_id": cluster_id} for m in members])
    return sorted(clusters, key=lambda c: c[0]["cluster_id"])


def build_clusters(dialogs: pl.DataFrame, n_clusters: int | None, seed: int) -> pl.DataFrame:
    """``n_clusters`` clusters drawn uniformly (all of them when None or when fewer exist)."""
    candidates = candidate_clusters(dialogs, seed)
    if n_clusters is not None and n_clusters < len(candidates):
        picked = _rng(seed, "sample").sample(range(len(candidates)), n_clusters)
        candidates = [candidates[i] for i in sorted(picked)]
    elif n_clusters is not None and n_clusters > len(candidates):
        log.warning("asked for %d clusters, only %d can be formed", n_clusters, len(candidates))
    rows = [member for cluster in candidates for member in cluster]
    return (
        pl.DataFrame(rows, schema=CLUSTER_SCHEMA) if rows else pl.DataFrame(schema=CLUSTER_SCHEMA)
    )


def cluster_counts(dialogs: pl.DataFrame, clusters: pl.DataFrame, seed: int) -> pl.DataFrame:
    """Per source: dialogs kept per group, candidate clusters and sampled clusters."""
    out = []
    for source in sorted(set(dialogs["source"].to_list())):
        d = dialogs.filter(pl.col("source") == source)
        row: dict[str, Any] = {"source": source, "dialogs": d.height}
        for race, gender in GROUPS:
            row[f"dialogs_{race}_{gender}"] = d.filter(
                (pl.col("race") == race) & (pl.col("gender") == gender)
            ).height
        row["candidate_clusters"] = len(candidate_clusters(d, seed))
        row["sampled_clusters"] = clusters.filter(pl.col("source") == source)[
            "cluster_id"
        ].n_unique()
        out.append(row)
    return pl.DataFrame(out)


def load_dialogs(source: str, paths: Mapping[str, str]) -> pl.DataFrame:
    if source == "prism":
        from cueaudit.cues.dialog.prism import load_prism

        return load_prism(paths["survey"], paths["conversations"])
    if source == "cad":
        from cueaudit.cues.dialog.cad import load_cad

        return load_cad(paths["path"])
    raise InputError("config", f"unknown dialog source {source!r}", "cues.dialog")


def run_dialog_clusters(
    source: str,
    paths: Mapping[str, str],
    *,
    n_clusters: int | None,
    seed: int,
    out_path: str | Path,
    counts_path: str | Path,
) -> pl.DataFrame:
    """The ``build_dialog_clusters`` rule for one source."""
    dialogs = load_dialogs(source, paths)
    clusters = build_clusters(dialogs, n_clusters, seed)
    if clusters.height == 0:
        raise InputError(str(next(iter(paths.values()))), "no complete cluster can be formed")
    counts = cluster_counts(dialogs, clusters, seed)
    write_parquet(clusters, out_path)
    write_csv(counts, counts_path)
    return counts


def dialog_variants(cue_type: CueType[pl.DataFrame], dialog: pl.DataFrame) -> pl.DataFrame:
    """Clusters (cluster_id, source, race, gender, prefix) as cue-variant rows: the four
    members of a cluster share its id as value and show their own dialog history."""
    return variant_rows(
        cue_type,
        dialog,
        source=pl.col("source"),
        value=pl.col("cluster_id"),
        cue_text=pl.col("prefix"),
        uid_variant=pl.col("race") + pl.lit("|") + pl.col("gender"),
    )


def dialog_variant_count(
    cue_type: CueType[pl.DataFrame], block: Mapping[str, Any], base: Path
) -> VariantCount:
    """One dialog per group of each of the ``n_clusters`` clusters of every source in
    ``cues.dialog`` (unknown before building when ``n_clusters`` is null: every cluster)."""
    sources = [source for source in cue_type.sources if source in block]
    n_clusters = block.get("n_clusters", 50)
    if sources and n_clusters is None:
        return None, "cues.dialog.n_clusters is null: every cluster, counted when built"
    return len(GROUPS) * len(sources) * (n_clusters or 0), None
