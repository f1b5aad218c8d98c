"""Traces: recorded requests of a real engine, replayed by ``specplug bench``.

A trace file is JSON Lines, one request a line (UTF-8, ``\\n`` line ends)::

    {"v": 2, "id": "code-edit/rename-00", "workload": "code-edit",
     "prompt_ids": [1, 2, ...], "output_ids": [5, 6, ...],
     "neural": {"k": 6, "accepted": [3, 0, 6, ...], "drafter": "..."},
     "neural_head": {"k": 6, "accepted": [1, 0, 0, ...], "drafter": "..."},
     "lookup": {"k": 20, "accepted": [0, 0, 7, ...], "drafter": "..."},
     "engine_runs": {"llama.cpp/ngram-mod": {"draft_n": 40, "draft_n_accepted": 31, "predicted_n": 128}},
     "meta": {"model": "...", "engine": "llama-server", ...}}

- ``v``: format version: 3 for a record with a ``lookup`` column, 2 for one with a
  ``neural_head`` column (and no ``lookup``), else 1. All three are read; writers write the
  lowest version that holds the record, so a file without the newer columns is written byte
  for byte as before.
- ``id``: unique in the file; ``workload``: the group the benchmark reports it under.
- ``prompt_ids``: the prompt as the engine tokenized it (non-empty); ``output_ids``: the
  greedy (temperature 0) output ids that followed it (non-empty).
- ``neural`` (optional): a neural drafter measured on the same tokens. ``accepted[i]`` is
  how many of its ``k`` greedy draft tokens, drafted after ``prompt + output[:i]``, equal
  ``output[i:]``; one entry per output position, each in ``0..k``. In the shipped traces it is a
  stand-in draft model (SmolLM2 requantized to Q2_K, run by llama-server).
- ``neural_head`` (optional, version 2): the same measurement for an EAGLE head over the target
  (``specplug trace --neural-head``), kept beside ``neural`` so a replay can take either
  (``specplug bench --neural draft-model|head``).
- ``lookup`` (optional, version 3): the same measurement for a lookup drafter (an n-gram
  drafter) on the same tokens, where the traces come from a source that recorded one
  (``specplug trace --specdecode``). ``0`` there means it drafted nothing right: a source that
  records only acceptance cannot tell a miss from no match.
- ``engine_runs`` (optional): per engine method, counters an engine reported when it decoded
  the same prompt with that method (llama-server's ``timings``): ``draft_n`` (tokens drafted),
  ``draft_n_accepted`` (of those, accepted; at most ``draft_n`` and below ``predicted_n``),
  ``predicted_n`` (tokens generated, >= 1), all required ints >= 0; optionally
  ``predicted_per_second`` (a finite number >= 0), and ``identical`` / ``first_divergence``
  comparing its output with ``output_ids``. Other counters are kept as they are.
- ``meta``: free-form strings, numbers and objects (model, engine version, prompt text).

Readers reject anything else with an error that names the file, the line and the field.
Writers replace a file whole (a temporary file, then a rename), so a failed or interrupted
write leaves the previous file intact.

>>> import io, json
>>> line = json.dumps({"v": 1, "id": "a", "workload": "w", "prompt_ids": [1], "output_ids": [2, 3]})
>>> [record.output_ids for record in parse_traces(io.StringIO(line), "inline")]
[(2, 3)]
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from specplug._drafts import MAX_TOKEN_ID
from specplug._errors import SpecplugError
from specplug._inputs import InputFileError, parse_json, read_text
from specplug._outputs import atomic_output, short_path

__all__ = [
    "FORMAT_VERSION",
    "VERSIONS",
    "EngineRun",
    "NeuralTrace",
    "TraceError",
    "TraceRecord",
    "TraceWriter",
    "dump_record",
    "format_version",
    "parse_traces",
    "read_traces",
    "write_traces",
]

#: the newest format version; :data:`VERSIONS` are all read
FORMAT_VERSION = 3
VERSIONS = (1, 2, 3)
#: the lowest version that has each optional column
_COLUMN_VERSIONS = {"neural_head": 2, "lookup": 3}
#: the per-position acceptance columns (each one entry per output position)
_NEURAL_COLUMNS = ("neural", "neural_head", "lookup")


class TraceError(SpecplugError, ValueError):
    """A trace that cannot be read: the message names the file, the line and the field."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field = path, line, field
        super().__init__(f"{short_path(path)}:{line}: field {field}: {problem}")


