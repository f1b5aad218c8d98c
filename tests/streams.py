"""Hypothesis strategies for token streams and interleaved request schedules."""

from __future__ import annotations

from hypothesis import strategies as st

#: small vocabularies make repeats (and so matches) frequent
tokens = st.lists(st.integers(0, 5), min_size=0, max_size=60)


@st.composite
def repetitive_tokens(draw, min_size: int = 0, max_size: int = 80):
    """Token lists built from repeated chunks, like code edits and agent loops."""
    chunks = draw(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=8), min_size=1, max_size=4))
    out: list[int] = []
    while len(out) < max_size and draw(st.booleans()) or len(out) < min_size:
        if draw(st.booleans()):
            out.extend(draw(st.sampled_from(chunks)))
        else:
            out.append(draw(st.integers(0, 9)))
    return out[:max_size]


@st.composite
def schedules(draw, requests: int = 3):
    """Interleaved operations over several requests: (request, action, payload)."""
    ops = []
    live: set[int] = set()
    for _ in range(draw(st.integers(1, 40))):
        rid = draw(st.integers(0, requests - 1))
        if rid not in live:
            ops.append((rid, "start", draw(repetitive_tokens())))
            live.add(rid)
            continue
        action = draw(st.sampled_from(["propose", "extend", "extend", "stop"]))
        if action == "stop":
            live.discard(rid)
            ops.append((rid, "stop", None))
        elif action == "propose":
            ops.append((rid, "propose", draw(st.integers(1, 10))))
        else:
            ops.append((rid, "extend", draw(st.lists(st.integers(0, 9), min_size=1, max_size=5))))
    return ops
