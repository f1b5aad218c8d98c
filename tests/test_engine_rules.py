"""The engines' rules (specplug.lab.rules) do on small hand-made streams what their sources do.

Each lookup is checked against a brute-force reading of its engine's source, each rule on a
trace whose neural acceptance is set by hand: which draft it sends, how long, and whether the
neural head ran (what the replay charges).
"""

from __future__ import annotations

import random

import pytest

from specplug._errors import InvalidOptionError, UnknownMethodError
from specplug.lab.bench._metered import Metered
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.rules import RULES, build_rule, rule_options
from specplug.lab.rules._hybrid import (
    ArcticOptions, ArcticSwitch, LookupFirstChain, LookupFirstOptions, NgramEagle, NgramEagleOptions, SaConfigOptions,
    SaConfigRule, padded,
)  # fmt: skip
from specplug.lab.rules._length import (
    SglangAdaptive, SglangAdaptiveOptions, TrtllmAuto, TrtllmAutoOptions, TrtllmSchedule, TrtllmScheduleOptions,
    VllmPerBatch, VllmPerBatchOptions, per_batch_length, scheduled_length,
)  # fmt: skip
from specplug.lab.rules._lookups import (
    NgramModLookup, NgramModOptions, SuffixAutomaton, SuffixAutomatonLookup, TrtllmNgramLookup, TrtllmNgramOptions,
)  # fmt: skip
from specplug.lab.trace import NeuralTrace, TraceRecord
from specplug.cost import cost_model
from specplug._drafts import Draft
from specplug._proposer import Proposer

# ------------------------------------------------------------------------- stand-ins


class Scripted(Proposer):
    """A lookup that drafts what a script says, and counts its calls."""

    name = "scripted"

    def __init__(self, drafts: list[tuple[int, ...]], score: float | None = None, longest: int | None = None) -> None:
        super().__init__()
        self.drafts, self.score, self.calls = list(drafts), score, 0
        self.max_draft_tokens = longest

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        self.calls += 1
        tokens = self.drafts.pop(0) if self.drafts else ()
        return Draft(tokens[:max_tokens], self.name, self.score)

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


def head(output: list[int], accepted: list[int], k: int = 8) -> Metered:
    """The trace's neural head over one request ``r`` (metered: ``charged`` says it ran)."""
    record = TraceRecord(v=2, id="r", workload="w", prompt_ids=[1], output_ids=output,
                         neural_head=NeuralTrace(k=k, accepted=accepted))
    return Metered(TraceNeuralProposer([record.model_copy(update={"neural": record.neural_head})]), "neural")


OUTPUT = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]

# ------------------------------------------------------------------------- the engines' lookups


def brute_sa(tokens: list[int]) -> tuple[int, int] | None:
    """TensorRT-LLM's rule: the longest suffix that also ended earlier, at its first occurrence."""
    n = len(tokens)
    for length in range(n - 1, 0, -1):
        suffix = tokens[n - length :]
        for end in range(length - 1, n - 1):
            if tokens[end - length + 1 : end + 1] == suffix:
                return end + 1, length
    return None


@pytest.mark.parametrize("seed", range(20))
def test_the_suffix_automaton_finds_the_longest_repeated_suffix_at_its_first_occurrence(seed):
    rng = random.Random(seed)
    tokens = [rng.randrange(3) for _ in range(rng.randrange(1, 60))]
    automaton = SuffixAutomaton()
    for at, token in enumerate(tokens):
        automaton.extend(token)
        assert automaton.lookup() == brute_sa(tokens[: at + 1]), tokens[: at + 1]


def test_the_sa_lookup_drafts_after_the_first_occurrence_and_scores_the_match_length():
    lookup = SuffixAutomatonLookup()
    lookup.start("r", [5, 6, 7, 1, 5, 6, 7, 2, 5, 6])
    draft = lookup.propose("r", 3)
    assert draft.tokens == (7, 1, 5) and draft.score == 2.0  # "5 6" first ended at index 1
    lookup.extend("r", [9])
    assert lookup.propose("r", 3).tokens == ()  # "... 6 9" never occurred before


