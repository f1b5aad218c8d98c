"""The speculative-config translation and the settings a drafter reads (plain dicts, no engine)."""

from __future__ import annotations

import pytest

import specplug
from specplug import InvalidOptionError, UnknownMethodError
from specplug_adapters.vllm import DRAFTER_PATH, read_settings, specplug_method, translate, vllm_method_names
from specplug_adapters.vllm._config import create_method

FIELDS = ["method", "model", "num_speculative_tokens", "disable_padded_drafter_batch", "prompt_lookup_max"]


def test_every_specplug_method_has_a_vllm_name():
    assert vllm_method_names() == sorted(f"specplug.{name}" for name in specplug.methods())
    assert {"specplug.suffix", "specplug.ngram", "specplug.adaptive", "specplug.hybrid"} <= set(vllm_method_names())


@pytest.mark.parametrize("name", ["suffix", "ngram", "adaptive"])
def test_lookup_methods_become_custom_class(name):
    spec, extra = translate({"method": f"specplug.{name}", "num_speculative_tokens": 5}, None, FIELDS)
    assert spec == {"method": "custom_class", "model": DRAFTER_PATH, "num_speculative_tokens": 5}
    assert extra == {"specplug": {"method": name}}


def test_options_come_from_three_places_and_the_speculative_config_wins():
    spec, extra = translate(
        {"method": "specplug.suffix", "max-depth": 20, "specplug": {"min_match": 3, "max_tokens": 9}},
        {"specplug": {"max_tokens": 4, "min_token_prob": 0.2}, "other": 1},
        FIELDS,
    )
    assert extra["specplug"] == {"method": "suffix", "max_tokens": 9, "min_token_prob": 0.2, "min_match": 3,
                                 "max_depth": 20}
    assert extra["other"] == 1
    assert "specplug" not in spec and "max_depth" not in spec


def test_other_methods_pass_unchanged():
    spec, extra = translate({"method": "ngram", "prompt_lookup_max": 4}, {"x": 1}, FIELDS)
    assert spec == {"method": "ngram", "prompt_lookup_max": 4} and extra == {"x": 1}


def test_unknown_option_names_it_and_lists_the_valid_ones():
    with pytest.raises(InvalidOptionError) as raised:
        translate({"method": "specplug.ngram", "max_m": 3}, None, FIELDS)
    message = str(raised.value)
    assert "unknown option 'max_m'" in message and "max_n" in message and "min_n" in message


def test_bad_option_value_is_reported_with_the_value():
    with pytest.raises(InvalidOptionError, match="min_n"):
        translate({"method": "specplug.ngram", "min_n": 0}, None, FIELDS)


def test_unknown_method_lists_the_vllm_names():
    with pytest.raises(UnknownMethodError) as raised:
        translate({"method": "specplug.nope"}, None, FIELDS)
    assert "specplug.nope" in str(raised.value) and "specplug.suffix" in str(raised.value)


def test_a_lookup_method_refuses_a_model():
    with pytest.raises(InvalidOptionError, match="takes no model"):
        translate({"method": "specplug.suffix", "model": "some/draft"}, None, FIELDS)


def test_methods_given_twice_must_agree():
    with pytest.raises(InvalidOptionError, match="disagree"):
        translate({"method": "specplug.suffix"}, {"specplug": {"method": "ngram"}}, FIELDS)
    _, extra = translate({"method": "specplug.suffix"}, {"specplug": {"method": "specplug.suffix"}}, FIELDS)
    assert extra["specplug"]["method"] == "suffix"


def test_section_must_be_a_dict():
    with pytest.raises(InvalidOptionError, match="additional_config"):
        translate({"method": "specplug.suffix"}, {"specplug": "suffix"}, FIELDS)
    with pytest.raises(InvalidOptionError, match="speculative_config"):
        translate({"method": "specplug.suffix", "specplug": [1]}, None, FIELDS)


def test_hybrid_without_model_runs_on_mtp_after_bookkeeping():
    spec, extra = translate({"method": "specplug.hybrid", "num_speculative_tokens": 4, "lookup": "ngram"}, None, FIELDS)
    assert spec == {"method": "mtp", "num_speculative_tokens": 4, "disable_padded_drafter_batch": True}
    assert extra["specplug"] == {"method": "hybrid", "lookup": "ngram", "neural": "mtp"}


