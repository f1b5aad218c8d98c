"""Making traces with llama-server: greedy outputs, a neural drafter's acceptance, engine runs.

A prompt set (``specplug/lab/data/prompts/*.jsonl``) holds scripts of chat messages and
``{"generate": n}`` steps. Each step sends the conversation so far through the model's chat
template, records the prompt ids and the greedy output ids, and appends the output to the
conversation as the assistant's turn, so later turns repeat earlier outputs as an agent
loop does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from specplug import InvalidOptionError, accepted_prefix
from specplug._inputs import InputFileError, is_file, parse_json, read_text
from specplug._outputs import short_path
from specplug.lab.bench.llama_server import LlamaServer
from specplug.lab.trace import NeuralTrace, TraceRecord

__all__ = [
    "PROMPT_SETS", "first_user_turns", "generate_records", "head_acceptance", "load_prompt_sets", "neural_acceptance",
]

#: shipped prompt sets by workload name
PROMPT_SETS = {
    "spec-bench": "spec_bench.jsonl",
    "humaneval": "humaneval.jsonl",
    "code-edit": "code_edit.jsonl",
    "agentic": "agentic.jsonl",
}


def load_prompt_sets(names: Sequence[str]) -> list[dict[str, Any]]:
    """Scripts from shipped set names or from .jsonl paths; bad lines name the file and line."""
    scripts = []
    for name in names:
        if name in PROMPT_SETS:
            text = (resources.files("specplug.lab") / "data" / "prompts" / PROMPT_SETS[name]).read_text(encoding="utf-8")
            label = f"prompt set {name}"
        else:
            path = Path(name)
            if path.suffix != ".jsonl" or not is_file(path):
                raise InvalidOptionError(f"prompt set {short_path(name)!r} is neither one of {', '.join(PROMPT_SETS)} nor a .jsonl file")
            try:
                text, label = read_text(path), str(path)
            except InputFileError as error:
                raise InvalidOptionError(f"prompt set {error}") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = parse_json(line)
            except json.JSONDecodeError as error:
                raise InvalidOptionError(f"{label}:{number}: not valid JSON: {error.msg}") from None
            if not isinstance(item, dict):
                raise InvalidOptionError(
                    f"{label}:{number}: must be a JSON object with id, workload and script, got {type(item).__name__}"
                )
            for field in ("id", "workload", "script"):
                if field not in item:
                    raise InvalidOptionError(f"{label}:{number}: field {field} is missing")
            scripts.append(item)
    return scripts



def first_user_turns(name: str, count: int) -> list[list[dict[str, str]]]:
    """The first ``count`` scripts of prompt set ``name``, each cut to its first user message, as chats.

    >>> chats = first_user_turns("code-edit", 2)
    >>> len(chats), chats[0][0]["role"]
    (2, 'user')
    """
    chats = []
    for item in load_prompt_sets([name])[:count]:
        message = next(step for step in item["script"] if step.get("role") == "user")
        chats.append([{"role": "user", "content": message["content"]}])
    return chats


def generate_records(
    server: LlamaServer,
    scripts: Sequence[dict[str, Any]],
    *,
    model_name: str,
    max_tokens: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[TraceRecord]:
    """Run every script on ``server`` (greedy) and yield one record per generate step."""
    for script in scripts:
        messages: list[dict[str, str]] = []
        if script.get("system"):
            messages.append({"role": "system", "content": script["system"]})
        turn = 0
        for step in script["script"]:
            if "generate" not in step:
                messages.append({"role": step["role"], "content": step["content"]})
                continue
            turn += 1
            n_predict = int(step["generate"]) if max_tokens is None else min(int(step["generate"]), max_tokens)
            prompt_text = server.chat_prompt(messages)
            prompt_ids = server.tokenize(prompt_text)
            response = server.completion_response(prompt_ids, n_predict)
            output_ids = [int(token) for token in response["tokens"]]
            if not output_ids:
                continue
            text = response.get("content", "")
            messages.append({"role": "assistant", "content": text})
            timings = response.get("timings", {})
            suffix = f"/turn-{turn}" if sum("generate" in s for s in script["script"]) > 1 else ""
            yield TraceRecord(
                v=1,
                id=script["id"] + suffix,
                workload=script["workload"],
                prompt_ids=prompt_ids,
                output_ids=output_ids,
                meta={
                    "model": model_name,
                    "engine": "llama-server",
                    "turn": turn,
                    "source": script.get("source", ""),
                    "stop": response.get("stop_type", ""),
                    "plain_tokens_per_s": round(float(timings.get("predicted_per_second", 0.0)), 2),
                    "output_text": text,
                },
            )
            if progress:
                progress(f"{script['id']}{suffix}: {len(output_ids)} tokens")


def neural_acceptance(
    draft_server: LlamaServer, record: TraceRecord, k: int, *, drafter: str
) -> NeuralTrace:
    """The draft model's accepted length at every output position of ``record``.

    At position ``i`` the drafter greedily continues ``prompt + output[:i]`` by ``k`` tokens
    (the server reuses the cached prefix, so each position costs one token plus the draft);
    its accepted length is the common prefix with ``output[i:]``.
    """
    output = list(record.output_ids)
    accepted = []
    for position in range(len(output)):
        response = draft_server.completion_response(list(record.prompt_ids) + output[:position], k, cache_prompt=True)
        draft = [int(token) for token in response.get("tokens", [])]
        accepted.append(accepted_prefix(draft, output[position : position + len(draft)]))
    return NeuralTrace(k=k, accepted=accepted, drafter=drafter)


def head_acceptance(
    records: Sequence[TraceRecord],
    head_dir: str | Path,
    target_dir: str | Path,
    k: int,
    *,
    threads: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[NeuralTrace]:
    """An EAGLE head's accepted length at every output position of each record (its ``neural_head`` column).

    Per record: one teacher-forced fp32 forward of the target (Hugging Face folder ``target_dir``)
    over prompt + output for its post-norm last hidden states, then the head's chained greedy
    drafts at every output position at once (:func:`specplug.lab.eagle_head.draft_acceptance`).
    One record per forward: the positions of a record are the batch, and no padding is wasted.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from specplug.lab.eagle_head import HeadLayoutError, draft_acceptance, load_eagle_head

    target_dir = Path(target_dir)
    if not is_file(target_dir / "config.json"):
        raise InvalidOptionError(f"--target-hf {short_path(target_dir)} is not a Hugging Face model folder (no config.json)")
    target_config = json.loads((target_dir / "config.json").read_text(encoding="utf-8"))
    try:
        head = load_eagle_head(head_dir, target_config)
    except HeadLayoutError as error:
        raise InvalidOptionError(f"--neural-head: {error}") from None
    vocab = int(target_config["vocab_size"])
    for record in records:
        if len(record.prompt_ids) < 2:
            raise InvalidOptionError(f"record {record.id}: a head drafts after a prompt of at least 2 tokens, got 1")
        if max(record.prompt_ids + record.output_ids, default=0) >= vocab:
            raise InvalidOptionError(f"record {record.id}: token ids exceed the target's vocabulary of {vocab}")
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    embed, lm_head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    drafter = Path(head_dir).resolve().name
    traces = []
    with torch.no_grad():
        for record in records:
            if progress:
                progress(f"head acceptance: {record.id}")
            tokens = torch.tensor(record.prompt_ids + record.output_ids, dtype=torch.long)
            features = model.model(input_ids=tokens[None]).last_hidden_state[0]
            accepted = draft_acceptance(head, features, tokens, len(record.prompt_ids), k, embed, lm_head)
            traces.append(NeuralTrace(k=k, accepted=accepted, drafter=drafter))
    return traces
