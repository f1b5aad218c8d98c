"""Cost models: the H100 preset's numbers, file validation, the registration hook."""

from __future__ import annotations

import math

import numpy as np

import pytest

import specplug
from specplug import _plugins
from specplug._plugins import Catalog, build_plugin_manager
from specplug.cost import (
    CostModel,
    CostModelError,
    CostModelRegistrar,
    LinearCostModel,
    OnlineCostModel,
    cost_model,
    cost_models,
    dump_cost_model,
    load_cost_model,
    plain_step_time,
    spec_step_time,
)

GOOD = """\
name = "toy"
step_overhead = 0.001

[verify]
per_kv_token = 1e-8
per_batched_token = 2e-5
fixed = 0.005

[draft.neural]
per_draft_token = 1e-6
fixed = 0.002

[draft.lookup]
verify_fraction = 0.01
"""


def test_h100_preset_has_the_published_coefficients():
    model = cost_model("llama-3.1-8b-h100")
    assert math.isclose(model.verify.per_kv_token, 3.93e-8, rel_tol=0.01)
    assert math.isclose(model.verify.per_batched_token, 2.10e-5, rel_tol=0.01)
    assert math.isclose(model.verify.fixed, 5.89e-3, rel_tol=0.01)
    assert math.isclose(model.draft.neural.per_kv_token, 2.38e-9, rel_tol=0.01)
    assert math.isclose(model.draft.neural.per_draft_token, 8.41e-7, rel_tol=0.01)
    assert math.isclose(model.draft.neural.fixed, 2.14e-3, rel_tol=0.01)
    assert math.isclose(model.draft.lookup.verify_fraction, 0.0059, rel_tol=0.01)
    assert math.isclose(model.step_overhead(), 1.21e-3, rel_tol=0.01)


def test_step_times_follow_the_linear_formula():
    model = cost_model("llama-3.1-8b-h100")
    # batch 8, 500 tokens each, 3 drafted tokens: 32 batched tokens, 4000 KV tokens
    verify = 3.92645679e-8 * 4000 + 2.10103129e-5 * 32 + 5.88590713e-3
    neural = 2.37768493e-9 * 4000 + 8.41429603e-7 * 24 + 2.13526175e-3
    expected = verify + neural + 0.005875 * verify + 1.20683946e-3
    assert math.isclose(spec_step_time(model, 8, 500, 3, ["neural", "lookup"]), expected, rel_tol=1e-12)
    assert math.isclose(plain_step_time(model, 8, 500), model.verify_time(8, 4000) + 1.20683946e-3)
    # speculation costs more per step at large batch than at batch 1 (relative to plain)
    ratio_1 = spec_step_time(model, 1, 500, 3, ["neural"]) / plain_step_time(model, 1, 500)
    ratio_128 = spec_step_time(model, 128, 500, 3, ["neural"]) / plain_step_time(model, 128, 500)
    assert ratio_128 > ratio_1


def test_file_round_trip(tmp_path):
    path = tmp_path / "toy.toml"
    path.write_text(GOOD)
    model = load_cost_model(path)
    assert model.name == "toy" and model.draft.lookup.verify_fraction == 0.01
    again = tmp_path / "again.toml"
    again.write_text(dump_cost_model(model))
    assert load_cost_model(again) == model
    assert cost_model(str(path)) == model


def test_negative_coefficient_names_file_line_and_field(tmp_path):
    path = tmp_path / "neg.toml"
    path.write_text(GOOD.replace("per_batched_token = 2e-5", "per_batched_token = -2e-5"))
    with pytest.raises(CostModelError) as info:
        load_cost_model(path)
    message = str(info.value)
    assert f"{path}:6:" in message
    assert "verify.per_batched_token" in message
    assert "greater than or equal to 0" in message


def test_missing_coefficient_names_its_table(tmp_path):
    path = tmp_path / "missing.toml"
    path.write_text(GOOD.replace("fixed = 0.005\n", ""))
    with pytest.raises(CostModelError, match=rf"{path}:4: field verify.fixed is missing"):
        load_cost_model(path)


def test_missing_draft_kind_and_empty_draft_table(tmp_path):
    path = tmp_path / "nolookup.toml"
    path.write_text(GOOD.split("[draft.lookup]")[0])
    with pytest.raises(CostModelError, match=r"field draft.lookup is missing"):
        load_cost_model(path)
    path.write_text(GOOD.replace("verify_fraction = 0.01\n", ""))
    with pytest.raises(CostModelError, match=rf"{path}:13: field draft.lookup = .*no coefficient given"):
        load_cost_model(path)


