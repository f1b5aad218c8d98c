"""specplug.lab.eagle_head and ``specplug trace --neural-head``: an EAGLE head's acceptance per position.

The parallel forward (every position's draft chain at once, as training uses it) is checked against
a slow drafter written here from vLLM's description: one position at a time, a KV cache of the
verified context plus the draft's own earlier steps, each step fed its own greedy token.
"""

from __future__ import annotations

import json
import math
import random

import pytest
import torch  # in .venv from scripts/setup_peers.sh; a missing torch is a failure, never a skip

from specplug.cli import main
from specplug.lab.eagle_head import EagleHead, draft_acceptance
from specplug.lab.trace import TraceRecord, read_traces, write_traces

CONFIG = {"hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 4, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "vocab_size": 12}


def slow_draft(head, embed, lm_head, features, tokens, last_row: int, k: int) -> list[int]:
    """k greedy tokens drafted after tokens[:last_row + 2], one step at a time with a KV cache."""
    p, d = head.params, head.head_dim
    group = head.heads // head.kv_heads

    def rope(x, position):
        angles = position * head.inv_freq
        cos, sin = torch.cat([angles.cos()] * 2), torch.cat([angles.sin()] * 2)
        return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin

    def project(x, position):
        q = rope((p["layers.0.self_attn.q_proj.weight"] @ x).view(head.heads, d), position)
        key = rope((p["layers.0.self_attn.k_proj.weight"] @ x).view(head.kv_heads, d), position)
        return q, key, (p["layers.0.self_attn.v_proj.weight"] @ x).view(head.kv_heads, d)

    def layer(x, q, keys, values):
        keys_, values_ = (torch.stack(t).repeat_interleave(group, 1) for t in (keys, values))
        weights = (torch.einsum("hd,nhd->hn", q, keys_) / math.sqrt(d)).softmax(-1)
        residual = x + p["layers.0.self_attn.o_proj.weight"] @ torch.einsum("hn,nhd->hd", weights, values_).reshape(-1)
        normed = residual * torch.rsqrt(residual.pow(2).mean() + head.eps) * p["layers.0.post_attention_layernorm.weight"]
        gate = torch.nn.functional.silu(p["layers.0.mlp.gate_proj.weight"] @ normed)
        return p["layers.0.mlp.down_proj.weight"] @ (gate * (p["layers.0.mlp.up_proj.weight"] @ normed)) + residual

    keys, values = [], []
    for row in range(last_row + 1):  # the verified context's cache: row r reads token r+1 and feature r
        x = p["fc.weight"] @ torch.cat([embed[tokens[row + 1]], features[row]])
        q, key, value = project(x, row)
        keys.append(key)
        values.append(value)
    hidden = layer(x, q, keys, values)
    drafts = [int((lm_head @ hidden).argmax())]
    for step in range(1, k):
        x = p["fc.weight"] @ torch.cat([embed[drafts[-1]], hidden])
        q, key, value = project(x, last_row + step)
        keys.append(key)
        values.append(value)
        hidden = layer(x, q, keys, values)
        drafts.append(int((lm_head @ hidden).argmax()))
    return drafts


def chained(draft: list[int], truth: list[int]) -> int:
    count = 0
    for proposed, actual in zip(draft, truth):
        if proposed != actual:
            break
        count += 1
    return count


def test_parallel_acceptance_equals_a_slow_one_position_at_a_time_drafter():
    generator = torch.Generator().manual_seed(3)
    head = EagleHead(CONFIG, generator)
    head.params = {name: value.detach() for name, value in head.params.items()}
    embed = torch.randn(CONFIG["vocab_size"], 16, generator=generator)
    lm_head = torch.randn(CONFIG["vocab_size"], 16, generator=generator)
    prompt_len, output_len, k = 5, 24, 4
    features = torch.randn(prompt_len + output_len, 16, generator=generator)
    # outputs that often follow the head's own drafts, so accepted lengths vary (not all zero)
    rng = random.Random(0)
    tokens = [rng.randrange(CONFIG["vocab_size"]) for _ in range(prompt_len)]
    while len(tokens) < prompt_len + output_len:
        follow = slow_draft(head, embed, lm_head, features, torch.tensor(tokens), len(tokens) - 2, 1)[0]
        tokens.append(follow if rng.random() < 0.7 else rng.randrange(CONFIG["vocab_size"]))
    tokens = torch.tensor(tokens)
    fast = draft_acceptance(head, features, tokens, prompt_len, k, embed, lm_head)
    output = tokens[prompt_len:].tolist()
    slow = [chained(slow_draft(head, embed, lm_head, features, tokens, prompt_len + i - 2, k), output[i:])
            for i in range(output_len)]
    assert fast == slow
    assert len(fast) == output_len and max(fast) >= 2 and min(fast) == 0
    assert all(0 <= count <= min(k, output_len - i) for i, count in enumerate(fast))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random 1-layer Llama target (Hugging Face folder) and a random head for it, made once."""
    from safetensors.torch import save_file

    tmp_path, vocab = tmp_path_factory.mktemp("tiny"), 64
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=4, max_position_embeddings=256,
                         tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(tmp_path / "target")
    target = json.loads((tmp_path / "target" / "config.json").read_text())
    head = EagleHead(target, torch.Generator().manual_seed(1))
    (tmp_path / "head").mkdir()
    save_file({name: value.detach().contiguous() for name, value in head.params.items()},
              str(tmp_path / "head" / "model.safetensors"))
    head_config = {**target, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}
    (tmp_path / "head" / "config.json").write_text(json.dumps(head_config))
    return tmp_path / "target", tmp_path / "head"


def _run(args: list[str]) -> int:
    """``specplug ARGS`` in this process: its exit code."""
    try:
        main(args)
    except SystemExit as done:
        return done.code or 0
    return 0


def _trace(tmp_path, vocab: int = 64):
    """Two version-1 records with a draft model's neural column, which a head refill must keep."""
    rng = random.Random(2)
    records = [TraceRecord(v=1, id=f"r{n}", workload="w", prompt_ids=[rng.randrange(vocab) for _ in range(6 + n)],
                           output_ids=[rng.randrange(vocab) for _ in range(9 + n)],
                           neural={"k": 2, "accepted": [n % 3] * (9 + n), "drafter": "draft model"}) for n in range(2)]
    write_traces(tmp_path / "in.jsonl", records)
    return tmp_path / "in.jsonl"


def test_refill_neural_writes_one_count_per_output_token(tmp_path, capsys, tiny):
    target, head = tiny
    source = _trace(tmp_path)
    code = _run(["trace", "--refill-neural", str(source), "--out", str(tmp_path / "out.jsonl"),
                 "--neural-head", str(head), "--target-hf", str(target), "--neural-k", "3"])
    assert code == 0, capsys.readouterr().err
    before, after = read_traces(source), read_traces(tmp_path / "out.jsonl")
    assert [r.output_ids for r in after] == [r.output_ids for r in before]
    # the head fills neural_head (format version 2); the draft model's neural column is kept as it was
    assert [r.neural for r in after] == [r.neural for r in before]
    assert all(json.loads(line)["v"] == 2 for line in (tmp_path / "out.jsonl").read_text().splitlines())
    for record in after:
        column = record.neural_head
        assert column.k == 3 and column.drafter == "head"
        assert len(column.accepted) == len(record.output_ids)
        assert all(0 <= count <= min(3, len(record.output_ids) - i) for i, count in enumerate(column.accepted))
    # the column equals the head's parallel drafts over the target's own features
    from transformers import AutoModelForCausalLM

    from specplug.lab.eagle_head import load_eagle_head

    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32).eval()
    config = json.loads((target / "config.json").read_text())
    with torch.no_grad():
        for record in after:
            tokens = torch.tensor(record.prompt_ids + record.output_ids)
            features = model.model(input_ids=tokens[None]).last_hidden_state[0]
            expected = draft_acceptance(load_eagle_head(head, config), features, tokens, len(record.prompt_ids), 3,
                                        model.get_input_embeddings().weight, model.get_output_embeddings().weight)
            assert list(record.neural_head.accepted) == expected


