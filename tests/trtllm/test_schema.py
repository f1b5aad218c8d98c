"""Shipped presets and model.yaml checks against the schema extracted from TensorRT-LLM's llm_args.py."""

from __future__ import annotations

import bisect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specplug._presets import list_presets, load_preset
from specplug_adapters.trtllm import SOURCE_COMMIT, TrtllmConfigError, check_model_yaml, check_speculative_config, load_schema
from specplug.lab.trtllm._tune import compile_schedule

ROOT = Path(__file__).resolve().parents[2]
PRESETS = list_presets("trtllm")


def test_the_schema_names_its_source_and_holds_every_decoding_type():
    schema = load_schema()
    assert schema["source"]["commit"] == SOURCE_COMMIT and schema["source"]["path"] == "tensorrt_llm/llmapi/llm_args.py"
    assert {"NGram", "SA", "MTP", "Eagle3", "Eagle", "User_Provided", "Draft_Target", "AUTO"} <= set(schema["decoding_types"])
    assert schema["union"]["discriminator"] == "decoding_type"
    assert all(config["extra"] == "forbid" for config in schema["configs"].values())
    messages = [check["message"] for v in schema["configs"]["NGram"]["validators"] for check in v["checks"]]
    # the draft_len_schedule rules this package applies are the ones the source raises
    assert any(message.startswith("draft_len_schedule[{smallest_batch_size}] must equal max_draft_len") for message in messages)
    assert "max_concurrency and draft_len_schedule are mutually exclusive" in " ".join(messages)


@pytest.mark.parametrize("preset", PRESETS, ids=[p.name for p in PRESETS])
def test_every_shipped_preset_validates(preset):
    data = yaml.safe_load(preset.text)
    checked = check_model_yaml(data, preset.filename)
    assert preset.summary and (checked.settings is not None) == ("specplug" in data)
    if checked.settings is None:
        assert check_speculative_config(data["speculative_config"]) == []
        assert "Tuned by `specplug trtllm tune`" in preset.text and "held-out" in preset.text


def test_the_presets_are_the_issue_s_set():
    assert {p.name for p in PRESETS} >= {"ngram", "sa", "mtp-sa", "eagle3-sa", "eagle3-schedule", "specplug-suffix", "specplug-adaptive", "pard-sa"}
    assert load_preset("trtllm", "mtp-sa").render().startswith("# MTP heads")


BASE = {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model": "/m"}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({**BASE, "draft_len_schedul": {1: 3}}, "speculative_config.draft_len_schedul: unknown key; valid keys: "),
        ({**BASE, "decoding_type": "Eagle4"}, "decoding_type = 'Eagle4': not a TensorRT-LLM decoding type"),
        ({**BASE, "draft_len_schedule": {1: 2, 8: 1}}, "draft_len_schedule[1] = 2 must equal max_draft_len = 3"),
        ({**BASE, "draft_len_schedule": {1: 3, 8: 4}}, "draft_len_schedule[8] = 4 is longer than max_draft_len = 3"),
        ({**BASE, "draft_len_schedule": {0: 3}}, "batch size threshold must be >= 1, got 0"),
        ({**BASE, "draft_len_schedule": {1: 3, 4: -1}}, "draft length must be >= 0, got -1"),
        ({**BASE, "draft_len_schedule": {1: 3}, "max_concurrency": 8}, "mutually exclusive"),
        ({**BASE, "draft_len_schedule": "fast"}, "draft_len_schedule = 'fast': Input should be a valid dictionary"),
        ({**BASE, "sa_config": {"threshold": 4, "thresold": 2}}, "sa_config.thresold: unknown key; valid keys: enable_global_pool, threshold"),
        ({**BASE, "sa_config": {"threshold": 0}}, "sa_config.threshold = 0: Input should be greater than 0"),
        ({"decoding_type": "Eagle3", "max_draft_len": 3}, "Draft model must be provided for EAGLE"),
        ({"decoding_type": "NGram"}, "max_draft_len must be > 0 for NGram"),
        ({"decoding_type": "SA", "max_draft_len": 4, "global_pool_size": 9}, "global_pool_size requires enable_global_pool=True"),
        ({"decoding_type": "Medusa", "max_draft_len": 4}, "does not support the pytorch backend; on pytorch: "),
        ({"decoding_type": "User_Provided", "drafter": "my.module:Drafter"}, "needs a Drafter object, which a YAML file cannot build"),
    ],
)
def test_mistakes_are_rejected_as_tensorrt_llm_would_with_file_key_and_choices(spec, expected):
    with pytest.raises(TrtllmConfigError) as error:
        check_model_yaml({"speculative_config": spec}, "conf/model.yaml")
    assert "conf/model.yaml: speculative_config" in str(error.value) and expected in str(error.value)


