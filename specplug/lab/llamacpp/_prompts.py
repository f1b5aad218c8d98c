"""Sample prompts for tuning and benchmarks: JSONL files, one prompt a line.

Each line is a JSON object with ``"prompt"`` (raw text, sent as is) or ``"messages"``
(a chat, rendered with the model's own template by the server), and optionally ``"id"``.
The shipped files (``code_edit.jsonl``, ``code_edit_tune.jsonl``, ``chat.jsonl``,
``agentic.jsonl`` in ``specplug/lab/data/prompts/raw/``) are found by :func:`shipped_prompts`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from specplug import InvalidOptionError
from specplug._inputs import InputFileError, is_file, parse_json, read_text
from specplug._outputs import short_path

__all__ = ["Prompt", "load_prompts", "shipped_prompts"]


@dataclass(frozen=True)
class Prompt:
    """One sample prompt: raw text, or chat messages to render with the model's template."""

    id: str
    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None

    def render(self, server: Any) -> str:
        """The prompt text for ``server`` (a :class:`LlamaServer`): chats get its template."""
        if self.text is not None:
            return self.text
        return server.chat_prompt([dict(message) for message in self.messages or ()])


def shipped_prompts(name: str) -> Path:
    """Path of a shipped prompt file: ``code_edit``, ``code_edit_tune``, ``chat`` or ``agentic``."""
    folder = resources.files("specplug.lab") / "data" / "prompts" / "raw"
    valid = sorted(entry.name.removesuffix(".jsonl") for entry in folder.iterdir() if entry.name.endswith(".jsonl"))
    if name not in valid:
        raise InvalidOptionError(f"no shipped prompt file {name!r}; valid: {', '.join(valid)}")
    return Path(str(folder / f"{name}.jsonl"))


def load_prompts(path: str | os.PathLike[str]) -> list[Prompt]:
    """The prompts of a JSONL file; a bad line is an error naming the file and line."""
    file = Path(path)
    if not is_file(file):
        raise InvalidOptionError(f"prompt file {short_path(file)!r} does not exist (expected JSONL: one {{\"prompt\": ...}} a line)")
    try:
        text = read_text(file)
    except InputFileError as error:
        raise InvalidOptionError(f"prompt file {error}") from None
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            item = parse_json(line)
        except json.JSONDecodeError as error:
            raise InvalidOptionError(f"{where}: not valid JSON: {error.msg} at column {error.colno}") from None
        prompts.append(_prompt(item, where, default_id=f"{file.stem}-{number}"))
    if not prompts:
        raise InvalidOptionError(f"prompt file {str(file)!r} has no prompts")
    return prompts


def _prompt(item: object, where: str, default_id: str) -> Prompt:
    if not isinstance(item, dict):
        raise InvalidOptionError(f"{where}: expected an object with \"prompt\" or \"messages\", got {type(item).__name__}")
    ident = str(item.get("id", default_id))
    if isinstance(item.get("prompt"), str):
        return Prompt(ident, text=item["prompt"])
    messages = item.get("messages")
    if isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages
    ):
        return Prompt(ident, messages=tuple({"role": m["role"], "content": m["content"]} for m in messages))
    raise InvalidOptionError(
        f"{where}: needs \"prompt\" (a string) or \"messages\" (a list of {{\"role\", \"content\"}} strings)"
    )
