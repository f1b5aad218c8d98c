"""scripts/bench_vllm.py: every round measures its own prompts, so no method meets a prompt it has answered."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_vllm", Path(__file__).parent.parent / "scripts" / "bench_vllm.py")
bench_vllm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_vllm)


@pytest.mark.parametrize("workload, count, rounds", [("mixed", 6, 2), ("code-edit", 4, 2), ("chat", 3, 4)])
def test_rounds_never_repeat_a_prompt_nor_the_warm_up(workload, count, rounds):
    chosen = bench_vllm.load_rounds(count, rounds, workload)
    assert [len(pairs) for pairs in chosen] == [count] * rounds
    texts = [chat[0]["content"] for pairs in chosen for _, chat in pairs]
    assert len(set(texts)) == len(texts)
    assert bench_vllm.warm_up_chat()[0]["content"] not in texts
    # every round has the same mix of workloads, so per-round ratios compare like with like
    assert len({tuple(name for name, _ in pairs) for pairs in chosen}) == 1


def test_too_few_prompts_is_a_clear_error_not_a_repeat(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_vllm.main(["--workload", "agentic", "--prompts", "3", "--repeats", "2", "--methods", "none"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--prompts 3 x --repeats 2 needs 6" in err and "4 (agentic)" in err