def _token_ids(value: object) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"must be a list of token ids, got {type(value).__name__}")
    for index, token in enumerate(value):
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token <= MAX_TOKEN_ID:
            raise ValueError(f"item {index} = {token!r:.40} is not a token id (an int in 0..{MAX_TOKEN_ID})")
    return tuple(value)


class NeuralTrace(BaseModel):
    """A neural drafter's accepted length at every output position (see the module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(ge=1, le=64, strict=True)
    accepted: tuple[int, ...]
    drafter: str = ""

    @field_validator("accepted", mode="before")
    @classmethod
    def _accepted(cls, value: object) -> tuple[int, ...]:
        return _token_ids(value)

    @model_validator(mode="after")
    def _range(self) -> NeuralTrace:
        for index, count in enumerate(self.accepted):
            if count > self.k:
                raise ValueError(f"accepted[{index}] = {count} is larger than k = {self.k}")
        return self


class EngineRun(BaseModel):
    """The counters of one engine method on one request (see the module doc); others are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    draft_n: int = Field(ge=0, strict=True)
    draft_n_accepted: int = Field(ge=0, strict=True)
    predicted_n: int = Field(ge=1, strict=True)
    predicted_per_second: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    identical: bool = True
    first_divergence: int | None = Field(default=None, ge=0, strict=True)

    @model_validator(mode="after")
    def _consistent(self) -> EngineRun:
        if self.draft_n_accepted > self.draft_n:
            raise ValueError(f"draft_n_accepted = {self.draft_n_accepted} is larger than draft_n = {self.draft_n}")
        if self.draft_n_accepted >= self.predicted_n:
            # every step yields the target's own token besides the accepted draft tokens
            raise ValueError(
                f"draft_n_accepted = {self.draft_n_accepted} must be below predicted_n = {self.predicted_n}"
            )
        return self


