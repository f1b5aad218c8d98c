#!/usr/bin/env bash
# Regenerates the shipped traces (specplug/lab/data/traces/*.jsonl) with llama-server on this machine:
# SmolLM2-135M-Instruct (Q4_1) greedy, 1 thread; two neural columns on the same outputs: `neural`, a
# stand-in draft model (SmolLM2 requantized to Q2_K, scripts/setup_bench.sh), and `neural_head`, the EAGLE
# head trained here (models/smollm2-135m-instruct-eagle) over the fp32 target (torch, 1 thread); llama.cpp's
# n-gram types are measured on the same prompts.
# Needs scripts/setup_core.sh, setup_llamacpp.sh, setup_bench.sh, setup_peers.sh (torch) and
# setup_vllm.sh --engine-only (.models/smollm2-135m-fp32). About 40 min in all on 2 cores.
# Usage: bash scripts/make_traces.sh [--head-only] [prompt set ...]   (default: all four)
#        bash scripts/make_traces.sh --specdecode DIR OUT.jsonl
#   --specdecode: convert a copy of SpecDecode-Bench's profiled data (a checkout of
#   github.com/SpecDecode-Bench/simulator) into traces with real EAGLE-3 and n-gram acceptance; the data
#   is not shipped (its repository has no licence), so OUT.jsonl belongs outside the tree (e.g. out/)
#   --head-only: recompute only the neural_head column of the shipped traces in place, keeping every
#   other field (no llama-server; about 4 min for all four; needs only torch and the fp32 target)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--specdecode" ]; then
    [ $# -eq 3 ] || { echo "usage: bash scripts/make_traces.sh --specdecode DIR OUT.jsonl" >&2; exit 2; }
    exec .venv/bin/specplug trace --specdecode "$2" --out "$3"
fi
HEAD_ONLY=0
[ "${1:-}" = "--head-only" ] && { HEAD_ONLY=1; shift; }
SETS=("$@")
[ ${#SETS[@]} -eq 0 ] && SETS=(code-edit agentic humaneval spec-bench)
HEAD=(--neural-head models/smollm2-135m-instruct-eagle --target-hf .models/smollm2-135m-fp32)
for set in "${SETS[@]}"; do
    echo "[make_traces $(date +%H:%M:%S)] $set"
    if [ "$HEAD_ONLY" = 1 ]; then
        .venv/bin/specplug trace --refill-neural "specplug/lab/data/traces/$set.jsonl" \
            --out "specplug/lab/data/traces/$set.jsonl" --threads 1 --neural-k 6 "${HEAD[@]}"
        continue
    fi
    .venv/bin/specplug trace "$set" --out "specplug/lab/data/traces/$set.jsonl" --model smollm2 --threads 1 \
        --neural-model .models/SmolLM2-135M-draft-Q2_K.gguf --neural-k 6 \
        "${HEAD[@]}" \
        --llamacpp-types ngram-simple,ngram-map-k,ngram-map-k:n4m16,ngram-mod
done
echo "[make_traces $(date +%H:%M:%S)] done"