def test_unknown_field_and_bad_toml(tmp_path):
    path = tmp_path / "extra.toml"
    path.write_text(GOOD.replace("fixed = 0.005", "fixed = 0.005\nfixd = 1"))
    with pytest.raises(CostModelError, match=rf"{path}:8: field verify.fixd is not known"):
        load_cost_model(path)
    path.write_text("name = \n")
    with pytest.raises(CostModelError, match="not valid TOML.*line 1"):
        load_cost_model(path)
    with pytest.raises(CostModelError, match=r"cost model file .*absent.toml: cannot be read: No such file"):
        load_cost_model(tmp_path / "absent.toml")


def test_unknown_name_lists_the_presets():
    with pytest.raises(CostModelError, match=r"unknown cost model 'h200'; valid names: .*llama-3.1-8b-h100"):
        cost_model("h200")
    with pytest.raises(CostModelError, match="no draft kind 'tree'"):
        cost_model("llama-3.1-8b-h100").draft_time("tree", 1, 1, 1.0)


class _Plugin:
    """An in-test plugin that registers one cost model through the hook."""

    @specplug.hookimpl
    def specplug_register_cost_models(self, registrar):
        registrar.add(
            "toy-gpu",
            LinearCostModel.model_validate(
                {
                    "name": "toy-gpu",
                    "verify": {"per_kv_token": 0, "per_batched_token": 1e-5, "fixed": 1e-3},
                    "draft": {"lookup": {"fixed": 0}, "neural": {"fixed": 5e-4}},
                }
            ),
            summary="a toy accelerator",
        )


def test_register_cost_models_hook_adds_a_named_model():
    manager = build_plugin_manager(entry_points=False, extra_plugins={"toy": _Plugin()})
    specs = Catalog(manager).cost_models()
    assert {"llama-3.1-8b-h100", "toy-gpu"} <= set(specs)
    assert specs["toy-gpu"].model.verify_time(10, 0) == pytest.approx(1.1e-3)


def test_register_cost_models_hook_rejects_duplicates_and_non_models():
    registrar = CostModelRegistrar()
    registrar.add("a", cost_model("llama-3.1-8b-h100"), summary="x")
    with pytest.raises(specplug.DuplicateNameError, match="registered twice"):
        registrar.add("a", cost_model("llama-3.1-8b-h100"), summary="x")
    with pytest.raises(CostModelError, match="has no verify_time"):
        registrar.add("b", object(), summary="x")
    with pytest.raises(specplug.InvalidOptionError, match="cost model name 'Bad Name' is not valid"):
        registrar.add("Bad Name", cost_model("llama-3.1-8b-h100"), summary="x")


def test_cost_models_lists_presets(fresh_catalog):
    assert "llama-3.1-8b-h100" in cost_models()
    _plugins.reset()


def test_vectorised_step_times_equal_the_scalar_ones():
    from specplug.cost import spec_step_times

    model = cost_model("llama-3.1-8b-h100")
    for kinds in (("lookup",), ("neural",), ("lookup", "neural")):
        for batch in (1, 7, 128):
            array = spec_step_times(model, batch, 333, 9, kinds if len(kinds) > 1 else kinds[0])
            scalar = [spec_step_time(model, batch, 333, k, kinds) for k in range(10)]
            assert array.tolist() == pytest.approx(scalar, rel=1e-12)
    # a step that runs both drafters costs more than either alone, at every length
    both = spec_step_times(model, 8, 333, 9, ("neural", "lookup"))
    assert (both > spec_step_times(model, 8, 333, 9, "neural")).all()
    with pytest.raises(CostModelError, match="no draft kind 'medusa'"):
        spec_step_times(model, 1, 333, 3, "medusa")


def test_fit_recovers_coefficients_and_drops_negative_ones():
    from specplug._cost._fit import fit_verify

    rng = np.random.default_rng(1)
    samples = [(kv, n, (2e-8 * kv + 3e-4 * n + 4e-3) * (1 + 0.001 * rng.standard_normal())) for kv in (64, 512, 2048) for n in (1, 4, 16, 32)]
    per_kv, per_token, fixed, error = fit_verify(samples)
    assert per_kv == pytest.approx(2e-8, rel=0.3) and per_token == pytest.approx(3e-4, rel=0.05)
    assert fixed == pytest.approx(4e-3, rel=0.05) and error < 0.02
    # times that fall with the KV length would need a negative coefficient: it is dropped, not kept
    falling = [(kv, n, 1e-3 + 1e-4 * n - 1e-7 * kv) for kv in (0, 100, 200) for n in (1, 2, 4)]
    per_kv, per_token, fixed, _ = fit_verify(falling)
    assert per_kv == 0.0 and per_token > 0 and fixed > 0
    with pytest.raises(CostModelError, match="at least 3"):
        fit_verify([(1, 1, 1.0)])