class TraceRecord(BaseModel):
    """One recorded request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = Field(strict=True)
    id: str = Field(min_length=1, strict=True)
    workload: str = Field(min_length=1, strict=True)
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    neural: NeuralTrace | None = None
    neural_head: NeuralTrace | None = None
    lookup: NeuralTrace | None = None
    engine_runs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("v")
    @classmethod
    def _version(cls, value: int) -> int:
        if value not in VERSIONS:
            readable = ", ".join(str(version) for version in VERSIONS[:-1]) + f" and {VERSIONS[-1]}"
            raise ValueError(f"format version {value} is not supported; this specplug reads versions {readable}")
        return value

    @field_validator("neural_head", "lookup")
    @classmethod
    def _column_needs_its_version(cls, value: NeuralTrace | None, info: ValidationInfo) -> NeuralTrace | None:
        version = info.data.get("v")  # absent when v itself was rejected
        needed = _COLUMN_VERSIONS[str(info.field_name)]
        if value is not None and version is not None and version < needed:
            raise ValueError(f"needs format version {needed} (\"v\": {needed}); version {version} has no {info.field_name} column")
        return value

    @field_validator("prompt_ids", "output_ids", mode="before")
    @classmethod
    def _ids(cls, value: object) -> tuple[int, ...]:
        ids = _token_ids(value)
        if not ids:
            raise ValueError("must not be empty")
        return ids

    @field_validator("engine_runs", mode="before")
    @classmethod
    def _engine_runs(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value  # the dict type check reports it
        runs = {}
        for name, run in value.items():
            try:
                checked = EngineRun.model_validate(run)
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                if first["type"] == "missing":
                    problem = f"{where} is missing"
                elif where:
                    problem = f"{where} = {first.get('input')!r:.40}: {first['msg']}"
                else:
                    problem = first["msg"].removeprefix("Value error, ")
                raise ValueError(f"{name!r}: {problem}") from None
            runs[name] = checked.model_dump(exclude_unset=True)
        return runs

    @model_validator(mode="after")
    def _neural_length(self) -> TraceRecord:
        for name in _NEURAL_COLUMNS:
            column = getattr(self, name)
            if column is not None and len(column.accepted) != len(self.output_ids):
                raise ValueError(
                    f"{name}.accepted has {len(column.accepted)} entries but output_ids has "
                    f"{len(self.output_ids)}; one entry per output position is needed"
                )
        return self


def format_version(record: TraceRecord) -> int:
    """The lowest format version that holds ``record``: 3 with a ``lookup`` column, 2 with a
    ``neural_head`` column, else 1."""
    return max([1] + [version for name, version in _COLUMN_VERSIONS.items() if getattr(record, name) is not None])


def _field_of(error: dict[str, Any]) -> str:
    loc = [str(part) for part in error["loc"]]
    return ".".join(loc) if loc else "(record)"


def parse_traces(stream: IO[str], name: str) -> Iterator[TraceRecord]:
    """Records from an open text stream; ``name`` is used in error messages."""
    seen: dict[str, int] = {}
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            data = parse_json(line)
        except json.JSONDecodeError as error:
            hint = " (the file looks truncated)" if not line.endswith("\n") else ""
            raise TraceError(name, number, "(line)", f"not valid JSON{hint}: {error.msg} at column {error.colno}") from None
        if not isinstance(data, dict):
            raise TraceError(name, number, "(line)", f"must be a JSON object, got {type(data).__name__}")
        try:
            record = TraceRecord.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            problem = first["msg"].removeprefix("Value error, ")
            if first["type"] == "extra_forbidden":
                # a stray key inside a neural column lists that column's fields, not the record's
                nested = len(first["loc"]) > 1 and first["loc"][0] in _NEURAL_COLUMNS
                fields, what = (NeuralTrace.model_fields, "neural column") if nested else (TraceRecord.model_fields, "trace")
                problem = f"is not a {what} field; fields: {', '.join(fields)}"
            elif first["type"] == "missing":
                problem = "is missing"
            raise TraceError(name, number, _field_of(first), problem) from None
        if record.id in seen:
            raise TraceError(name, number, "id", f"{record.id!r} already used on line {seen[record.id]}")
        seen[record.id] = number
        yield record


def read_traces(path: str | Path) -> list[TraceRecord]:
    """All records of a trace file; an empty file is an error too."""
    path = Path(path)
    try:
        text = read_text(path)
    except InputFileError as error:
        raise TraceError(str(path), 0, "(file)", error.problem) from None
    records = list(parse_traces(io.StringIO(text, newline=None), str(path)))
    if not records:
        raise TraceError(str(path), 1, "(file)", "holds no records")
    return records


def dump_record(record: TraceRecord) -> str:
    """One record as its JSON line (without the line end), at the lowest version that holds it."""
    data = record.model_dump(mode="json", exclude_none=True)
    data["v"] = format_version(record)
    for key in ("engine_runs", "meta"):
        if not data.get(key):
            data.pop(key, None)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class TraceWriter:
    """Writes records to a trace file, as a context manager.

    By default the file is replaced whole when the block ends without an exception (a
    temporary file, then a rename): a failed or interrupted run leaves the previous file as it
    was. With ``append``, each record is one flushed line added to the file, so an interrupted
    run keeps every finished request.
    """

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self._atomic = None if append else atomic_output(self.path)
        if self._atomic is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._stream: IO[str] = self.path.open("a", encoding="utf-8")
        else:
            self._stream = self._atomic.__enter__()

    def write(self, record: TraceRecord) -> None:
        self._stream.write(dump_record(record) + "\n")
        if self._atomic is None:
            self._stream.flush()

    def close(self, error: BaseException | None = None) -> None:
        """Finish the file; with ``error`` (the block failed), an atomic write is dropped."""
        if self._atomic is None:
            self._stream.close()
        elif error is None:
            self._atomic.__exit__(None, None, None)
        else:
            self._atomic.__exit__(type(error), error, error.__traceback__)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        self.close(error)


def write_traces(path: str | Path, records: Iterable[TraceRecord]) -> None:
    """Write ``records`` to ``path``, replacing it whole (never a truncated file)."""
    with TraceWriter(path) as writer:
        for record in records:
            writer.write(record)
