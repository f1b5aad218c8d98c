"""The composites' estimates learnt from the traffic: the weight of a request's own neural counts
(empirical Bayes over finished requests) and the calibration of the lookup-only choice."""

from __future__ import annotations

import numpy as np
import pytest

from specplug import create
from specplug.cost import cost_model
from specplug.lab.bench._metered import Metered
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.bench._replay import replay
from specplug.lab.trace import NeuralTrace, TraceRecord
from specplug.proposers.composite._choice import _calibration_ratio
from specplug.proposers.composite.hybrid import CALIBRATED

OUTPUT = list(range(1000, 1120))


def _records(accept: list[int]) -> list[TraceRecord]:
    """One request per entry, its head accepting that many tokens at every position (text of its
    own, so that no lookup drafts it from an earlier request)."""
    return [
        TraceRecord(v=1, id=f"r{index}", workload="w", prompt_ids=[1, 2, 3],
                    output_ids=[token + 1000 * index for token in OUTPUT],
                    neural=NeuralTrace(k=8, accepted=[rate] * len(OUTPUT)))
        for index, rate in enumerate(accept)
    ]


def _replayed_hybrid(records: list[TraceRecord], **options):
    neural = Metered(TraceNeuralProposer(records), "neural")
    lookup = Metered(create("suffix"))
    hybrid = create("hybrid", neural=neural, lookup=lookup, cost=cost_model("llama-3.1-8b-h100"), **options)
    replay(hybrid, [neural, lookup], records, 8)
    return hybrid


def test_a_request_is_trusted_less_where_requests_accept_alike():
    alike = _replayed_hybrid(_records([2] * 12))
    apart = _replayed_hybrid(_records([0, 8] * 6))
    assert alike._params[9] > 100  # requests that accept alike: the pool is worth far more than a few drafts
    assert apart._params[9] < 2  # half never, half always: a request's own counts tell it
    few = _replayed_hybrid(_records([0, 8] * 3))
    assert few._params[9] == few.prior_weight  # until 8 requests have finished, prior_weight


def test_a_fixed_neural_request_weight_is_kept():
    fixed = _replayed_hybrid(_records([2] * 12), neural_request_weight=7.0)
    assert fixed._params[9] == 7.0


def test_the_calibration_counts_lookup_drafts_taken_alone_and_prices_them_by_what_they_realised():
    # a prompt the output repeats in part: the suffix drafts, some of its drafts are taken alone
    records = [
        TraceRecord(v=1, id=f"r{index}", workload="w", prompt_ids=OUTPUT[:60] + [7] * 5, output_ids=OUTPUT,
                    neural=NeuralTrace(k=8, accepted=[1] * len(OUTPUT)))
        for index in range(4)
    ]
    hybrid = _replayed_hybrid(records)
    realised = hybrid._pooled_accepted[CALIBRATED].sum()
    expected = hybrid._pooled_drafted[CALIBRATED + 1].sum()
    assert expected > 0 and realised > 0
    weight = hybrid.choosing.calibration_weight
    band = int(np.argmax(hybrid._pooled_drafted[CALIBRATED + 1].sum(axis=1)))
    band_realised = hybrid._pooled_accepted[CALIBRATED, band].sum()
    band_expected = hybrid._pooled_drafted[CALIBRATED + 1, band].sum()
    overall = (realised + weight) / (expected + weight)
    ratio = _calibration_ratio(hybrid._pooled_drafted, hybrid._pooled_accepted, CALIBRATED, band, weight)
    assert ratio == pytest.approx((band_realised + weight * overall) / (band_expected + weight))
    off = _replayed_hybrid(records, calibration_weight=0.0)
    assert off._tracks == 3  # no calibration tracks: the lookup's estimate as it is
