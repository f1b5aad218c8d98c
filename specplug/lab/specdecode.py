"""Traces from SpecDecode-Bench's profiled acceptance data (real EAGLE-3 and n-gram drafters).

SpecDecode-Bench (github.com/SpecDecode-Bench/simulator, arXiv 2601.11580) recorded, for real
requests of four datasets, the greedy output of Llama-3.1-8B-Instruct and, at every output
position, how many tokens a real EAGLE-3 head and a real n-gram drafter would have had accepted
there. Its data carries no licence, so specplug ships none of it: a user converts their own copy::

    specplug trace --specdecode path/to/simulator --out specdecode.jsonl

Each line of its ``combined_<dataset>.jsonl`` files holds ``id``, ``prompt_token_ids``,
``generated_token_ids`` and, per output position ``i``, ``acc_eagle.acc_len[i]`` and
``acc_ngram.acc_len[i]``: the tokens a step drafted after ``prompt + output[:i]`` yields,
the target's own token included (so ``acc_len - 1`` tokens of the draft were accepted). That
is this project's trace format (:mod:`specplug.lab.trace`) with the EAGLE-3 column as
``neural_head`` and the n-gram column as ``lookup``. The workload is the dataset's name.

The EAGLE-3 column was recorded in a generation run of its own and is shorter or longer than
the output in some requests (its text drifts from the recorded output after a near-tie); as
the simulator does, a request is cut to the positions both cover, and ``meta`` keeps the
lengths before the cut.

>>> import io, json
>>> line = json.dumps({"id": 7, "prompt_token_ids": [1, 2], "generated_token_ids": [3, 4, 5],
...                    "acc_eagle": {"acc_len": [1, 3, 2]}, "acc_ngram": {"acc_len": [1, 1, 2]}})
>>> (record,) = parse_specdecode(io.StringIO(line), "gsm8k")
>>> record.id, record.workload, record.neural_head.accepted, record.lookup.accepted
('gsm8k/7', 'gsm8k', (0, 2, 1), (0, 0, 1))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from specplug._errors import InvalidOptionError
from specplug.lab.trace import NeuralTrace, TraceError, TraceRecord

__all__ = ["DATA_FOLDER", "K", "parse_specdecode", "read_specdecode", "specdecode_files"]

#: where the repository keeps the profiled data
DATA_FOLDER = "data/llama3.1-8B"
#: the draft length the columns are recorded at: the longest acceptance the data holds
#: (20 accepted tokens, n-gram) fits it; the data does not name its draft length
K = 20
_PREFIX = "combined_"
_EAGLE = "EAGLE-3 over Llama-3.1-8B-Instruct (SpecDecode-Bench profile, H100)"
_NGRAM = "n-gram (SpecDecode-Bench profile)"


def specdecode_files(source: str | Path) -> list[Path]:
    """The data files under ``source``: a checkout of the repository, a folder of ``.jsonl``
    files (its data folder, or one holding some of them), or one ``.jsonl`` file."""
    path = Path(source)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InvalidOptionError(f"--specdecode {source}: no such file or folder")
    folder = path / DATA_FOLDER if (path / DATA_FOLDER).is_dir() else path
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise InvalidOptionError(
            f"--specdecode {source}: no .jsonl files in {folder}; give a checkout of "
            f"SpecDecode-Bench/simulator, its {DATA_FOLDER} folder, or a combined_<dataset>.jsonl file"
        )
    return files


def workload_of(path: Path) -> str:
    """The dataset a file holds: its name without ``combined_`` and ``.jsonl``."""
    return path.stem.removeprefix(_PREFIX)


def _column(data: dict[str, Any], key: str, name: str, line: int) -> list[int]:
    column = data.get(key)
    lengths = column.get("acc_len") if isinstance(column, dict) else None
    if not isinstance(lengths, list) or not lengths:
        raise TraceError(name, line, f"{key}.acc_len", "is missing or empty; it must list accepted lengths per position")
    for index, value in enumerate(lengths):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= K + 1:
            raise TraceError(name, line, f"{key}.acc_len", f"item {index} = {value!r:.40} is not an int in 1..{K + 1}")
    return lengths


def parse_specdecode(stream: IO[str], workload: str, name: str = "") -> Iterator[TraceRecord]:
    """Trace records from one open data file; ``name`` (the file) is used in error messages."""
    where = name or workload
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise TraceError(where, number, "(line)", f"not valid JSON: {error.msg} at column {error.colno}") from None
        if not isinstance(data, dict):
            raise TraceError(where, number, "(line)", f"must be a JSON object, got {type(data).__name__}")
        output = data.get("generated_token_ids")
        if not isinstance(output, list) or not output:
            raise TraceError(where, number, "generated_token_ids", "is missing or empty")
        eagle = _column(data, "acc_eagle", where, number)
        ngram = _column(data, "acc_ngram", where, number)
        kept = min(len(output), len(eagle), len(ngram))
        fields: dict[str, Any] = {
            "v": 3,
            "id": f"{workload}/{data.get('id')}",
            "workload": workload,
            "prompt_ids": data.get("prompt_token_ids"),
            "output_ids": output[:kept],
            "neural_head": NeuralTrace(k=K, accepted=[value - 1 for value in eagle[:kept]], drafter=_EAGLE),
            "lookup": NeuralTrace(k=K, accepted=[value - 1 for value in ngram[:kept]], drafter=_NGRAM),
            "meta": {"source": "SpecDecode-Bench", "model": "Llama-3.1-8B-Instruct"},
        }
        if kept < len(output) or kept < len(eagle):
            fields["meta"] = {**fields["meta"], "output_length": len(output), "eagle_length": len(eagle)}
        try:
            yield TraceRecord.model_validate(fields)
        except Exception as error:  # noqa: BLE001 - the trace model names the field
            first = error.errors()[0] if hasattr(error, "errors") else {"loc": (), "msg": str(error)}
            field = ".".join(str(part) for part in first["loc"]) or "(record)"
            raise TraceError(where, number, field, first["msg"].removeprefix("Value error, ")) from None


def read_specdecode(sources: Iterable[str | Path]) -> list[TraceRecord]:
    """Every record of every data file under ``sources``, file by file in name order."""
    records: list[TraceRecord] = []
    for source in sources:
        for path in specdecode_files(source):
            with path.open(encoding="utf-8") as stream:
                records += parse_specdecode(stream, workload_of(path), str(path))
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise InvalidOptionError(f"request {record.id} appears twice in --specdecode; give each data file once")
        seen.add(record.id)
    return records
