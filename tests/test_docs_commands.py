"""The commands and links printed in README.md and docs/ work on a fresh clone.

Every ``specplug ...`` command in a shell code block or an inline code span of README.md or
docs/*.md names a real command, uses only options that command has, and its ``--help`` runs
through the console script's entry point; cheap commands (``methods``, ``preset``) run exactly as
written. Every relative link in README.md and docs/**/*.md points at a
file that exists, and an ``#anchor`` at a heading of that file.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from specplug.cli import build_app, main

ROOT = Path(__file__).resolve().parents[1]
COMMAND_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: commands cheap and self-contained enough to run exactly as the docs print them
RUN_AS_WRITTEN = ("methods", "preset")
#: `specplug` at the start of a shell command (after `VAR=value` words, an optional path) or in `$(...)`
COMMAND_START = re.compile(r"(?:^|\$\(|&&|;|\|)\s*(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?specplug\s")
#: a word the reader replaces (MODEL, FILE.toml, NAME): the command cannot run as written
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z0-9_]{2,}\b")
#: fenced blocks read as shell commands (a block without a language too; output is marked `text`)
SHELL_BLOCKS = frozenset({"", "bash", "sh", "shell", "console"})
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class DocCommand:
    where: str  # file:line
    words: tuple[str, ...]  # the words after `specplug`

    def __str__(self) -> str:
        return f"{self.where}: specplug {' '.join(self.words)}"


def _shell_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of every fenced code block of shell commands."""
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    start, shell = 0, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if current is None:
                current, start = [], number + 1
                shell = line.strip().strip("`").strip() in SHELL_BLOCKS
            else:
                if shell:
                    blocks.append((start, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _logical_lines(start: int, lines: list[str]) -> list[tuple[int, str]]:
    """Shell lines with their `\\` continuations joined, each with its first line number."""
    joined: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, line in enumerate(lines):
        number = start + offset
        text = line.rstrip()
        head = pending if pending is not None else (number, "")
        if text.endswith("\\"):
            pending = (head[0], head[1] + text[:-1] + " ")
        else:
            joined.append((head[0], head[1] + text))
            pending = None
    if pending is not None:
        joined.append(pending)
    return joined


def _words(command: str) -> tuple[str, ...]:
    """The words of one command, up to a comment, a redirection or the end of its `$(...)` or pipeline."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars="|;&)<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for word in lexer:
        if word and set(word) <= set("|;&)<>"):
            break
        words.append(word)
    return tuple(words)


def _inline_code(text: str) -> list[tuple[int, str]]:
    """(line number, code span) of every inline code span outside fenced blocks."""
    spans: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside:
            spans.extend((number, span) for span in re.findall(r"`([^`]+)`", line))
    return spans


def doc_commands() -> list[DocCommand]:
    """Every `specplug ...` command in a shell block or an inline code span of the docs."""
    commands: list[DocCommand] = []
    for path in COMMAND_DOCS:
        text = path.read_text(encoding="utf-8")
        lines = [line for start, block in _shell_blocks(text) for line in _logical_lines(start, block)]
        for number, line in [*lines, *_inline_code(text)]:
            for match in COMMAND_START.finditer(line):
                words = _words(line[match.end():])
                commands.append(DocCommand(f"{path.relative_to(ROOT)}:{number}", words))
    return commands


def _resolve(words: tuple[str, ...]) -> tuple[Any, list[str], list[str]]:
    """The command object the words name, the subcommand path, and the words after it."""
    command = _root()
    path: list[str] = []
    rest = list(words)
    while _is_group(command) and rest and rest[0] in command.commands:
        path.append(rest.pop(0))
        command = command.commands[path[-1]]
    return command, path, rest


@functools.cache
def _root() -> Any:
    # Typer's command objects (its own click), walked by their attributes
    return typer.main.get_command(build_app())


def _is_group(command: Any) -> bool:
    return isinstance(getattr(command, "commands", None), dict)


def _option_names(command: Any) -> set[str]:
    names = {"--help"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _takes_any_option(command: Any) -> bool:
    """A command that passes unknown options on (e.g. to trtllm-serve)."""
    settings = command.context_settings or {}
    return bool(settings.get("ignore_unknown_options") or settings.get("allow_extra_args"))


def _run(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of the `specplug` console script's entry point on these words."""
    monkeypatch.setenv("COLUMNS", "200")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main(args)
    out, err = capsys.readouterr()
    return stop.value.code if isinstance(stop.value.code, int) else 1, out, err


COMMANDS = doc_commands()


def test_the_docs_print_specplug_commands():
    # the extraction itself: the README's and the engine pages' commands are found
    assert len(COMMANDS) >= 20, [str(c) for c in COMMANDS]
    found = {tuple(_resolve(c.words)[1]) for c in COMMANDS}
    for path in (("methods",), ("bench",), ("perf",), ("preset",), ("trtllm", "serve"), ("trtllm", "check")):
        assert path in found, f"no `specplug {' '.join(path)}` command in the docs"


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_doc_command_names_a_command_and_its_options(command: DocCommand):
    cli, path, rest = _resolve(command.words)
    assert path or rest[:1] in ([], ["--help"], ["--version"]), f"{command}: `{rest[0]}` is not a specplug command"
    assert not path or not _is_group(cli), f"{command}: names the group `{' '.join(path)}`, not a command"
    if _takes_any_option(cli):
        return
    valid = _option_names(cli)
    for word in rest:
        if word.startswith("-") and not re.fullmatch(r"-\d.*", word):
            option = word.split("=", 1)[0]
            where = f"specplug {' '.join(path)}"
            assert option in valid, f"{command}: `{option}` is not an option of `{where}`: {sorted(valid)}"


HELP_PATHS = sorted({tuple(_resolve(c.words)[1]) for c in COMMANDS})


@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda path: " ".join(path) or "specplug")
def test_doc_command_help_runs(path: tuple[str, ...], capsys, monkeypatch):
    code, out, err = _run([*path, "--help"], capsys, monkeypatch)
    assert code == 0, f"specplug {' '.join(path)} --help: exit {code}\n{err}"
    assert "Usage" in out and "Traceback" not in err


CHEAP = [c for c in COMMANDS if c.words and c.words[0] in RUN_AS_WRITTEN and not PLACEHOLDER.search(" ".join(c.words))]


@pytest.mark.parametrize("command", CHEAP, ids=str)
def test_cheap_doc_command_runs_as_written(command: DocCommand, capsys, monkeypatch):
    code, out, err = _run(list(command.words), capsys, monkeypatch)
    assert code == 0, f"{command}: exit {code}\n{err}"
    assert out.strip(), f"{command}: printed nothing"


def test_some_doc_commands_run_as_written():
    assert len(CHEAP) >= 3, [str(c) for c in CHEAP]


# ----------------------------------------------------------------------------------------------- links


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            slug = _slug(line.lstrip("#"))
            seen = counts.get(slug, 0)
            counts[slug] = seen + 1
            anchors.add(slug if not seen else f"{slug}-{seen}")
    return anchors


def _links(path: Path) -> list[tuple[int, str]]:
    links: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
        elif not inside:
            links.extend((number, target) for target in LINK.findall(re.sub(r"`[^`]*`", "", line)))
    return links


LINKS = [
    (f"{path.relative_to(ROOT)}:{number}", path, target)
    for path in LINK_DOCS
    for number, target in _links(path)
    if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
]


def test_the_docs_have_relative_links():
    assert len(LINKS) >= 20


@pytest.mark.parametrize(("where", "source", "target"), LINKS, ids=[f"{w} {t}" for w, _, t in LINKS])
def test_relative_link_points_at_an_existing_file_and_heading(where: str, source: Path, target: str):
    file_part, _, anchor = target.partition("#")
    linked = (source.parent / file_part).resolve() if file_part else source
    assert linked.exists(), f"{where}: {target} -> {linked} does not exist"
    assert linked.is_relative_to(ROOT), f"{where}: {target} points outside the repository"
    if anchor and linked.suffix == ".md":
        anchors = _anchors(linked)
        assert anchor in anchors, f"{where}: no heading `#{anchor}` in {linked.relative_to(ROOT)}: {sorted(anchors)}"