def test_ngram_mod_drafts_chained_ngrams_only_when_at_least_n_min_long():
    text = [1, 2, 3, 4, 5, 6, 7, 8]
    lookup = NgramModLookup(NgramModOptions(n_match=2, n_min=3, n_max=4))
    lookup.start("a", text + [1, 2])
    # llama.cpp's prompt is every token but the last sampled one: the prompt's n-grams are in
    # the table, the last token is the key's end: "1 2" -> 3 -> 4 -> 5 -> 6 (n_max 4)
    assert lookup.propose("a", 64).tokens == (3, 4, 5, 6)
    assert lookup.propose("a", 2).tokens == (3, 4)  # the server's cut
    for least, expected in ((3, ()), (1, (3,))):
        short = NgramModLookup(NgramModOptions(n_match=2, n_min=least, n_max=4))
        short.start("b", [8, 1, 2, 3])  # the prompt's n-grams: "8 1" -> 2, "1 2" -> 3
        short.extend("b", [1, 2])  # too few new tokens to enter the table: "2 3" is unknown
        assert short.propose("b", 64).tokens == expected


def test_ngram_mod_keeps_one_table_across_requests_and_clears_it_after_five_poor_drafts():
    lookup = NgramModLookup(NgramModOptions(n_match=1, n_min=1, n_max=3))
    lookup.start("a", [9, 0, 9, 0])
    lookup.stop("a")
    lookup.start("b", [5, 9])
    assert lookup.propose("b", 8).tokens == (0, 9, 0)  # "9" -> 0 came from request a
    lookup.extend("b", [9])  # none accepted
    for _ in range(4):
        assert lookup.table and lookup.propose("b", 8).tokens
        lookup.extend("b", [9])
    assert not lookup.table  # the fifth poor draft in a row cleared it


def test_ngram_mod_adds_new_ngrams_in_chunks_of_more_than_32_tokens():
    lookup = NgramModLookup(NgramModOptions(n_match=1, n_min=1, n_max=1))
    lookup.start("r", [100])
    lookup.extend("r", list(range(1, 30)) + [1])  # "1" was seen, but only 30 new tokens: not added yet
    assert lookup.propose("r", 4).tokens == ()
    lookup.extend("r", list(range(40, 50)) + [1])
    assert lookup.propose("r", 4).tokens == (40,)  # added now; the newest "1" -> 40 overwrote "1" -> 2


def test_trtllm_ngram_drafts_the_oldest_match_of_the_longest_pattern():
    lookup = TrtllmNgramLookup(TrtllmNgramOptions(max_draft_len=3, max_matching_ngram_size=2))
    lookup.start("r", [1, 2, 3, 4, 1, 2, 7, 8, 1, 2])
    assert lookup.propose("r", 3).tokens == (3, 4, 1)
    other = TrtllmNgramLookup(TrtllmNgramOptions(max_draft_len=3, max_matching_ngram_size=2, is_use_oldest=False))
    other.start("r", [1, 2, 3, 4, 1, 2, 7, 8, 1, 2])
    assert other.propose("r", 3).tokens == (7, 8, 1)


def test_trtllm_ngram_pool_is_shared_by_requests():
    lookup = TrtllmNgramLookup(TrtllmNgramOptions(max_draft_len=2, max_matching_ngram_size=2))
    lookup.start("a", [5, 6, 7, 8])
    lookup.propose("a", 2)
    lookup.stop("a")
    lookup.start("b", [1, 5, 6])
    assert lookup.propose("b", 2).tokens == (7, 8)


# ------------------------------------------------------------------------- hybrid rules


