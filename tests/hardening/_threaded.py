"""Threads sharing one proposer, each with its own requests, against a single-threaded run.

Run as a script (``python -m tests.hardening._threaded METHOD MODE``) so that a crash of the
interpreter (heap corruption) fails the calling test instead of killing pytest. Each thread
works on its own vocabulary (thread ``t`` draws tokens from ``[t * VOCAB, (t + 1) * VOCAB)``),
and every request is extended by fixed chunks of a fixed text whatever was drafted, so a
request's tokens at each step are the same in every run. Then:

- a method whose drafts for a request depend on that request alone (ngram; suffix, whose global
  cache holds other threads' outputs too, but in other vocabularies, which never match) must
  draft exactly what a single-threaded run drafts, step by step;
- a composite (hybrid, adaptive) learns from every request (pooled statistics), so its choices
  depend on how the threads interleave; each of its drafts must still be a prefix of what one
  of its parts drafts for that request at that step when run alone.
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np

import specplug
from specplug import BatchStep

VOCAB = 24
THREADS = 4
STEPS = 4
CHUNK = 3
BATCH_ROWS = 6  # > the batch kernels' threshold (4): one kernel call for every row


def request_texts(thread: int, requests: int) -> list[tuple[list[int], list[int]]]:
    """(prompt, continuation) per request of one thread: repeats, so that lookups draft."""
    rng = np.random.default_rng(thread)
    base = thread * VOCAB
    texts = []
    for _ in range(requests):
        phrases = [rng.integers(base, base + VOCAB, int(rng.integers(3, 9))).tolist() for _ in range(4)]
        text: list[int] = []
        while len(text) < 64 + STEPS * CHUNK:
            text.extend(phrases[int(rng.integers(0, 4))] if rng.random() < 0.8 else [int(rng.integers(base, base + VOCAB))])
        texts.append((text[:64], text[64 : 64 + STEPS * CHUNK]))
    return texts


def create(method: str):
    if method == "hybrid":
        return specplug.create("hybrid", neural=specplug.create("ngram", min_n=1, max_n=1), lookup="suffix")
    if method == "suffix-local":
        return specplug.create("suffix", global_cache=False)
    return specplug.create(method)


#: the parts whose drafts a composite's drafts are prefixes of (each run alone)
PARTS = {"hybrid": ["suffix", "ngram-1"], "adaptive": ["suffix", "ngram"]}


def create_part(name: str):
    if name == "ngram-1":
        return specplug.create("ngram", min_n=1, max_n=1)
    return specplug.create(name)


def work_requests(proposer, thread: int, requests: int, out: dict) -> None:
    """One thread's requests, one after another, through start/propose/extend/stop."""
    for i, (prompt, text) in enumerate(request_texts(thread, requests)):
        rid = (thread, i)
        proposer.start(rid, prompt)
        drafts = []
        for step in range(STEPS):
            drafts.append(list(proposer.propose(rid, 8).tokens))
            proposer.extend(rid, text[step * CHUNK : (step + 1) * CHUNK])
        proposer.stop(rid)
        out[f"{thread}/{i}"] = drafts


def work_batches(proposer, thread: int, requests: int, out: dict) -> None:
    """One thread's requests, BATCH_ROWS at a time, through step_batch (the engines' path)."""
    texts = request_texts(thread, requests)
    for first in range(0, requests, BATCH_ROWS):
        group = list(range(first, min(first + BATCH_ROWS, requests)))
        ids = [(thread, i) for i in group]
        started = [((thread, i), texts[i][0]) for i in group]
        drafts: dict[int, list] = {i: [] for i in group}
        for step in range(STEPS + 1):
            new = [[] if step == 0 else texts[i][1][(step - 1) * CHUNK : step * CHUNK] for i in group]
            limits = [8 if step < STEPS else 0] * len(group)
            got = proposer.step_batch(BatchStep.of(ids, new, limits, started=started if step == 0 else ()))
            if step < STEPS:
                for row, i in enumerate(group):
                    drafts[i].append(list(got.draft(row).tokens))
        proposer.step_batch(BatchStep.of([], [], [], stopped=ids))
        for i in group:
            out[f"{thread}/{i}"] = drafts[i]


def run(method: str, mode: str, requests: int, threaded: bool, proposer=None) -> dict:
    proposer = proposer if proposer is not None else create(method)
    work = work_batches if mode == "batch" else work_requests
    out: dict = {}
    if not threaded:
        for thread in range(THREADS):
            work(proposer, thread, requests, out)
        return out
    errors: list[BaseException] = []

    def guarded(thread: int) -> None:
        try:
            work(proposer, thread, requests, out)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return out


def mismatches(method: str, mode: str, requests: int) -> list[str]:
    """Requests whose threaded drafts are not what they must be; empty when all agree."""
    threaded = run(method, mode, requests, threaded=True)
    bad = []
    if method not in PARTS:
        alone = run(method, mode, requests, threaded=False)
        for key, drafts in alone.items():
            if threaded.get(key) != drafts:
                bad.append(f"{key}: threaded {threaded.get(key)} != alone {drafts}")
        return bad
    parts = [run(part, mode, requests, threaded=False, proposer=create_part(part)) for part in PARTS[method]]
    for key, drafts in threaded.items():
        for step, draft in enumerate(drafts):
            if not any(part[key][step][: len(draft)] == draft for part in parts):
                bad.append(f"{key} step {step}: {draft} is no part's draft prefix {[part[key][step] for part in parts]}")
    return bad + [f"{key}: missing" for key in parts[0] if key not in threaded]


def main() -> None:
    method, mode, requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    bad = mismatches(method, mode, requests)
    print(json.dumps({"mismatches": len(bad), "first": bad[:3]}))


if __name__ == "__main__":
    main()