@pytest.mark.parametrize(("breakage", "message"), [
    ("missing", "does not exist"),
    ("architecture", "architectures must list EagleLlamaForCausalLM"),
    ("vocab", "vocab_size 99 does not match the target's 64"),
    ("weights", "missing fc.weight"),
])
def test_a_bad_head_is_one_clear_line(tmp_path, capsys, tiny, breakage, message):
    import shutil

    from safetensors.torch import save_file

    target, head = tiny[0], shutil.copytree(tiny[1], tmp_path / "head")
    config = json.loads((head / "config.json").read_text())
    if breakage == "missing":
        head = tmp_path / "nowhere"
    elif breakage == "architecture":
        (head / "config.json").write_text(json.dumps({**config, "architectures": ["LlamaForCausalLM"]}))
    elif breakage == "vocab":
        (head / "config.json").write_text(json.dumps({**config, "vocab_size": 99}))
    else:
        save_file({"other": torch.zeros(2)}, str(head / "model.safetensors"))
    source = _trace(tmp_path)
    capsys.readouterr()
    code = _run(["trace", "--refill-neural", str(source), "--out", str(tmp_path / "out.jsonl"),
                 "--neural-head", str(head), "--target-hf", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.jsonl").exists()


# --- scripts/train_eagle_head.py's data functions (the training run itself is tests/vllm/engine/test_train_eagle_head.py)

def _training_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "train_eagle_head.py"
    spec = importlib.util.spec_from_file_location("train_eagle_head", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_validation_split_takes_whole_samples_the_same_way_each_time():
    script = _training_script()
    answered = [{"id": n} for n in range(20)]
    train, held = script.split_validation(answered, 0.15, seed=0)
    assert len(held) == 3 and len(train) == 17
    assert sorted(s["id"] for s in train + held) == list(range(20))
    assert script.split_validation(answered, 0.15, seed=0) == (train, held)
    assert script.split_validation(answered, 0.15, seed=1)[1] != held
    assert script.split_validation(answered, 0.0, seed=0) == (answered, [])


def test_a_data_share_is_a_seeded_subset_nested_in_every_larger_share():
    script = _training_script()
    samples = [{"id": n} for n in range(40)]
    quarter, half = script.take_share(samples, 0.25, seed=0), script.take_share(samples, 0.5, seed=0)
    assert len(quarter) == 10 and len(half) == 20
    assert {s["id"] for s in quarter} < {s["id"] for s in half}  # a learning curve's sets grow, never swap
    assert [s["id"] for s in half] == sorted(s["id"] for s in half)  # the cache's order is kept
    assert script.take_share(samples, 0.25, seed=0) == quarter and script.take_share(samples, 0.25, seed=1) != quarter
    assert script.take_share(samples, 1.0, seed=0) == samples and len(script.take_share(samples, 0.001, seed=0)) == 1


def test_passages_take_turns_between_kinds_and_come_from_python_itself():
    script = _training_script()
    units, _ = script.stdlib_units(200, seed=0)
    pairs = script.build_passages(9, 900, ["topics", "docs", "code"], units, seed=0)
    assert len(pairs) == 9
    assert all(answer.startswith("```python\n") for _, answer in pairs[2::3])
    assert not any(answer.startswith("```") for _, answer in pairs[0::3] + pairs[1::3])
    assert all(0 < len(answer) <= 900 + len("```python\n\n```") for _, answer in pairs)


def test_a_data_cache_made_with_other_options_is_refused_in_one_line(tmp_path):
    script = _training_script()
    options = {"format": script.DATA_FORMAT, "seed": 0, "prompts": 8}
    torch.save({"options": options, "eval": [], "answered": [], "forced": [], "source": {}, "seconds": 1.0},
               tmp_path / "data.pt")
    assert script.load_data_cache(tmp_path / "data.pt", options)["seconds"] == 1.0
    with pytest.raises(ValueError, match=r"other data options \(prompts 8 there, 9 here\)"):
        script.load_data_cache(tmp_path / "data.pt", options | {"prompts": 9})
    (tmp_path / "bad.pt").write_bytes(b"not a cache")
    with pytest.raises(ValueError, match="not a readable data cache"):
        script.load_data_cache(tmp_path / "bad.pt", options)
