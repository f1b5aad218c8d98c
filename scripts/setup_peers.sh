#!/usr/bin/env bash
# Installs the peers that specplug.lab.peers drives (their real code, for the benchmarks):
#   1. .venv-peers (git-ignored): the CPU torch, then
#      - arctic-inference==0.3.0 built from its sdist into a wheel (only the suffix-decoding
#        extension; the wheel is cached in .cache/wheels) and installed into the main .venv
#        (at run time it needs numpy only): the peer `arctic-suffix`;
#      - sglang==0.5.23 --no-deps with the few packages its NgramCorpus import chain needs,
#        apache-tvm-ffi and ninja for the C++ trie, which is JIT-built once here (about 35 s;
#        cached in ~/.cache/sglang): the peer `sglang-ngram`, run through a subprocess worker.
#   2. the main .venv: vLLM's NgramProposer (the peer `vllm-ngram`) must import. scripts/setup_vllm.sh
#      installs the vllm wheel and its light dependencies; this step only adds what that import
#      still lacks (torch, oss-harmony), and the wheel itself when setup_vllm.sh has not run.
# Idempotent: every step is skipped when its result is already there (a second run takes ~15 s,
# mostly the import checks). Run scripts/setup_core.sh first (it creates .venv with specplug).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
ROOT=$(pwd)

TORCH="torch==2.13.0+cpu"   # the CPU build (/opt/wheels here); never let pip pick a CUDA torch
ARCTIC_VERSION=0.3.0
SGLANG_VERSION=0.5.23
VLLM_VERSION=0.33.0
PEERS_VENV="$ROOT/.venv-peers"
PEERS_PY="$PEERS_VENV/bin/python"
MAIN_PY="$ROOT/.venv/bin/python"
WHEELS="$ROOT/.cache/wheels"

need_python "$MAIN_PY"

# ---- 1. the peers venv -------------------------------------------------------------------------
make_venv "$PEERS_VENV"
if ! imports "$PEERS_PY" "import torch, numpy"; then
    step "installing $TORCH and numpy into $PEERS_VENV"
    pip_in "$PEERS_PY" "$TORCH" numpy
fi

# arctic-inference: build the wheel once (needs torch, nanobind and cmake here), install it into .venv
if ! imports "$MAIN_PY" "from arctic_inference.suffix_decoding import SuffixDecodingCache"; then
    wheel=$(ls "$WHEELS"/arctic_inference-"$ARCTIC_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        step "building arctic-inference==$ARCTIC_VERSION (suffix decoding only; about 60 s)"
        pip_in "$PEERS_PY" wheel ninja cmake "nanobind==2.9.2"
        mkdir -p "$WHEELS"
        # Its CMake otherwise finds another Python, one without nanobind.
        CMAKE_ARGS="-DPython_EXECUTABLE=$PEERS_PY" "$PEERS_PY" -m pip wheel --quiet --disable-pip-version-check \
            --no-build-isolation --no-deps -w "$WHEELS" "arctic-inference==$ARCTIC_VERSION"
        wheel=$(ls "$WHEELS"/arctic_inference-"$ARCTIC_VERSION"-*.whl | head -n 1)
    fi
    step "installing $(basename "$wheel") into .venv"
    pip_in "$MAIN_PY" --no-deps "$wheel"
fi

# sglang: the wheel without its (CUDA) dependencies, plus what NgramCorpus's import chain needs.
# The check builds a tiny corpus: the C++ trie is JIT-compiled at first use (about 35 s, cached in
# ~/.cache/sglang), so doing it here lets tests and benchmarks start fast.
sglang_works() {
    SGLANG_OUT=$("$PEERS_PY" -c "from sglang.srt.speculative.cpp_ngram.ngram_corpus import NgramCorpus
corpus = NgramCorpus(capacity=1024, draft_token_num=4)
corpus.batch_put([[1, 2, 3, 4]]); corpus.synchronize()
tokens, _ = corpus.batch_get(['r'], [[1, 2]], [2])
assert tokens.tolist()[:3] == [2, 3, 4], tokens" 2>&1)
}
if ! sglang_works; then
    step "installing sglang==$SGLANG_VERSION --no-deps and its NgramCorpus dependencies (about 60 s)"
    pip_in "$PEERS_PY" --no-deps "sglang==$SGLANG_VERSION"
    pip_in "$PEERS_PY" "apache-tvm-ffi==0.1.11" ninja triton orjson psutil pybase64 requests packaging \
        pillow starlette msgspec pydantic pyzmq tqdm IPython aiohttp
    step "checking SGLang's NgramCorpus (JIT-builds its C++ trie, about 35 s)"
    if ! sglang_works; then
        echo "$SGLANG_OUT" >&2
        echo "setup_peers: SGLang's NgramCorpus failed its check (above)" >&2
        exit 1
    fi
fi

# ---- 2. vLLM's NgramProposer in the main venv -------------------------------------------------
VLLM_CHECK="import os; os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')
from vllm.config import SpeculativeConfig
from vllm.v1.spec_decode.ngram_proposer import NgramProposer"
if ! imports "$MAIN_PY" "$VLLM_CHECK"; then
    if ! installed "$MAIN_PY" vllm "$VLLM_VERSION"; then
        step "installing vllm==$VLLM_VERSION --no-deps into .venv (scripts/setup_vllm.sh normally does this)"
        pip_in "$MAIN_PY" --no-deps "vllm==$VLLM_VERSION"
    fi
    if ! imports "$MAIN_PY" "import torch"; then
        step "installing $TORCH into .venv (vllm's ngram_proposer imports torch)"
        pip_in "$MAIN_PY" "$TORCH"
    fi
    step "installing the light packages that NgramProposer's import chain needs into .venv"
    pip_in "$MAIN_PY" oss-harmony regex cbor2 pyzmq "transformers<5.21" cachetools blake3 py-cpuinfo msgspec \
        cloudpickle pyyaml requests aiohttp openai
    imports "$MAIN_PY" "$VLLM_CHECK" || { echo "setup_peers: vllm's NgramProposer does not import in .venv" >&2; exit 1; }
fi

step "done"
