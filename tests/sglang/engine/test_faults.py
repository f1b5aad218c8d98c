"""A method that raises at every third draft, inside SGLang's scheduler: those drafts are lost,
nothing else (output identical to plain decoding, the other drafts still accepted). The method
comes from a specplug plugin installed through a real entry point, so its SGLang name
SPECPLUG_FLAKY also shows that plugin methods get a name in every process."""

from __future__ import annotations

import os
from pathlib import Path

from specplug import _plugins
from tests.sglang.engine.conftest import generate, start_engine, stop_engine


def test_a_drafter_raising_every_third_draft_costs_only_those_drafts(sglang, model_dir, plain, tmp_path, monkeypatch):
    source = (Path(__file__).parent / "flaky_plugin.py").read_text()
    (tmp_path / "specplug_flaky_plugin.py").write_text(source)
    info = tmp_path / "specplug_flaky-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specplug-flaky\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[specplug]\nflaky = specplug_flaky_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    _plugins.reset()
    from specplug_adapters.sglang import register, registered

    register()  # the launcher's registration, now with the plugin's method
    assert "SPECPLUG_FLAKY" in registered()
    engine = start_engine(model_dir, speculative_algorithm="SPECPLUG_FLAKY", speculative_num_draft_tokens=6)
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
        _plugins.reset()
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    assert sum(out["meta_info"]["spec_num_correct_drafts"] for out in outputs) > 0
