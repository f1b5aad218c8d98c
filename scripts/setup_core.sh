#!/usr/bin/env bash
# Creates .venv (Python >= 3.10) and installs specplug with its test and bench extras.
# Idempotent: a second run only re-checks the install.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
PYTHON=${PYTHON:-python3}
START=$SECONDS
if [ ! -x .venv/bin/python ]; then
    step "creating .venv"
    "$PYTHON" -m venv .venv
    pip_in .venv/bin/python --upgrade pip
fi
step "installing specplug (editable) with its test and bench extras"
pip_in .venv/bin/python -e ".[test,bench]"
step "done in $(elapsed $START)"
