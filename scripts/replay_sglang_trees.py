#!/usr/bin/env python3
"""Replay SGLang's greedy tree verify over a model's own greedy output: chains against trees.

    .venv-sglang/bin/python scripts/replay_sglang_trees.py --model .models/smollm2-135m-fp32 \\
        --prompts 3 --tokens 64 --width 8

Greedy speculation gives the target's own output whatever is drafted, so what a verify step
accepts follows from that output alone: the longest branch of the step's draft tree that
agrees with it. This script generates each code-edit prompt's greedy output once (transformers,
on the CPU), then replays it through a specplug method the way SpecplugWorker drives it inside
SGLang (the request's history so far, one tree of at most ``width - 1`` tokens and ``--branches``
branches per step, acceptance along the best branch, then the accepted tokens and the target's
own), and prints verify steps, tokens per step and accepted draft tokens per configuration. No
engine is started: the figures are acceptance only (the near-ties where an engine's greedy
output differs from transformers' are not modelled), the engine benchmark is
scripts/gpu_check_sglang.py.
"""

from __future__ import annotations

import argparse
import sys

import specplug
from specplug import accepted_prefix


def _greedy_outputs(model: str, count: int, tokens: int) -> list[tuple[list[int], list[int]]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specplug.lab.bench._tracegen import first_user_turns

    tokenizer = AutoTokenizer.from_pretrained(model)
    network = AutoModelForCausalLM.from_pretrained(model, torch_dtype=torch.float32)
    pairs = []
    for chat in first_user_turns("code-edit", count):
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        prompt = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            out = network.generate(prompt, max_new_tokens=tokens, do_sample=False)
        pairs.append((prompt[0].tolist(), out[0, prompt.shape[1] :].tolist()))
    return pairs


def replay(method: str, pairs: list[tuple[list[int], list[int]]], width: int, branches: int) -> dict:
    """Verify steps and accepted draft tokens of ``method`` over every (prompt, greedy output)."""
    proposer = specplug.create(method)
    steps = accepted_total = generated = trees = 0
    for number, (prompt, output) in enumerate(pairs):
        proposer.start(number, prompt)
        position = 0
        while position < len(output):
            draft = proposer.propose_alternatives(number, width - 1, branches)
            trees += bool(draft.alternatives)
            truth = output[position:]
            accepted = max((accepted_prefix(branch, truth) for branch in draft.branches()), default=0)
            accepted = min(accepted, len(truth) - 1)  # the last token is the target's own
            proposer.extend(number, truth[: accepted + 1])
            position += accepted + 1
            steps += 1
            accepted_total += accepted
        proposer.stop(number)
        generated += len(output)
    return {"steps": steps, "accepted": accepted_total, "generated": generated, "trees": trees}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--width", type=int, default=8, help="--speculative-num-draft-tokens")
    parser.add_argument("--branches", type=int, default=10, help="--speculative-ngram-max-bfs-breadth of the trees")
    args = parser.parse_args()
    pairs = _greedy_outputs(args.model, args.prompts, args.tokens)
    print(f"{'configuration':<26}{'verify steps':>13}{'tok/step':>10}{'accepted':>10}{'steps with a tree':>19}")
    for label, method, branches in [("SPECPLUG_SUFFIX chain", "suffix", 1), ("SPECPLUG_SUFFIX tree", "suffix", args.branches),
                                    ("SPECPLUG_NGRAM", "ngram", 1)]:
        result = replay(method, pairs, args.width, branches)
        print(f"{label:<26}{result['steps']:>13}{result['generated'] / result['steps']:>10.2f}{result['accepted']:>10}"
              f"{result['trees']:>19}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
