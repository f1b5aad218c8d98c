"""The peers run their engines' real code and draft what a brute-force reading of that code expects.

The engines are required (scripts/setup_vllm.sh, scripts/setup_peers.sh): a missing one makes
these tests fail with the setup hint, never skip.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import specplug
from specplug.lab.peers import PeerNotInstalledError, UnknownPeerError, create_peer, peer_names
from specplug.lab.peers._common import TokenTail, leaf_paths

# ------------------------------------------------------------------------- brute-force references


def vllm_expected(tokens: list[int], min_n: int, max_n: int, k: int) -> list[int]:
    """vLLM's rule: the longest suffix n-gram (min_n..max_n) seen earlier; its earliest occurrence drafts."""
    length = len(tokens)
    for n in range(min(max_n, length - 1), min_n - 1, -1):
        suffix = tokens[length - n :]
        for start in range(0, length - n):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


def occurrences(sequence: list[int], pattern: list[int]) -> list[int]:
    size = len(pattern)
    return [start for start in range(len(sequence) - size + 1) if sequence[start : start + size] == pattern]


def suffix_expected(sequence: list[int], depth: int, k: int, factor: float, min_prob: float):
    """Suffix decoding's greedy path over one sequence, or None when a tie makes it ambiguous.

    For each match length m (1 .. len(pattern) - 1, while the last m tokens occur), walk from
    the matched string to its most frequent next token while the product of
    count(next) / count(current) stays >= min_prob, up to min(k, m * factor) tokens; the path
    with the highest score (sum of those products) wins, a longer match on a tie.
    """
    pattern = sequence[-depth:]
    best: tuple[list[int], float] = ([], 0.0)
    for m in range(1, len(pattern)):
        current = pattern[-m:]
        if not occurrences(sequence, current):
            break
        limit = min(k, int(m * factor + 1e-6))
        draft, prob, score = [], 1.0, 0.0
        while len(draft) < limit and len(current) < depth:
            counts: dict[int, int] = {}
            for start in occurrences(sequence, current):
                if start + len(current) < len(sequence):
                    token = sequence[start + len(current)]
                    counts[token] = counts.get(token, 0) + 1
            if not counts:
                break
            top = max(counts.values())
            if list(counts.values()).count(top) > 1:
                return None
            token = max(counts, key=counts.get)
            prob *= top / len(occurrences(sequence, current))
            if prob < min_prob:
                break
            draft.append(token)
            score += prob
            current = current + [token]
        if score >= best[1]:
            best = (draft, score)
    return best