def test_what_tensorrt_llm_accepts_is_accepted():
    for spec in (
        {**BASE, "speculative_model_dir": "/m", "speculative_model": None},
        {"decoding_type": "NGram", "max_draft_len": "4", "is_keep_all": "true"},  # pydantic's lax parsing
        {"decoding_type": "MTP", "sa_config": {"threshold": 5, "enable_global_pool": True}},
        {**BASE, "draft_len_schedule": {"1": 3, "16": 1}},
    ):
        assert check_speculative_config(spec) == [], spec
    assert check_speculative_config({"decoding_type": "Medusa", "max_draft_len": 4}, backend="tensorrt") == []


def test_the_specplug_block_names_the_file_key_and_valid_choices():
    with pytest.raises(TrtllmConfigError, match=r"a\.yaml: specplug.method = 'sufix' is not a method; valid methods: adaptive, "):
        check_model_yaml({"specplug": {"method": "sufix"}}, "a.yaml")
    with pytest.raises(TrtllmConfigError, match=r"a\.yaml: specplug block: method 'ngram': unknown option 'max_m'\. Valid options: min_n"):
        check_model_yaml({"specplug": {"method": "ngram", "max_m": 3}}, "a.yaml")
    with pytest.raises(TrtllmConfigError, match=r"a\.yaml: specplug.max_draft_len = 100 is not valid; use an int from 1 to 64"):
        check_model_yaml({"specplug": {"max_draft_len": 100}}, "a.yaml")
    checked = check_model_yaml({"specplug": {"method": "ngram", "max_n": 3}, "max_batch_size": 64}, "a.yaml")
    assert checked.engine == {"max_batch_size": 64} and checked.settings.options == {"max_n": 3}


def _lower(schedule, batch):  # drafter.py's lookup in 2025 releases: the largest key <= batch
    keys = sorted(schedule)
    return schedule[keys[bisect.bisect_right(keys, batch) - 1]]


def _upper(schedule, batch):  # speculative/utils.py's newer lookup: the smallest key >= batch, else 0
    keys = sorted(schedule)
    index = bisect.bisect_left(keys, batch)
    return schedule[keys[index]] if index < len(keys) else 0


@pytest.mark.parametrize("lengths", [[4, 4, 2, 2, 2, 0, 0], [6] * 10, [5, 3, 3, 1], [2, 0], [3, 3, 2, 2, 1, 1, 1, 1]])
def test_compiled_schedules_read_the_same_under_both_lookups(lengths):
    schedule = compile_schedule(lengths)
    assert min(schedule) == 1 and schedule[1] == lengths[0]
    assert check_speculative_config({**BASE, "max_draft_len": lengths[0] or 1, "draft_len_schedule": schedule}) == [] or lengths[0] == 0
    for batch in range(1, max(schedule) + 1):
        assert _lower(schedule, batch) == _upper(schedule, batch) == lengths[min(batch, len(lengths)) - 1]


def test_the_extraction_script_records_fields_discriminators_and_raises(tmp_path):
    source = tmp_path / "llm_args.py"
    source.write_text(
        "class StrictBaseModel: pass\n"
        "class DecodingBaseConfig(StrictBaseModel):\n"
        "    max_draft_len: Optional[NonNegativeInt] = Field(default=None, description='K')\n"
        "class FooDecodingConfig(DecodingBaseConfig):\n"
        "    decoding_type: Literal['Foo'] = Field(default='Foo')\n"
        "    width: PositiveInt = Field(default=2, validation_alias=AliasChoices('width', 'w'))\n"
        "    @model_validator(mode='after')\n"
        "    def check(self):\n"
        "        if self.width > 8:\n"
        "            raise ValueError(f'width {self.width} too big')\n"
        "        return self\n"
        "    def supports_backend(self, backend):\n"
        "        return backend == 'pytorch'\n"
        "SpeculativeConfig: TypeAlias = Annotated[Union[FooDecodingConfig], Field(discriminator='decoding_type')]\n"
    )
    out = tmp_path / "schema.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "extract_trtllm_schema.py"), str(source), "--commit", "abc123", "--out", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    schema = json.loads(out.read_text())
    foo = schema["configs"]["Foo"]
    assert schema["source"]["commit"] == "abc123" and len(schema["source"]["sha256"]) == 64
    assert foo["extra"] == "forbid" and foo["supports_backend"] == "backend == 'pytorch'"
    assert foo["fields"]["width"]["aliases"] == ["width", "w"] and foo["fields"]["max_draft_len"]["default"] is None
    assert foo["validators"][0]["checks"] == [{"when": "(self.width > 8)", "loops": [], "error": "ValueError", "message": "width {self.width} too big"}]
    problems = check_speculative_config({"decoding_type": "Foo", "w": 9}, "f.yaml", schema=schema)
    assert problems == ["f.yaml: speculative_config: width 9 too big"]
    source.write_text("class A: pass\n")
    failed = subprocess.run([sys.executable, str(ROOT / "scripts" / "extract_trtllm_schema.py"), str(source), "--commit", "x"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert failed.returncode != 0 and "SpeculativeConfig" in failed.stderr