def test_sa_config_replaces_the_head_draft_where_the_match_reaches_the_threshold():
    neural = head(OUTPUT, [0, 2, 0, 0, 0, 0, 0, 0, 0, 0])
    sa = Metered(Scripted([(30,), (40, 41)], score=5.0), "lookup")
    rule = SaConfigRule(SaConfigOptions(max_draft_len=3, threshold=4), neural, sa)
    rule.start("r", [1])
    rule.extend("r", OUTPUT[:1])
    assert rule.propose("r", 8).tokens == padded((30,), 3) == (30, 0, 0)  # SA's tokens, padded to the head's length
    assert neural.charged  # the head ran all the same
    rule.extend("r", [11])
    low = SaConfigRule(SaConfigOptions(max_draft_len=3, threshold=6), head(OUTPUT, [0, 2] + [0] * 8),
                       Metered(Scripted([(30,)], score=5.0), "lookup"))
    low.start("r", [1])
    low.extend("r", OUTPUT[:1])
    assert low.propose("r", 8).tokens[:2] == (11, 12)  # the head's draft below the threshold


def test_the_lookup_first_chain_runs_the_model_drafter_only_without_a_lookup_draft():
    neural = head(OUTPUT, [0, 3, 3, 0, 0, 0, 0, 0, 0, 0])
    lookup = Metered(Scripted([(20, 21, 22, 23, 24), ()], longest=64), "lookup")
    chain = LookupFirstChain(LookupFirstOptions(draft_n_max=2), neural, lookup)
    chain.start("r", [1])
    chain.extend("r", OUTPUT[:1])
    assert chain.propose("r", 4).tokens == (20, 21, 22, 23) and not neural.charged  # cut to the slot's limit
    chain.extend("r", [11])
    assert chain.propose("r", 4).tokens == (12, 13) and neural.charged  # draft-mtp: --spec-draft-n-max tokens


def test_arctic_takes_the_suffix_draft_where_its_score_reaches_n_predict():
    neural = head(OUTPUT, [0, 3, 3, 0, 0, 0, 0, 0, 0, 0])
    suffix = Metered(Scripted([(30, 31, 32, 33), (40, 41)], score=3.0), "lookup")
    rule = ArcticSwitch(ArcticOptions(n_predict=3), neural, suffix)
    rule.start("r", [1])
    rule.extend("r", OUTPUT[:1])
    assert rule.propose("r", 8).tokens == (30, 31, 32, 33) and neural.charged
    rule.extend("r", [11])
    weak = ArcticSwitch(ArcticOptions(n_predict=4), head(OUTPUT, [0, 3] + [0] * 8),
                        Metered(Scripted([(30, 31)], score=3.0), "lookup"))
    weak.start("r", [1])
    weak.extend("r", OUTPUT[:1])
    assert weak.propose("r", 8).tokens == (11, 12, 13, 15)  # the speculator's 4 tokens, the last one wrong


def test_arctic_soft_cap_drafts_in_its_share_of_steps_and_the_hard_cap_in_none():
    rule = ArcticSwitch(ArcticOptions(n_predict=2, suffix=False, disable_by_batch_size=32), head(OUTPUT * 4, [2] * 40))
    rule.set_batch_size(128)
    assert rule.drafting_share() == 0.25
    rule.start("r", [1])
    drafted = 0
    for _ in range(8):
        drafted += bool(rule.propose("r", 8).tokens)
        rule.extend("r", [0])
    assert drafted == 2
    hard = ArcticSwitch(ArcticOptions(n_predict=2, suffix=False, hard_disable_by_batch_size=64), head(OUTPUT, [2] * 10))
    hard.set_batch_size(64)
    hard.start("r", [1])
    assert hard.propose("r", 8).tokens == ()


def test_ngram_eagle_prefers_the_ngram_draft_and_runs_both():
    neural = head(OUTPUT, [0, 3, 3] + [0] * 7)
    ngram = Metered(Scripted([(50, 51, 52), ()]), "lookup")
    rule = NgramEagle(NgramEagleOptions(num_speculative_tokens_ngram=2, num_speculative_tokens_eagle=3), neural, ngram)
    rule.start("r", [1])
    rule.extend("r", OUTPUT[:1])
    assert rule.propose("r", 8).tokens == (50, 51) and neural.charged and ngram.charged
    rule.extend("r", [11])
    assert rule.propose("r", 8).tokens == (12, 13, 14)


