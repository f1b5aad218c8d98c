#!/usr/bin/env bash
# Regenerates the shipped traces (specplug/lab/data/traces/*.jsonl) with llama-server on this machine:
# SmolLM2-135M-Instruct (Q4_1) greedy, 1 thread; the neural drafter is SmolLM2 requantized to Q2_K
# (scripts/setup_bench.sh); llama.cpp's n-gram types are measured on the same prompts.
# Needs scripts/setup_core.sh, setup_llamacpp.sh and setup_bench.sh. About 35 min in all on 2 cores.
# Usage: bash scripts/make_traces.sh [prompt set ...]   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=("$@")
[ ${#SETS[@]} -eq 0 ] && SETS=(code-edit agentic humaneval spec-bench)
for set in "${SETS[@]}"; do
    echo "[make_traces $(date +%H:%M:%S)] $set"
    .venv/bin/specplug trace "$set" --out "specplug/lab/data/traces/$set.jsonl" --model smollm2 --threads 1 \
        --neural-model .models/SmolLM2-135M-draft-Q2_K.gguf --neural-k 6 \
        --llamacpp-types ngram-simple,ngram-map-k,ngram-map-k:n4m16,ngram-mod
done
echo "[make_traces $(date +%H:%M:%S)] done"
