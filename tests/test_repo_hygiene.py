"""The tracked tree describes the software, never how it was made: no work stops, no numbers of a
tracker users cannot see, no agents ("helpers") or work sessions, no rounds of tuning.

Legitimate uses stay allowed: an upstream project's issue named with its project ("vLLM issue 55412"),
pytest's ``scope="session"``, a Unix process session (``setsid``), a benchmark's measurement rounds.
"""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

#: projects whose issue and pull-request numbers a reader can look up: "vLLM issue 55412", "SGLang's PR 12"
UPSTREAM_BEFORE = re.compile(
    r"\b(?:vllm|sglang|llama\.cpp|tensorrt-llm|trt-llm|numba|pytorch|torch|transformers|typer|click|pluggy|github)"
    r"(?:'s)?\s+$",
    re.IGNORECASE,
)

#: (what the hit is, the pattern, whether an upstream project's name before it makes it fine)
FORBIDDEN: tuple[tuple[str, re.Pattern[str], bool], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE), upstream)
    for name, pattern, upstream in (
        ("a work stop", r"(?<![-\w])stops? #?\d", False),
        ("a tracker's issue number", r"\b(?:issues?|pr|pull request) #?\d", True),
        ("a helper", r"\bhelpers?\b", False),
        ("a work session", r"(?<!process )(?<!\")\bsessions?\b(?!\")", False),
        ("a round of tuning", r"\btuning rounds?\b|\brounds? (?:\d+ )?of tuning\b", False),
    )
)


def _tracked_text() -> list[tuple[str, str]]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in filter(None, listed.decode().split("\0")):
        path = ROOT / name
        if name == THIS or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary: images, models
            continue
        files.append((name, data.decode("utf-8", errors="replace")))
    return files


def hits(name: str, text: str) -> list[str]:
    """``path:line: what`` for each forbidden phrase in ``text``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern, upstream in FORBIDDEN:
            for match in pattern.finditer(line):
                if upstream and UPSTREAM_BEFORE.search(line[: match.start()]):
                    continue
                found.append(f"{name}:{number}: {what} ({match.group(0)!r}): {line.strip()[:120]}")
                break
    return found


def test_no_tracked_file_says_how_the_project_was_made():
    found = [hit for name, text in _tracked_text() for hit in hits(name, text)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "measured at stop 29 on a shared machine",
        "the targets of issue 11",
        "Issue 16's fifth round",
        "four helpers' jobs, load 4-14",
        "the helper returns the slot",
        "another session training a neural head",
        "this work session's machine",
        "the ninth tuning round",
        "round 3 of tuning",
    ],
)
def test_each_kind_of_phrase_is_caught(line):
    assert hits("x.md", line)


@pytest.mark.parametrize(
    "line",
    [
        "vLLM issue 55412 tracks it",
        "see SGLang's issue 1234",
        "llama.cpp PR 9000",
        '@pytest.fixture(scope="session")',
        "each worker in its own process session (setsid)",
        "start_new_session=True, own_session=False",
        "FIRST LOOK, round 1 of 3",
        "a non-stop 24-hour run",
    ],
)
def test_legitimate_uses_pass(line):
    assert not hits("x.md", line)


def test_no_tracked_symlink_leaves_the_clone():
    """A link into one machine's folders (a venv, a model cache) breaks every other clone: the setup
    scripts then find a dangling path where they create the venv."""
    listed = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    links = [entry.split("\t", 1)[1] for entry in filter(None, listed.decode().split("\0")) if entry.startswith("120000 ")]
    escaping = [name for name in links if not (ROOT / name).resolve().is_relative_to(ROOT.resolve())]
    assert not escaping, f"tracked symlinks that point outside the repository: {escaping}"


def test_no_tracked_environment_or_cache():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    top = {name.split("/", 1)[0] for name in filter(None, listed.decode().split("\0"))}
    local = sorted(name for name in top if name.startswith((".venv", ".models", ".cache", "out")))
    assert not local, f"tracked machine-local paths (they belong in .gitignore): {local}"


#: the first and last line git writes around a hunk it could not merge (seven or more signs and a label;
#: the ``=======`` between them is also a Markdown heading's underline)
CONFLICT_MARKER = re.compile(r"^(?:<{7,}|>{7,}) \S")


def test_no_tracked_file_holds_a_merge_conflict():
    found = [
        f"{name}:{number}: {line[:80]}"
        for name, text in _tracked_text()
        for number, line in enumerate(text.splitlines(), 1)
        if CONFLICT_MARKER.match(line)
    ]
    assert not found, "unresolved merge conflicts:\n" + "\n".join(found)


def test_every_tracked_data_file_parses():
    """docs/bench's figures, the cost models and the config snippets are read by commands and by
    users: a file that does not parse is a broken result, whatever its prose says."""
    broken = []
    for name, text in _tracked_text():
        try:
            if name.endswith(".json"):
                json.loads(text)
            elif name.endswith(".jsonl"):
                for line in filter(str.strip, text.splitlines()):
                    json.loads(line)
            elif name.endswith(".toml"):
                tomllib.loads(text)
        except ValueError as error:  # JSONDecodeError and TOMLDecodeError both are
            broken.append(f"{name}: {error}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("line", ["<<<<<<< HEAD", ">>>>>>> main:docs/x.json", "<<<<<<<< HEAD:docs/bench/a.json"])
def test_conflict_markers_are_caught(line):
    assert CONFLICT_MARKER.match(line)


@pytest.mark.parametrize("line", ["=======", "<<<<<< six", ">>>>>>>", "x <<<<<<< y"])
def test_text_that_only_looks_like_a_marker_passes(line):
    assert not CONFLICT_MARKER.match(line)
