"""Stand-ins for Slurm's client commands on PATH (sinfo, sacctmgr, sshare): what the
workflow's Slurm pre-flight (cueaudit.slurm) reads, without a cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def fake_slurm_bin(
    folder: Path,
    partitions: Sequence[str] = ("debug*", "gpu"),
    accounts: Sequence[str] = (),
    sacctmgr: bool = True,
) -> Path:
    """A folder of executable stand-ins: ``sinfo`` lists ``partitions``, ``sacctmgr`` and
    ``sshare`` list ``accounts`` (none: a cluster without accounting); no ``sacctmgr`` when
    ``sacctmgr`` is False. ``squeue`` lists no jobs (snakemake-executor-plugin-slurm does not
    load where sinfo is but neither squeue nor sacct)."""
    folder.mkdir(parents=True, exist_ok=True)
    commands = {"sinfo": partitions, "sshare": accounts, "squeue": ()}
    if sacctmgr:
        commands["sacctmgr"] = accounts
    for name, lines in commands.items():
        script = folder / name
        body = "".join(f"echo '{line}'\n" for line in lines)
        script.write_text(f"#!/bin/sh\n{body}", encoding="utf-8")
        script.chmod(0o755)
    return folder


#: Slurm's client commands (Debian's slurm-client): hidden from a PATH that must not reach a
#: real cluster.
SLURM_COMMANDS = frozenset(
    (
        "sacct",
        "sacctmgr",
        "salloc",
        "sattach",
        "sbatch",
        "sbcast",
        "scancel",
        "scontrol",
        "scrontab",
        "sdiag",
        "sh5util",
        "sinfo",
        "sprio",
        "squeue",
        "sreport",
        "srun",
        "sshare",
        "sstat",
        "strigger",
        "sview",
    )
)


def path_with(folder: Path, path: str | None = None) -> str:
    """``PATH`` with ``folder`` first and no real Slurm command after it. A folder that holds
    Slurm's commands (``/usr/bin`` where slurm-client is installed) is replaced by a folder
    of links to everything else in it: ``sh``, ``which`` and the rest stay reachable."""
    entries = []
    for entry in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        if not entry or not Path(entry).is_dir():
            continue
        if not any((Path(entry) / name).exists() for name in SLURM_COMMANDS):
            entries.append(entry)
            continue
        shadow = folder.parent / f"{folder.name}-without-slurm{len(entries)}"
        shadow.mkdir(parents=True, exist_ok=True)
        for command in Path(entry).iterdir():
            link = shadow / command.name
            if command.name not in SLURM_COMMANDS and not link.exists():
                link.symlink_to(command)
        entries.append(str(shadow))
    return os.pathsep.join([str(folder), *entries])
