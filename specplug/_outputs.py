"""Output files: checked before the work starts, written whole or not at all.

Every file specplug writes (bench JSON, Markdown and plots, traces, cost models, presets, stats)
goes through :func:`atomic_output`: the bytes go to a temporary file in the same folder, which
replaces the target with ``os.replace`` only once it is complete. A run that fails or is
interrupted halfway leaves the previous file as it was, never a truncated one. Commands that work
for minutes call :func:`check_output` first, so a path that cannot be written is reported before
the work, not after it.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_text_atomic(folder / "a.txt", "first")
>>> try:
...     with atomic_output(folder / "a.txt") as stream:
...         _ = stream.write("half of it")
...         raise KeyboardInterrupt
... except KeyboardInterrupt:
...     pass
>>> (folder / "a.txt").read_text(), sorted(p.name for p in folder.iterdir())
('first', ['a.txt'])
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from specplug._errors import InvalidOptionError, SpecplugError

__all__ = ["OutputFileError", "atomic_output", "check_output", "write_text_atomic"]


class OutputFileError(SpecplugError, OSError):
    """An output file that could not be written; the previous file, if any, is unchanged."""


@functools.cache
def _umask() -> int:
    # read once: os.umask can only be read by setting it, which is not thread-safe
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _existing_ancestor(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(".")  # pragma: no cover - a relative path's parents end in "."


def check_output(option: str, path: str | os.PathLike[str], *, folder: bool = False) -> Path:
    """``path`` as a Path when it can be written (a file, or with ``folder`` a folder), else an
    InvalidOptionError naming ``option`` and why.

    Missing parent folders are fine (they are made when the output is written); the nearest
    existing one must be a folder in which a file can be made, which is tried for real (as root,
    permission bits say little, and ``/proc`` refuses new files whatever they say).

    >>> import tempfile, pathlib
    >>> plain = pathlib.Path(tempfile.mkdtemp()) / "plain.txt"
    >>> _ = plain.write_text("x")
    >>> check_output("--json", plain / "out.json")
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: --json .../plain.txt/out.json: .../plain.txt is a file, not a folder
    """
    try:
        return _check_output(option, Path(path), folder)
    except OSError as error:  # a name too long for the file system, a loop of links, ...
        if isinstance(error, SpecplugError):
            raise
        raise InvalidOptionError(f"{option} {short_path(path)}: {error.strerror or error}") from None


def short_path(path: str | os.PathLike[str]) -> str:
    """``path`` for a message: cut in the middle past 200 characters (a pasted path can be huge)."""
    text = os.fspath(path)
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]}"


def _check_output(option: str, target: Path, folder: bool) -> Path:
    shown = short_path(target)
    what = "folder" if folder else "file"
    if target.is_dir() and not folder:
        raise InvalidOptionError(f"{option} {shown}: is a folder; give a {what} path")
    if target.exists() and folder and not target.is_dir():
        raise InvalidOptionError(f"{option} {shown}: is a file; give a {what} path")
    ancestor = target if folder and target.is_dir() else _existing_ancestor(target)
    if not ancestor.is_dir():
        raise InvalidOptionError(f"{option} {shown}: {short_path(ancestor)} is a file, not a folder")
    try:
        probe, name = tempfile.mkstemp(dir=ancestor, prefix=".specplug-probe-")
        os.close(probe)
        os.unlink(name)
    except OSError as error:
        raise InvalidOptionError(f"{option} {shown}: cannot write there ({short_path(ancestor)}: {error.strerror or error})") from None
    return target


@contextmanager
def atomic_output(path: str | os.PathLike[str], mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """A stream whose contents replace ``path`` when the block ends without an exception.

    The temporary file sits beside ``path`` (so the rename stays on one file system) and is
    removed when the block raises, KeyboardInterrupt included. Parent folders are made.
    """
    target = Path(path)
    try:
        if target.is_dir():
            raise IsADirectoryError(21, "Is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:
        raise OutputFileError(f"cannot write {target}: {error.strerror or error}") from None
    try:
        with open(handle, mode, encoding="utf-8" if mode == "w" else None) as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())  # the bytes are on disk before the name points at them
        if target.exists():
            # keep the permissions a user gave the file being replaced
            os.chmod(name, target.stat().st_mode & 0o7777)
        else:
            os.chmod(name, 0o666 & ~_umask())  # what open() would have given a new file
        os.replace(name, target)
    except BaseException as error:
        Path(name).unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, SpecplugError):
            raise OutputFileError(f"cannot write {target}: {error.strerror or error}") from error
        raise


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole, through :func:`atomic_output`."""
    with atomic_output(path) as stream:
        stream.write(text)
