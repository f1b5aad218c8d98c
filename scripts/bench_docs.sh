#!/usr/bin/env bash
# Reproduces the figures in docs/benchmarks.md from the shipped traces (no engine needed for
# specplug's methods; the peers need scripts/setup_vllm.sh and scripts/setup_peers.sh).
#   1. every method, the peers and the oracle; table + JSON + plots under docs/bench/
#   2. vLLM's NgramProposer over a grid of settings at k = 5, 8, 16 beside suffix at the same k,
#      and the tokens/step bound of any lookup proposer (specplug bench --lookup-bound)
#   3. the main methods under the cost model calibrated on this machine, where one was made
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/bench
mkdir -p "$OUT"
.venv/bin/specplug bench --k 8 \
    -m ngram -m suffix -m neural -m hybrid -m adaptive:candidates=suffix+neural \
    -m peer:vllm-ngram:num_speculative_tokens=8 -m peer:arctic-suffix -m peer:sglang-ngram \
    --json "$OUT/results.json" --plots "$OUT" --markdown "$OUT/results.md" | tee "$OUT/table.txt"
# the same methods over each of the traces' two neural columns (docs/benchmarks.md, "Over the EAGLE head
# trained here"): the stand-in draft model (the default) and the EAGLE head trained here
for NEURAL in draft-model head; do
    .venv/bin/specplug bench --k 8 --neural "$NEURAL" --no-engine-runs --batch-sizes 1,128 \
        -m ngram -m suffix -m neural -m hybrid -m adaptive:candidates=suffix+neural \
        --json "$OUT/neural-$NEURAL.json" --markdown "$OUT/neural-$NEURAL.md" | tee "$OUT/neural-$NEURAL.txt"
done
# every single drafter, the plain and cost-aware hybrid and adaptive, the best fixed (drafter, length)
# with hindsight and the oracle, on the tune and the validation half of the traces (split by
# conversation) and on the synthetic stress workloads
for SPLIT in tune validation; do
    .venv/bin/specplug bench --k 8 --split "$SPLIT" --synthetic --no-peers --no-engine-runs \
        -m ngram -m suffix -m neural -m hybrid:cost=null -m hybrid -m adaptive:candidates=suffix+neural \
        --json "$OUT/targets-$SPLIT.json" > "$OUT/targets-$SPLIT.txt"
done
# vLLM's n-gram at every n window and k = 5, 8, 16, beside suffix at the same k (the same draft budget)
for k in 5 8 16; do
    VLLM=()
    for n in "1,3" "2,4" "3,5" "5,5"; do
        VLLM+=(-m "peer:vllm-ngram:prompt_lookup_min=${n%,*},prompt_lookup_max=${n#*,},num_speculative_tokens=$k")
    done
    .venv/bin/specplug bench --k "$k" --no-oracle --no-engine-runs -m suffix "${VLLM[@]}" --batch-sizes 1 \
        --json "$OUT/vllm-ngram-sweep-k$k.json" --markdown "$OUT/vllm-ngram-sweep-k$k.md" | tee "$OUT/vllm-ngram-sweep-k$k.txt"
done
# what any lookup proposer could reach on these traces (tokens/step bound per workload and k)
.venv/bin/specplug bench --lookup-bound 5,8,16 --markdown "$OUT/lookup-bound.md"
# a cost model of this machine: bash scripts/bench_docs.sh after
#   .venv/bin/specplug calibrate --out docs/bench/cpu-smollm2-135m-1t.toml --neural-model .models/SmolLM2-135M-draft-Q2_K.gguf
[ -f "$OUT/cpu-smollm2-135m-1t.toml" ] || exit 0
.venv/bin/specplug bench --k 8 --cost "$OUT/cpu-smollm2-135m-1t.toml" -m suffix -m neural -m hybrid -m adaptive:candidates=suffix+neural \
    --batch-sizes 1,2,4,8 --json "$OUT/results-cpu.json" --markdown "$OUT/results-cpu.md" | tee "$OUT/table-cpu.txt"
