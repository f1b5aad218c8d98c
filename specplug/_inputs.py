"""Input files a user hands specplug (traces, prompt files, cost models), read one way.

Whatever is wrong with such a file must end as one line naming it, never as a traceback:
not a file, unreadable, not UTF-8, JSON nested past the recursion limit, or a number longer than
Python converts (4300 digits), which ``json`` and ``tomllib`` raise as plain ValueError or
RecursionError rather than as their own decode errors. JSON nested deeper than
:data:`MAX_JSON_DEPTH` is refused too: it would load, then fail later when written back
(pydantic's serializer stops at a depth of its own).

>>> parse_json('{"a": [1, 2]}')
{'a': [1, 2]}
>>> parse_json("[" * 100_000)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
json.decoder.JSONDecodeError: nested too deeply (more than ... levels): line 1 column 1 (char 0)
>>> parse_json("[" * 65 + "]" * 65)
Traceback (most recent call last):
...
json.decoder.JSONDecodeError: nested deeper than 64 levels: line 1 column 1 (char 0)
>>> parse_json("9" * 5000)
Traceback (most recent call last):
...
json.decoder.JSONDecodeError: a number with more than 4300 digits: line 1 column 1 (char 0)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from specplug._errors import SpecplugError
from specplug._outputs import short_path

__all__ = ["MAX_INPUT_BYTES", "MAX_JSON_DEPTH", "InputFileError", "is_dir", "is_file", "parse_json", "parse_problem", "read_text"]

#: the deepest nesting of lists and objects accepted in a user's JSON (traces, prompts, options)
MAX_JSON_DEPTH = 64
#: the largest input file read (a trace, prompts, a cost model): a larger one, or a device that
#: never ends (``/dev/zero``), is refused rather than read until memory runs out
MAX_INPUT_BYTES = 1 << 30


class InputFileError(SpecplugError, ValueError):
    """An input file that cannot be read as UTF-8 text; ``problem`` says why without the path."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{short_path(path)}: {problem}")


def read_text(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of ``path``, or an InputFileError saying what is wrong with it (past
    :data:`MAX_INPUT_BYTES` too)."""
    file = Path(path)
    limit = MAX_INPUT_BYTES
    try:
        with file.open("rb") as stream:
            data = stream.read(limit + 1)  # one byte more tells a file past the limit
    except OSError as error:
        raise InputFileError(file, f"cannot be read: {error.strerror or error}") from None
    except MemoryError:
        raise InputFileError(file, "cannot be read: not enough memory to hold it") from None
    if len(data) > limit:
        raise InputFileError(file, f"is larger than {limit:,} bytes, the most specplug reads from one input file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputFileError(
            file, f"is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line} ({error.reason}); save it as UTF-8"
        ) from None


def is_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file; False, never an OSError, for a name the file system refuses
    (too long, a loop of links), which ``Path.is_file`` raises on some Pythons."""
    try:
        return Path(path).is_file()
    except OSError:
        return False


def is_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder; False, never an OSError (see :func:`is_file`)."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def parse_problem(error: Exception) -> str | None:
    """What a parser's RecursionError or digit-limit ValueError means for the user, else None."""
    if isinstance(error, RecursionError):
        return f"nested too deeply (more than {sys.getrecursionlimit()} levels)"
    if isinstance(error, ValueError) and "integer string conversion" in str(error):
        return f"a number with more than {getattr(sys, 'get_int_max_str_digits', lambda: 4300)()} digits"
    return None


def parse_json(text: str) -> Any:
    """``json.loads(text)``; every failure is a ``json.JSONDecodeError``, so callers catch one thing."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except (RecursionError, ValueError) as error:
        problem = parse_problem(error)
        if problem is None:
            raise
        raise json.JSONDecodeError(problem, text, 0) from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise json.JSONDecodeError(f"nested deeper than {MAX_JSON_DEPTH} levels", text, 0)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    # iterative, so the check itself never meets the recursion limit
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False