def random_streams(count: int, seed: int):
    """Token lists with repeated chunks (matches are common), of varied sizes and vocabularies."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        vocab = int(rng.integers(3, 12))
        chunks = [rng.integers(0, vocab, int(rng.integers(2, 7))).tolist() for _ in range(3)]
        tokens: list[int] = []
        while len(tokens) < int(rng.integers(4, 70)):
            tokens += chunks[int(rng.integers(0, 3))] if rng.random() < 0.6 else [int(rng.integers(0, vocab))]
        yield tokens


# ------------------------------------------------------------------------------------ vLLM


@pytest.fixture(scope="module")
def vllm_peer():
    return create_peer("vllm-ngram", prompt_lookup_min=2, prompt_lookup_max=4, num_speculative_tokens=5)


def test_vllm_ngram_small_example(vllm_peer):
    vllm_peer.start("a", [1, 2, 3, 4, 5, 9, 1, 2, 3])
    assert vllm_peer.propose("a", 8).tokens == (4, 5, 9, 1, 2)
    assert vllm_peer.propose("a", 2).tokens == (4, 5)  # max_tokens below k cuts the draft
    assert vllm_peer.extend("a", [4, 5, 7]) == 2  # the draft (4, 5) then the target's own 7
    assert vllm_peer.propose("a", 8).tokens == ()  # "5 7" and "7" never occurred before
    vllm_peer.stop("a")
    assert vllm_peer.active_requests() == []


def test_vllm_ngram_matches_brute_force_over_many_streams(vllm_peer):
    for index, tokens in enumerate(random_streams(150, seed=1)):
        cut = max(1, len(tokens) // 2)
        vllm_peer.start(index, tokens[:cut])
        seen = tokens[:cut]
        for step in range(cut, len(tokens), 3):  # requests grow through extend, as in decoding
            draft = vllm_peer.propose(index, 5).tokens
            assert list(draft) == vllm_expected(seen, 2, 4, 5), (seen, draft)
            vllm_peer.extend(index, tokens[step : step + 3])
            seen = tokens[: step + 3]
        vllm_peer.stop(index)


def test_vllm_settings_are_validated_by_vllm():
    with pytest.raises(specplug.InvalidOptionError, match="prompt_lookup_min"):
        create_peer("vllm-ngram", prompt_lookup_min=5, prompt_lookup_max=2)
    peer = create_peer("vllm-ngram")
    assert (peer.prompt_lookup_min, peer.prompt_lookup_max) == (5, 5)  # vLLM's own defaults


# --------------------------------------------------------------------------------- Arctic


def test_arctic_suffix_small_example():
    peer = create_peer("arctic-suffix", max_cached_requests=0)
    peer.start("a", [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3])
    draft = peer.propose("a", 16)
    assert draft.tokens == (4, 5, 6)  # match "1 2 3" (3 tokens), so at most 3 tokens
    # "1 2 3" occurs twice (the second at the end, with no next token): each token has p = 1/2
    assert draft.score == pytest.approx(1.5)
    assert peer.extend("a", [4, 5, 0]) == 2
    peer.stop("a")


def test_arctic_suffix_matches_brute_force_over_many_streams():
    compared = 0
    for index, tokens in enumerate(random_streams(200, seed=2)):
        peer = create_peer("arctic-suffix", max_cached_requests=0, max_tree_depth=12)
        cut = max(1, len(tokens) // 2)
        peer.start(index, tokens[:cut])
        peer.extend(index, tokens[cut:])
        expected = suffix_expected(tokens, depth=12, k=24, factor=1.0, min_prob=0.1)
        draft = peer.propose(index, 24)
        if expected is not None:
            assert list(draft.tokens) == expected[0], tokens
            assert draft.score == pytest.approx(expected[1], rel=1e-5)
            compared += 1
        peer.stop(index)
    assert compared >= 50  # ties (ambiguous order) are skipped; most streams have none


def test_arctic_suffix_drafts_from_an_earlier_request():
    peer = create_peer("arctic-suffix")
    peer.start("first", [100, 101])
    peer.extend("first", [7, 8, 9, 10, 11, 12])
    peer.stop("first")
    peer.start("second", [50, 7, 8, 9])  # only the first request's *output* has "7 8 9 10 ..."
    assert peer.propose("second", 8).tokens == (10, 11, 12)


# --------------------------------------------------------------------------------- SGLang


@pytest.fixture(scope="module")
def sglang_peer():
    peer = create_peer("sglang-ngram", index_prompt=True)
    yield peer
    peer.close()


def test_sglang_ngram_unique_continuation(sglang_peer):
    sglang_peer.start("a", list(range(10, 30)))
    sglang_peer.start("b", [5, 12, 13, 14])
    # the trie holds the prompt of "a"; its one continuation after "12 13 14" fills the tree's
    # draft_token_num - 1 = 11 slots as a single chain
    draft = sglang_peer.propose("b", 16)
    assert draft.tokens == tuple(range(15, 26))
    assert sglang_peer.paths("b") == [list(range(15, 26))]
    assert sglang_peer.propose("b", 4).tokens == (15, 16, 17, 18)
    assert sglang_peer.extend("b", [15, 16, 99]) == 2
    sglang_peer.stop("a")
    sglang_peer.stop("b")


def test_sglang_ngram_shares_outputs_across_requests_and_branches():
    peer = create_peer("sglang-ngram")  # as SGLang runs it: prompts are not inserted
    try:
        peer.start("x", [1, 2, 3])
        assert peer.propose("x", 8).tokens == ()  # an empty corpus drafts nothing
        peer.extend("x", [40, 41, 42, 43])
        peer.stop("x")
        peer.start("y", [9, 9, 2, 3])
        peer.extend("y", [40, 50, 51])
        peer.start("z", [7, 40])
        draft = peer.propose("z", 8)
        paths = sorted(peer.paths("z"))
        assert paths == [[41, 42, 43], [50, 51]]  # both earlier outputs continue "40"
        assert draft.tokens == (41, 42, 43)  # the longest path is the chain draft
        peer.stop("y")
        peer.stop("z")
    finally:
        peer.close()


def test_sglang_worker_reports_errors_without_dying(sglang_peer):
    answer = sglang_peer._call({"op": "nope"}, check=False)
    assert not answer["ok"] and "unknown op" in answer["error"]
    sglang_peer.start("after", [1, 2])  # still serving
    sglang_peer.stop("after")


def test_leaf_paths_drop_padding_and_follow_parents():
    tokens = [3, 4, 44, 5, 55, 0, 0]
    mask = [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],
        [1, 0, 1, 0, 1, 0, 0],
        [1, 0, 0, 0, 0, 1, 0],
        [1, 0, 0, 0, 0, 0, 1],
    ]
    assert leaf_paths(tokens, mask) == [[4, 5], [44, 55]]


def test_token_tail_keeps_the_last_tokens():
    tail = TokenTail([1, 2, 3], depth=2)
    tail.append([4])
    assert tail.tokens.tolist() == [3, 4] and tail.total == 4


# ------------------------------------------------------------------------ errors and imports


def test_unknown_peer_and_option_are_clear_errors():
    with pytest.raises(UnknownPeerError, match="valid peers: arctic-suffix, sglang-ngram, vllm-ngram"):
        create_peer("tensorrt")
    with pytest.raises(specplug.InvalidOptionError, match="unknown option 'depth'.*Valid options: max_tree_depth"):
        create_peer("arctic-suffix", depth=3)
    with pytest.raises(specplug.InvalidOptionError, match="num_speculative_tokens"):
        create_peer("vllm-ngram", num_speculative_tokens=0)
    assert peer_names() == ["arctic-suffix", "sglang-ngram", "vllm-ngram"]


def test_missing_sglang_venv_names_the_setup_script(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECPLUG_PEERS_PYTHON", str(tmp_path / "no-python"))
    with pytest.raises(PeerNotInstalledError, match=r"scripts/setup_peers\.sh"):
        create_peer("sglang-ngram")


def test_missing_engine_module_names_the_setup_script(monkeypatch):
    # None in sys.modules makes the import fail, as on a machine without the engine
    for module in ("arctic_inference", "arctic_inference.suffix_decoding"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(PeerNotInstalledError, match=r"arctic-suffix.*scripts/setup_peers\.sh"):
        create_peer("arctic-suffix")


def test_missing_vllm_names_its_setup_script(monkeypatch):
    for module in ("vllm.v1.spec_decode.ngram_proposer", "vllm.config"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(PeerNotInstalledError, match=r"vllm-ngram.*scripts/setup_vllm\.sh"):
        create_peer("vllm-ngram")


def test_importing_specplug_imports_no_engine():
    code = (
        "import sys, specplug, specplug.lab.peers, specplug.lab.perf, specplug.cli._perf\n"
        "specplug.methods()\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch', 'sglang', 'arctic_inference'))\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