# ------------------------------------------------------------------------- length policies


def test_draft_len_schedule_takes_the_entry_of_the_largest_key_not_above_the_batch():
    assert [scheduled_length({1: 4, 4: 2, 8: 0}, 4, batch) for batch in (1, 3, 4, 7, 8, 100)] == [4, 4, 2, 2, 0, 0]
    rule = TrtllmSchedule(TrtllmScheduleOptions(max_draft_len=3, max_concurrency=16), head(OUTPUT, [9] * 10, k=10))
    rule.start("r", [1])
    rule.extend("r", OUTPUT[:1])
    rule.set_batch_size(16)
    assert len(rule.propose("r", 8).tokens) == 3
    rule.set_batch_size(17)
    assert rule.propose("r", 8).tokens == ()


def test_vllm_per_batch_ranges_fill_gaps_with_the_previous_k_and_never_exceed_k():
    ranges = [(1, 4, 4), (8, 16, 2), (64, 128, 9)]
    assert [per_batch_length(ranges, 5, batch) for batch in (1, 4, 5, 8, 20, 64, 200)] == [4, 4, 4, 2, 2, 5, 5]
    rule = VllmPerBatch(VllmPerBatchOptions(num_speculative_tokens=3, num_speculative_tokens_per_batch_size=[(1, 8, 3), (9, 128, 0)]),
                        head(OUTPUT, [9] * 10, k=10))
    rule.start("r", [1])
    rule.extend("r", OUTPUT[:1])
    rule.set_batch_size(32)
    assert rule.propose("r", 8).tokens == ()


def test_trtllm_auto_sizes_its_ngram_drafter_by_batch_and_stops_above_32():
    options = TrtllmAutoOptions()
    assert options.settings(4) == (5, 3) and options.settings(5) == (3, 5)
    rule = TrtllmAuto(options, Scripted([(7, 8), (7, 8)]))
    rule.start("r", [1])
    rule.set_batch_size(8)
    assert rule.propose("r", 8).tokens == (7, 8, 0)  # padded to max_draft_len 3
    rule.set_batch_size(33)
    assert rule.propose("r", 8).tokens == ()


def test_sglang_ema_steps_up_on_long_acceptance_and_down_on_short_per_batch_slot():
    long_run = [0] + [7] * 400
    output = list(range(100, 500))
    rule = SglangAdaptive(SglangAdaptiveOptions(), head(output, long_run[: len(output)]), cost_model("llama-3.1-8b-h100"))
    rule.set_batch_size(1)
    rule.start("r", [1])
    rule.extend("r", output[:1])
    position, lengths = 1, []
    while position < 200:
        draft = rule.propose("r", 8)
        lengths.append(len(draft.tokens))
        step = output[position : position + len(draft.tokens) + 1]
        rule.extend("r", step)
        position += len(step)
    assert lengths[0] == 3 and lengths[-1] == 7  # the middle of {0, 1, 3, 5, 7} at first, then up to the largest of slot 1
    rule.set_batch_size(64)
    assert rule.propose("r", 8).tokens == ()  # slot 64's only candidate is 0 steps


# ------------------------------------------------------------------------- the registry


def test_every_rule_builds_from_its_defaults_and_every_grid_setting_is_valid():
    cost = cost_model("llama-3.1-8b-h100")
    for name, spec in RULES.items():
        for setting in ({}, *spec.grid):
            options = rule_options(name, setting)
            rule, leaves = build_rule(name, options, head(OUTPUT, [1] * 10), cost, 8, lambda part, kind: Metered(part, kind))
            assert leaves and rule.takes_batch_size in (True, False), name


def test_rule_mistakes_name_the_valid_choices():
    with pytest.raises(UnknownMethodError, match="rule:trtllm-sa"):
        rule_options("nope", {})
    with pytest.raises(InvalidOptionError, match="rule:trtllm-sa: threshold = 0.*knobs: max_draft_len, threshold"):
        rule_options("trtllm-sa", {"threshold": 0})
