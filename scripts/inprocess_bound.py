"""How far can any lookup drafter get over ``LlamaPromptLookupDecoding`` inside llama-cpp-python?

Replays the held-out code-edit prompts' greedy outputs against a verification-cost table
measured here (CPU seconds of ``Llama.eval`` over 1..33 tokens, logits for every position,
one thread), and reports modeled tokens per CPU-second for:

- llama-cpp-python's own ``LlamaPromptLookupDecoding`` (the issue's baseline) and specplug's
  ``suffix`` at 16 and 32 tokens, drafting as they would in the engine;
- two oracles that know the output: ``suffix``'s own drafts cut at the best length (the most
  any draft-length policy over suffix could do), and a *perfect lookup* that drafts the
  longest prefix of the true continuation found anywhere in the text so far, cut at the best
  length (the most any lookup drafter could do).

Per-token sampling and Python overheads are left out, which flatters every speculative
setting alike. Usage::

    .venv/bin/python scripts/inprocess_bound.py [--model .models/gemma-3-270m-q4_k_m.gguf]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

import specplug
from lookup_bound import Seen  # scripts/lookup_bound.py: every seen span, the longest known prefix
from specplug.lab.llamacpp._prompts import load_prompts, shipped_prompts

SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 33)


def eval_costs(llm: Llama, context: Sequence[int], repeats: int = 5) -> Callable[[int], float]:
    """Median CPU seconds of evaluating b tokens after ``context``, interpolated over b."""
    medians = []
    for size in SIZES:
        times = []
        for _ in range(repeats):
            llm.reset()
            llm.eval(list(context[:-size]))
            start = time.process_time()
            llm.eval(list(context[-size:]))
            times.append(time.process_time() - start)
        medians.append(statistics.median(times))
    return lambda batch: float(np.interp(batch, SIZES, medians))


def greedy_outputs(llm: Llama, prompts: list[str], n_predict: int) -> list[tuple[list[int], list[int]]]:
    runs = []
    for text in prompts:
        prompt = llm.tokenize(text.encode())
        output: list[int] = []
        for token in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
            if token == llm.token_eos() or len(output) == n_predict:
                break
            output.append(int(token))
        runs.append((prompt, output))
    return runs


def accepted(draft: Sequence[int], truth: Sequence[int]) -> int:
    count = 0
    while count < min(len(draft), len(truth)) and draft[count] == truth[count]:
        count += 1
    return count


def replay(runs, cost, drafter_factory, *, oracle: str | None = None, limit: int = 32) -> float:
    """Modeled tokens per CPU-second. ``oracle``: None (draft as is), "cut" (cut at the best
    length knowing the outcome), "perfect" (perfect lookup, cut at the best length)."""
    seconds = tokens = 0.0
    for prompt, output in runs:
        drafter = drafter_factory()
        seen = Seen(limit)  # every span of the text so far, for the perfect lookup
        seen.add(prompt)
        position = known = 0
        while position < len(output) - 1:
            history, truth = prompt + output[: position + 1], output[position + 1 :]
            if oracle == "perfect":
                seen.add(output[known : position + 1])
                known = position + 1
                draft_len = good = seen.longest(truth[:limit])
            else:
                draft = drafter(history)
                draft_len, good = len(draft), accepted(draft, truth)
            if oracle is not None:  # knowing the outcome, draft only the best share of what holds
                draft_len = good = max(range(good + 1), key=lambda k: (k + 1) / cost(k + 1))
            seconds += cost(1 + draft_len)
            position += good + 1
            tokens += good + 1
    return tokens / seconds


def pld_factory():
    inner = LlamaPromptLookupDecoding()
    return lambda history: list(inner(np.array(history, dtype=np.intc)))


def suffix_factory(max_tokens: int):
    def make():
        proposer = specplug.create("suffix", max_tokens=max_tokens, global_cache=False)
        seen = [0]

        def draft(history: list[int]) -> list[int]:
            if not seen[0]:
                proposer.start("r", np.array(history))
            else:
                proposer.extend("r", np.array(history[seen[0] :]))
            seen[0] = len(history)
            return list(proposer.propose("r", max_tokens).tokens)

        return draft

    return make


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=".models/gemma-3-270m-q4_k_m.gguf")
    parser.add_argument("--n-predict", type=int, default=128)
    args = parser.parse_args()
    llm = Llama(args.model, n_ctx=1024, n_threads=1, n_threads_batch=1, logits_all=True, verbose=False)
    prompts = [prompt.text or "" for prompt in load_prompts(shipped_prompts("code_edit"))]
    runs = greedy_outputs(llm, prompts, args.n_predict)
    cost = eval_costs(llm, runs[0][0] + runs[0][1][:40])
    print("eval CPU ms by tokens:", ", ".join(f"{size}: {cost(size) * 1e3:.0f}" for size in SIZES))
    plain = replay(runs, cost, lambda: lambda history: [])
    baseline = replay(runs, cost, pld_factory)
    rows = [("plain", plain), ("LlamaPromptLookupDecoding", baseline)]
    for limit in (16, 32):
        rows.append((f"suffix max {limit}", replay(runs, cost, suffix_factory(limit), limit=limit)))
        rows.append((f"oracle cut of suffix max {limit}", replay(runs, cost, suffix_factory(limit), oracle="cut", limit=limit)))
        rows.append((f"perfect lookup max {limit}, oracle cut", replay(runs, cost, pld_factory, oracle="perfect", limit=limit)))
    print(f"{'drafter':40s} {'tok/CPU-s':>9s} {'x plain':>8s} {'x prompt lookup':>16s}")
    for name, rate in rows:
        print(f"{name:40s} {rate:9.1f} {rate / plain:8.2f} {rate / baseline:16.2f}")


if __name__ == "__main__":
    main()
