#!/usr/bin/env bash
# Reproduces the figures in docs/benchmarks.md from the shipped traces (no engine needed for
# specplug's methods; the peers need scripts/setup_vllm.sh and scripts/setup_peers.sh).
#   1. every method, the peers and the oracle; table + JSON + plots under docs/bench/
#   2. vLLM's NgramProposer over a grid of settings, to find its best one per workload
#   3. the same with the cost model calibrated on this machine (SmolLM2-135M, 1 CPU thread)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/bench
mkdir -p "$OUT"
.venv/bin/specplug bench --k 8 \
    -m ngram -m suffix -m neural -m hybrid -m adaptive \
    -m peer:vllm-ngram:num_speculative_tokens=8 -m peer:arctic-suffix -m peer:sglang-ngram \
    --json "$OUT/results.json" --plots "$OUT" --markdown "$OUT/results.md" | tee "$OUT/table.txt"
VLLM=()
for n in "1,3" "2,4" "3,5" "5,5"; do
    for k in 5 8; do
        VLLM+=(-m "peer:vllm-ngram:prompt_lookup_min=${n%,*},prompt_lookup_max=${n#*,},num_speculative_tokens=$k")
    done
done
.venv/bin/specplug bench --k 8 --no-oracle -m suffix "${VLLM[@]}" --batch-sizes 1 \
    --json "$OUT/vllm-ngram-sweep.json" --markdown "$OUT/vllm-ngram-sweep.md" | tee "$OUT/vllm-ngram-sweep.txt"
.venv/bin/specplug bench --k 8 --cost cpu-smollm2-135m-1t -m suffix -m neural -m hybrid -m adaptive \
    --batch-sizes 1,2,4,8 --json "$OUT/results-cpu.json" --markdown "$OUT/results-cpu.md" | tee "$OUT/table-cpu.txt"
