#!/usr/bin/env bash
# Reproduces the figures in docs/benchmarks.md from the shipped traces (no engine needed for
# specplug's methods; the peers need scripts/setup_vllm.sh and scripts/setup_peers.sh).
#   1. every method, the peers and the oracle; table + JSON + plots under docs/bench/
#   2. vLLM's NgramProposer over a grid of settings at k = 5, 8, 16 beside suffix at the same k,
#      and the tokens/step bound of any lookup proposer (specplug bench --lookup-bound)
#   3. every engine's own rule beside hybrid and adaptive (with SPECDECODE_TRACES=FILE also on
#      SpecDecode-Bench's real EAGLE-3 acceptance); `bash scripts/bench_docs.sh engine-rules [SDB.jsonl]`
#      runs only this part
#   4. the main methods under the cost model calibrated on this machine, where one was made
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/bench
mkdir -p "$OUT"
# The composites against every engine's own rule (specplug.lab.rules), each with its shipped defaults and
# with its knobs tuned per batch size on the tune split: docs/bench/engine-rules.md, one table per batch size,
# on the tune and the validation split. With SDB.jsonl (SpecDecode-Bench's profiled Llama-3.1-8B data, real
# EAGLE-3 acceptance, converted by `specplug trace --specdecode DIR --out SDB.jsonl`; not shipped: its
# repository has no licence) also on that; always on the shipped traces over both of their neural columns.
# Tuned settings are kept in docs/bench/engine-rules-tuned-*.json and reused while traces and settings match.
engine_rules() {
    SPECPLUG=${SPECPLUG:-.venv/bin/specplug}
    SIZES=1,8,32,64,128
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    run() {  # run NAME NEURAL SPLIT TRACES...: one split of one trace set, its tables into $tmp/NAME-SPLIT.md
        local name=$1 neural=$2 split=$3
        shift 3
        "$SPECPLUG" bench "$@" --neural "$neural" --split "$split" --no-peers --no-engine-runs --batch-sizes "$SIZES" \
            --engine-rules --tune-rules --tuned-rules "$OUT/engine-rules-tuned-$name.json" --warm \
            --json "$OUT/engine-rules-$name-$split.json" --batch-tables "$tmp/$name-$split.md" > /dev/null
    }
    sets=()
    if [ $# -ge 1 ]; then
        for split in tune validation; do run specdecode head "$split" "$1"; done
        sets+=(specdecode)
    fi
    for neural in draft-model head; do
        for split in tune validation; do run "shipped-$neural" "$neural" "$split"; done
        sets+=("shipped-$neural")
    done
    {
        echo "# The composites against the engines' own rules"
        echo
        echo "Written by \`bash scripts/bench_docs.sh engine-rules${1:+ SDB.jsonl}\` (see docs/benchmarks.md, \"Against the engines' own drafting rules, per batch size\")."
        echo "Modeled speedup over plain decoding under the llama-3.1-8b-h100 cost model, drafts of at most 8 tokens."
        echo "\`(tuned)\`: the rule's knobs chosen per batch size on the tune split of the same traces, every workload"
        echo "together (the settings are in docs/bench/engine-rules-tuned-*.json); \`best fixed\` and \`oracle\`: over"
        echo "ngram, suffix and the neural drafter, with hindsight. \`hybrid\` and \`adaptive\`: as a fresh server runs"
        echo "them, from no statistics; \`(warm)\`: from the statistics each learnt over the other split's requests of the"
        echo "same workload (what \`learnt_state\` keeps across a server's restarts; the lookups start empty)."
        for name in "${sets[@]}"; do
            for split in tune validation; do
                echo
                case $name in
                    specdecode) echo "## SpecDecode-Bench (Llama-3.1-8B-Instruct, real EAGLE-3 and n-gram acceptance), $split split" ;;
                    shipped-draft-model) echo "## Shipped traces (SmolLM2-135M; the neural drafter: the stand-in draft model), $split split" ;;
                    shipped-head) echo "## Shipped traces (SmolLM2-135M; the neural drafter: the EAGLE head trained here), $split split" ;;
                esac
                echo
                sed 's/^### /#### /' "$tmp/$name-$split.md"
            done
        done
    } > "$OUT/engine-rules.md"
    echo "wrote $OUT/engine-rules.md"
}
if [ "${1:-}" = engine-rules ]; then
    shift
    engine_rules "$@"
    exit 0
fi
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
# the composites against every engine's own rule, default and tuned, one table per batch size
# (engine-rules.md); SPECDECODE_TRACES: SpecDecode-Bench's data converted by `specplug trace --specdecode`
engine_rules ${SPECDECODE_TRACES:+"$SPECDECODE_TRACES"}
# a cost model of this machine: bash scripts/bench_docs.sh after
#   .venv/bin/specplug calibrate --out docs/bench/cpu-smollm2-135m-1t.toml --neural-model .models/SmolLM2-135M-draft-Q2_K.gguf
[ -f "$OUT/cpu-smollm2-135m-1t.toml" ] || exit 0
.venv/bin/specplug bench --k 8 --cost "$OUT/cpu-smollm2-135m-1t.toml" -m suffix -m neural -m hybrid -m adaptive:candidates=suffix+neural \
    --batch-sizes 1,2,4,8 --json "$OUT/results-cpu.json" --markdown "$OUT/results-cpu.md" | tee "$OUT/table-cpu.txt"