def test_calibrate_command_rejects_bad_input(tmp_path, capsys):
    from specplug.cli import main

    for args, message in [
        (["--out", str(tmp_path / "m.json")], "must end in .toml"),
        (["--out", str(tmp_path / "m.toml"), "--contexts", "64,x"], "--contexts '64,x' is not a comma-separated list"),
        (["--out", str(tmp_path / "m.toml"), "--batched", "0"], "--batched '0': give ints from 1 to 4096"),
    ]:
        with pytest.raises(SystemExit) as info:
            main(["calibrate", *args])
        assert info.value.code == 2
        assert message in capsys.readouterr().err


def test_doctests():
    import doctest

    import specplug._cost._linear
    import specplug._cost._fit
    import specplug._cost._steps

    for module in (specplug.cost, specplug._cost._fit, specplug._cost._linear, specplug._cost._steps):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__


def test_online_cost_model_learns_per_batch_size():
    model = OnlineCostModel(window=3, prior_step=0.01, prior_token_share=0.5)
    assert model.verify_time(3, 0) == pytest.approx(0.02)  # nothing seen: the prior
    for seconds in (0.030, 0.010, 0.011):
        model.observe(1, seconds)
    model.observe(4, 0.100)  # a kernel that is slow at this size is priced as measured
    model.observe(6, 0.040)
    assert model.verify_time(1, 0) == pytest.approx(0.011)  # median of the window
    assert model.verify_time(5, 0) == pytest.approx(0.070)  # between seen sizes: interpolated
    assert model.verify_time(8, 0) == pytest.approx(0.040 + 2 * 0.5 * 0.011)  # beyond: optimistic slope
    model.observe(1, 0.5)
    model.observe(1, 0.5)  # the window forgets old steps
    assert model.verify_time(1, 0) == pytest.approx(0.5)
    model.observe_draft("lookup", 0.001)
    assert model.draft_time("lookup", 4, 0, 0.0) == pytest.approx(0.001)
    assert model.draft_time("neural", 4, 0, 0.0) == 0.0
    with pytest.raises(CostModelError, match="draft kind 'tree'"):
        model.draft_time("tree", 1, 0, 0.0)
    assert isinstance(model, CostModel)


@pytest.mark.parametrize(
    ("option", "value"), [("window", 0), ("max_batched_tokens", 0), ("prior_token_share", 0.0), ("prior_step", -1.0)]
)
def test_online_cost_model_rejects_bad_options(option, value):
    with pytest.raises(CostModelError, match=f"{option} = "):
        OnlineCostModel(**{option: value})


def test_adaptive_drafts_what_pays_under_an_online_cost_model():
    model = OnlineCostModel()
    # this "machine" verifies 4 tokens faster than 2 or 3, and anything longer slowly
    for size, seconds in ((1, 0.025), (2, 0.060), (3, 0.095), (4, 0.070), (5, 0.5), (9, 0.9)):
        model.observe(size, seconds)
    adaptive = specplug.create("adaptive", candidates=["ngram"], cost=model, prior=0.9)
    adaptive.start("r", [1, 2, 3, 4, 5, 6, 7, 8, 9] * 6)
    assert len(adaptive.propose("r", 8).tokens) == 3


def test_online_step_times_in_one_pass_equal_the_per_length_sums():
    # the composites price every step with this model's table (one row for all requests): the same sums
    from specplug.cost import spec_step_time

    model = OnlineCostModel()
    for tokens, seconds in ((1, 0.020), (3, 0.026), (9, 0.031)):
        model.observe(tokens, seconds)
    model.observe_draft("neural", 0.012)
    model.observe_draft("lookup", 0.0004)
    model.observe_overhead(0.003)
    for batch in (1, 4):
        for kinds in ((), ("lookup",), ("neural",), ("lookup", "neural")):
            expected = [spec_step_time(model, batch, 100, k, kinds) for k in range(12)]
            assert model.spec_step_times(batch, 11, kinds).tolist() == expected


def test_a_monotone_online_model_never_prices_more_tokens_below_fewer():
    # vLLM's step runs the same kernels at every size: a fast median at 4 tokens is noise, not a cheaper size
    for monotone, at_four in ((True, 0.030), (False, 0.010)):
        model = OnlineCostModel(monotone=monotone)
        model.observe(1, 0.030)
        model.observe(4, 0.010)
        assert model.verify_time(4, 0) == pytest.approx(at_four)
        assert model.verify_time(2, 0) == pytest.approx(0.030 if monotone else 0.030 - 0.020 / 3)
