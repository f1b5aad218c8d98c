#!/usr/bin/env bash
# Installs .venv-sglang (git-ignored): SGLang's engine on the CPU torch, with specplug installed
# editable (so the `sglang.srt.plugins` entry point is real), for tests/sglang.
#   - torch==2.13.0+cpu from /opt/wheels (never a CUDA torch; torchvision stays out: PyPI's
#     build is a CUDA one whose op registration fails on a CPU torch);
#   - sglang==0.5.23 --no-deps (its own dependencies pull CUDA kernels), then the pure-Python
#     packages its server and scheduler import on this CPU path, pinned where SGLang pins them;
#   - SGLang's C++ n-gram trie, JIT-built once (about 35 s), which the contract tests compare with.
# The stand-in for SGLang's kernel package is test code (tests/sglang/harness), not installed here.
# Idempotent: a second run only re-checks (about 20 s). Run scripts/setup_core.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_lib.sh
ROOT=$(pwd)

TORCH="torch==2.13.0+cpu"
SGLANG_VERSION=0.5.23   # the tested version; the plugin warns outside >=0.5.23,<0.6
VENV="$ROOT/.venv-sglang"
PY="$VENV/bin/python"

make_venv "$VENV"
if ! imports "$PY" "import torch"; then
    step "installing $TORCH into $VENV"
    pip_in "$PY" "$TORCH" numpy
fi
if ! installed "$PY" sglang "$SGLANG_VERSION"; then
    step "installing sglang==$SGLANG_VERSION --no-deps"
    pip_in "$PY" --no-deps "sglang==$SGLANG_VERSION"
fi
DEPS_CHECK="import transformers, fastapi, uvicorn, zmq, tvm_ffi, msgspec, orjson, dill, jsonschema, soundfile, compressed_tensors, xgrammar, specplug, pytest"
if ! imports "$PY" "$DEPS_CHECK"; then
    step "installing SGLang's CPU-path dependencies and specplug (editable, with its test extra)"
    pip_in "$PY" "apache-tvm-ffi==0.1.11" "transformers==5.19.0" "tokenizers==0.23.2" "openai==2.8.0" \
        "openai-harmony==0.0.4" "sentencepiece==0.2.1" "blobfile==3.0.0" "compressed-tensors==0.18.0" dill jsonschema "soundfile==0.13.1" "xgrammar==0.2.7" ninja triton orjson psutil pybase64 requests packaging \
        pillow starlette msgspec pydantic pyzmq tqdm IPython aiohttp fastapi "uvicorn>=0.51" uvloop python-multipart \
        partial_json_parser interegular prometheus-client setproctitle xxhash zstandard einops gguf tiktoken \
        scipy "python-dateutil<3" distro easydict watchfiles anthropic llguidance "$TORCH"
    pip_in "$PY" -e ".[test]" "$TORCH"
fi
imports "$PY" "$DEPS_CHECK" || { echo "setup_sglang: SGLang's dependencies do not import in $VENV" >&2; exit 1; }
if ! imports "$PY" "import importlib.metadata as m; assert any(e.name == 'specplug' for e in m.entry_points(group='sglang.srt.plugins'))"; then
    step "reinstalling specplug editable (its sglang.srt.plugins entry point is missing)"
    pip_in "$PY" --no-deps -e .
fi
step "checking SGLang's NgramCorpus (JIT-builds its C++ trie once, about 35 s)"
"$PY" -c "from sglang.srt.speculative.cpp_ngram.ngram_corpus import NgramCorpus
corpus = NgramCorpus(capacity=1024, draft_token_num=4)
corpus.batch_put([[1, 2, 3, 4]]); corpus.synchronize()
tokens, _ = corpus.batch_get(['r'], [[1, 2]], [2])
assert tokens.tolist()[:3] == [2, 3, 4], tokens"
step "done"
