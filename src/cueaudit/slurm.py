"""Pre-flight of a run through the Slurm executor: the profile's partitions and account exist.

``snakemake --profile slurm`` takes its partitions and account from the profile's
``default-resources`` and ``set-resources`` (``slurm_partition``, ``slurm_account``).
snakemake-executor-plugin-slurm submits with them and finds out only at the first ``sbatch``:
a partition that does not exist fails every job, and an account is checked with ``sacctmgr``
(then ``sshare``), whose absence stops every submission with a traceback
(``No such file or directory: 'sacctmgr'``) that the retries repeat. The workflow calls
:func:`check_slurm` when it starts (a dry run included), so these are one line each before
any job.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cueaudit.errors import InputError

#: Runs a command and returns its standard output (raises CalledProcessError or OSError).
Runner = Callable[[Sequence[str]], str]


def _run(command: Sequence[str]) -> str:
    return subprocess.run(
        list(command), capture_output=True, text=True, check=True, timeout=60
    ).stdout


def snakemake_command_line(argv: Sequence[str]) -> Any | None:
    """Snakemake's own reading of its command line ``argv`` with the profiles it names (the
    executor, ``default_resources``, ``set_resources``); None when it is not one."""
    try:
        from snakemake.cli import parse_args

        with contextlib.redirect_stderr(io.StringIO()):  # it announces the profiles again
            return parse_args(list(argv))[1]
    except (Exception, SystemExit):
        return None


def slurm_resources(args: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(where -> partition, where -> account) of a command line's default and per-rule
    resources; ``where`` is the profile key, e.g. ``set-resources.generate_responses``."""
    blocks = {"default-resources": args.default_resources or {}}
    for rule, resources in (args.set_resources or {}).items():
        blocks[f"set-resources.{rule}"] = resources
    found: dict[str, dict[str, str]] = {"slurm_partition": {}, "slurm_account": {}}
    for where, resources in blocks.items():
        for key, named in found.items():
            resource = resources.get(key) if hasattr(resources, "get") else None
            raw = getattr(resource, "raw", resource)
            if raw is not None and str(raw).strip("'\" "):
                named[f"{where}.{key}"] = str(raw).strip("'\" ")
    return found["slurm_partition"], found["slurm_account"]


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _user_accounts(run: Runner) -> set[str] | None:
    """The accounts Slurm lists for this user, as the plugin reads them (sacctmgr, then
    sshare); None when neither lists any (the plugin then proceeds without checking)."""
    user = getpass.getuser()
    commands = [
        ["sacctmgr", "-n", "-s", "list", "user", user, "format=account%256"],
        ["sshare", "-U", "--format", "Account%256", "--noheader"],
    ]
    for command in commands:
        try:
            accounts = {a.lower() for a in _lines(run(command))}
        except (OSError, subprocess.SubprocessError):
            continue
        if accounts:
            return accounts
    return None


def slurm_problems(
    partitions: Mapping[str, str],
    accounts: Mapping[str, str],
    run: Runner = _run,
    which: Callable[[str], str | None] = shutil.which,
) -> Iterator[str]:
    """What would stop the Slurm executor's first submission, one line each."""
    if which("sinfo") is None:
        yield (
            "the slurm executor needs Slurm's commands, and sinfo is not on PATH: run "
            "snakemake on the cluster's login node (or without the slurm profile)"
        )
        return
    try:
        known = {p.rstrip("*") for p in _lines(run(["sinfo", "-h", "-o", "%P"]))}
    except (OSError, subprocess.SubprocessError) as error:
        yield f"sinfo -h -o %P failed ({getattr(error, 'stderr', None) or error}): is Slurm up?"
        return
    for where, partition in partitions.items():
        if partition not in known:
            yield (
                f"profile key {where}: partition '{partition}' does not exist on this cluster "
                f"(sinfo lists: {', '.join(sorted(known))}); set your site's partition"
            )
    if not accounts:
        return
    if which("sacctmgr") is None:
        given = ", ".join(f"{w}: {a}" for w, a in accounts.items())
        yield (
            f"profile key {next(iter(accounts))}: snakemake-executor-plugin-slurm checks the "
            f"account ({given}) with sacctmgr, which is not on PATH: every submission would "
            "fail (No such file or directory: 'sacctmgr'); run on a node with Slurm's "
            "accounting commands"
        )
        return
    listed = _user_accounts(run)
    if listed is None:
        return  # nothing to check against: the plugin proceeds without validation too
    for where, value in accounts.items():
        for account in (a for a in re.split(r"[,\s]+", value) if a):
            if account.lower() not in listed:
                yield (
                    f"profile key {where}: account '{account}' is not one of yours (Slurm "
                    f"lists: {', '.join(sorted(listed))}); set your account"
                )


def check_slurm(argv: Sequence[str], run: Runner = _run) -> None:
    """Raise InputError with :func:`slurm_problems` when Snakemake's command line ``argv``
    runs the slurm executor; any other command line passes unchecked."""
    args = snakemake_command_line(argv)
    if args is None or getattr(args, "executor", None) != "slurm":
        return
    partitions, accounts = slurm_resources(args)
    problems = list(slurm_problems(partitions, accounts, run))
    if problems:
        raise InputError("slurm", "\n  ".join(problems))