def test_hybrid_with_a_model_lets_vllm_detect_the_drafter():
    spec, extra = translate({"method": "specplug.hybrid", "model": "/m/draft", "num_speculative_tokens": 3}, None,
                            FIELDS)
    assert spec == {"model": "/m/draft", "num_speculative_tokens": 3}
    assert extra["specplug"]["neural"] is None


def test_hybrid_neural_is_checked_and_an_explicit_padded_setting_is_kept():
    spec, _ = translate({"method": "specplug.hybrid", "neural": "eagle3", "model": "/m/eagle3",
                         "disable_padded_drafter_batch": False}, None, FIELDS)
    assert spec["method"] == "eagle3" and spec["disable_padded_drafter_batch"] is False
    with pytest.raises(InvalidOptionError, match="neural = 'medusa'"):
        translate({"method": "specplug.hybrid", "neural": "medusa"}, None, FIELDS)


def test_adaptive_runs_over_the_models_drafter_only_when_one_is_named():
    spec, extra = translate({"method": "specplug.adaptive", "num_speculative_tokens": 4}, None, FIELDS)
    assert spec["method"] == "custom_class" and "neural" not in extra["specplug"]
    spec, extra = translate({"method": "specplug.adaptive", "model": "/m/eagle", "num_speculative_tokens": 3,
                             "candidates": ["suffix"]}, None, FIELDS)
    assert spec == {"model": "/m/eagle", "num_speculative_tokens": 3} and extra["specplug"]["candidates"] == ["suffix"]
    spec, _ = translate({"method": "specplug.adaptive", "neural": "mtp"}, None, FIELDS)
    assert spec["method"] == "mtp" and spec["disable_padded_drafter_batch"] is True
    with pytest.raises(InvalidOptionError, match="neural = 'medusa'"):
        translate({"method": "specplug.adaptive", "neural": "medusa"}, None, FIELDS)


def test_hybrid_options_are_checked_too():
    with pytest.raises(InvalidOptionError, match="margn"):
        translate({"method": "specplug.hybrid", "margn": 1.0}, None, FIELDS)


def test_settings_defaults_and_adapter_keys():
    settings = read_settings({"specplug": {"method": "adaptive", "stats_file": "/tmp/s.json", "stats_interval": 0}})
    assert settings.method == "adaptive"
    # no options given: the method's own defaults (adaptive's candidates are suffix and ngram)
    assert settings.options == {}
    assert [part.name for part in create_method(settings).candidates] == ["suffix", "ngram"]
    assert settings.stats_file == "/tmp/s.json" and settings.stats_interval == 0.0
    assert read_settings(None).method == "suffix"
    with pytest.raises(InvalidOptionError, match="stats_interval"):
        read_settings({"specplug": {"stats_interval": -1}})
    with pytest.raises(UnknownMethodError):
        read_settings({"specplug": {"method": "nope"}})


def test_hybrid_cannot_run_as_a_plain_drafter():
    with pytest.raises(InvalidOptionError, match="overlays lookup drafts"):
        create_method(read_settings({"specplug": {"method": "hybrid"}}))


def test_specplug_method():
    assert specplug_method("specplug.adaptive") == "adaptive"
    assert specplug_method("suffix") is None and specplug_method(None) is None


def test_learnt_state_reaches_the_method_and_a_foreign_file_fails_at_config_time(tmp_path):
    path = tmp_path / "adaptive.npz"
    spec, extra = translate({"method": "specplug.adaptive", "learnt_state": str(path)}, None, FIELDS)
    assert extra["specplug"] == {"method": "adaptive", "learnt_state": str(path)}
    adaptive = create_method(read_settings(extra))
    assert adaptive.keeps_learnt_state
    path.write_bytes(b"not a learnt state")
    with pytest.raises(InvalidOptionError, match="is not a file of specplug's learnt statistics"):
        translate({"method": "specplug.adaptive", "learnt_state": str(path)}, None, FIELDS)
