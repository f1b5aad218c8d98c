"""A request's ``specplug_method`` in SGLang (no engine started): checked against the server's own
names where SGLang checks a request, and honoured per request by the ``SPECPLUG_*`` worker."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.sglang.test_worker import WIDTH, Batch, _worker

REPEAT = [5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 7]  # both suffix and ngram continue it


def _req(rid: str, tokens: list[int], params: dict | None) -> SimpleNamespace:
    return SimpleNamespace(rid=rid, origin_input_ids_unpadded=tokens[:-1], output_ids=tokens[-1:],
                           sampling_params=SimpleNamespace(custom_params=params))


def test_the_servers_check_notes_what_its_requests_may_name(sglang, monkeypatch):
    from specplug_adapters.sglang import _requests
    from specplug.engine import _request_control as request_control_module, noted_served
    from specplug_adapters.sglang._config import check_options

    monkeypatch.setattr(request_control_module, "_served", None)
    _requests.check_request({"specplug_method": "anything"})  # no server checked here: the worker checks it
    check_options("SPECPLUG_ADAPTIVE", {}, WIDTH)
    assert noted_served() == ("adaptive", "suffix", "ngram")
    _requests.check_request({"specplug_method": "ngram"})
    with pytest.raises(ValueError, match="specplug_method = 'neural' is not valid; this server honours adaptive, suffix, ngram"):
        _requests.check_request({"specplug_method": "neural"})
    check_options("SPECPLUG_SUFFIX", {}, WIDTH)
    with pytest.raises(ValueError, match="specplug_method = 'ngram' is not valid; this server honours suffix$"):
        _requests.check_request({"specplug_method": "ngram"})


def test_the_worker_drafts_each_request_only_with_the_part_it_names(sglang):
    worker = _worker("SPECPLUG_ADAPTIVE")
    assert worker.drafting.request_methods == ("adaptive", "suffix", "ngram")
    reqs = [_req("ngram", REPEAT, {"specplug_method": "ngram"}), _req("suffix", REPEAT, {"specplug_method": "suffix"}),
            _req("free", REPEAT, {"specplug_method": "adaptive"})]  # the server's own name: as it chooses
    sources: dict[str, set[str]] = {req.rid: set() for req in reqs}
    original = worker.drafting.step_requests

    def recording(rows, **kwargs):
        drafts = original(rows, **kwargs)
        for row, draft in zip(rows, drafts):
            if row is not None and draft.tokens:
                sources[row[0]].add(draft.source)
        return drafts

    worker.drafting.step_requests = recording
    for step in range(4):
        ids, _ = worker._prepare_draft_tokens(Batch(reqs))
        assert (ids.reshape(len(reqs), WIDTH)[:, 1] != 0).all()  # every request drafted
        for req in reqs:
            req.output_ids.append(REPEAT[(len(req.output_ids) + len(req.origin_input_ids_unpadded)) % 5])
    assert sources == {"ngram": {"ngram"}, "suffix": {"suffix"}, "free": {"suffix"}}
    counters = worker.drafting.counters
    assert counters["request_control.method"] == 2 * 4 and counters.get("faults", 0) == 0
