"""The SFT run configuration: presets, YAML, overrides and their one-line errors."""

from __future__ import annotations

import json

import pytest

from moot.core.errors import ConfigError
from moot.training.sft_config import load_sft_config

REQUIRED = ["model.base=meta-llama/Llama-2-7b-hf", "data.train=d.jsonl", "training.output_dir=o"]


def test_presets_carry_the_papers_recipes_and_the_file_and_overrides_win(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("preset: debatune-vicuna\ntraining:\n  epochs: 1\n")
    config = load_sft_config(path, [*REQUIRED, "training.learning_rate=3e-5"])
    assert config.preset == "debatune-vicuna" and config.model.chat_template == "vicuna"
    assert config.training.learning_rate == 3e-5  # moot.core.loader reads YAML 1.2 / JSON exponents
    assert config.training.epochs == 1.0 and config.training.effective_batch_size == 128
    llama = load_sft_config(None, ["preset=debatune-llama2", *REQUIRED])
    assert (llama.training.learning_rate, llama.data.max_length) == (2e-5, 2048)
    assert llama.training.warmup_ratio == 0.03
    assert llama.model.chat_template == "vicuna"  # the released DEBATunE outputs' format
    assert llama.training.method == config.training.method == "full"  # DEBATunE, Appendix B
    compqa = load_sft_config(None, ["preset=compqa-distill", *REQUIRED]).training
    assert (compqa.learning_rate, compqa.effective_batch_size, compqa.weight_decay) == (
        1e-6,
        32,
        0.01,
    )
    assert compqa.lr_scheduler == "cosine" and compqa.epochs == 3


@pytest.mark.parametrize(
    ("preset", "rate"), [("debatune-llama2-lora", 2e-4), ("debatune-vicuna-lora", 1e-4)]
)
def test_lora_presets_keep_the_papers_schedule_with_lora_rates(preset, rate):
    lora = load_sft_config(None, [f"preset={preset}", *REQUIRED])
    paper = load_sft_config(None, [f"preset={preset.removesuffix('-lora')}", *REQUIRED])
    assert lora.training.method == "lora" and lora.training.learning_rate == rate
    assert lora.training.learning_rate == 10 * paper.training.learning_rate
    same = ("epochs", "effective_batch_size", "warmup_ratio", "lr_scheduler", "weight_decay")
    assert [getattr(lora.training, k) for k in same] == [getattr(paper.training, k) for k in same]
    assert lora.data == paper.data and lora.model == paper.model


def test_the_method_defaults_to_lora_and_is_checked():
    assert load_sft_config(None, REQUIRED).training.method == "lora"
    full = load_sft_config(None, [*REQUIRED, "training.method=full"])
    assert full.training.method == "full"
    with pytest.raises(ConfigError, match="training.method: must be 'lora' or 'full'"):
        load_sft_config(None, [*REQUIRED, "training.method=qlora"])
    with pytest.raises(ConfigError, match="lora.qlora needs training.method lora"):
        load_sft_config(None, [*REQUIRED, "training.method=full", "lora.qlora=true"])


def test_effective_batch_becomes_gradient_accumulation_per_process_count():
    config = load_sft_config(None, ["preset=debatune-llama2", *REQUIRED])
    assert config.gradient_accumulation(1) == 32  # 128 / (4 per device x 1)
    assert config.gradient_accumulation(8) == 4
    with pytest.raises(ConfigError, match="not a multiple"):
        config.gradient_accumulation(3)


@pytest.mark.parametrize(
    ("yaml_text", "overrides", "message"),
    [
        (
            "training:\n  learnin_rate: 1\n",
            [],
            "training.learnin_rate: unknown key \\(did you mean",
        ),
        ("trainer: {}\n", [], "trainer: unknown key \\(did you mean 'training'\\?\\)"),
        ("", ["training.epochs=three"], "training.epochs: must be a valid number, got 'three'"),
        ("", ["training.seed=true"], "training.seed: must be a valid integer, got True"),
        ("", ["lora.r=0"], "lora.r: must be greater than 0, got 0"),
        ("", ["lora.target_modules=[1, 2]"], "lora.target_modules: expected list\\[str\\] or str"),
        ("", ["lora.qlora=maybe"], "lora.qlora: expected bool or 'auto', got 'maybe'"),
        ("", ["data.overlong=skip"], "data.overlong: must be 'truncate' or 'drop', got 'skip'"),
        (
            "",
            ["model.chat_template=chatml2"],
            "model.chat_template: unknown chat template 'chatml2'",
        ),
        ("", ["preset=debatune"], "unknown preset 'debatune'"),
        ("", ["model.init={model_type: llama}"], "exactly one of model.base and model.init"),
        ("", ["model.base=null", "model.init={a: 1}"], "model.init: needs a model_type"),
        ("", ["training.max_steps=0"], "training.max_steps: must be -1 \\(all epochs\\) or more"),
        ("", ["training.save_strategy=steps"], "save_strategy steps needs training.save_steps"),
        ("", ["training.eval_steps=5", "training.eval_strategy=epoch"], "eval_steps needs"),
        ("", ["training.report_to=tensorbord"], "report_to: unknown tracker 'tensorbord'"),
        ("", ["epochs=3"], "expected section.key=value"),
        ("- a list\n", [], "expected a mapping of sections"),
        ("training: [\n", [], "not valid YAML"),
    ],
)
def test_bad_configs_are_one_line_errors_naming_the_file_and_key(
    tmp_path, yaml_text, overrides, message
):
    path = tmp_path / "run.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_sft_config(path, [*REQUIRED, *overrides])
    assert "\n" not in str(caught.value)
    if overrides != ["epochs=3"]:  # that one is the override's own error, not the file's
        assert str(caught.value).startswith(f"{path}: ")


def test_trainer_options_default_to_transformers_and_take_a_tracker_or_none():
    config = load_sft_config(None, REQUIRED).training
    assert (config.optim, config.report_to, config.run_name) == (None, [], None)
    assert (config.strategy("save"), config.strategy("eval")) == ("epoch", "epoch")
    given = load_sft_config(
        None,
        [
            *REQUIRED,
            "training.optim=adafactor",
            "training.report_to=tensorboard",  # one name is a list of one
            "training.save_steps=20",
            "training.eval_steps=10",
            "training.logging_strategy=epoch",
        ],
    ).training
    assert (given.optim, given.report_to, given.logging_strategy) == (
        "adafactor",
        ["tensorboard"],
        "epoch",
    )
    assert (given.strategy("save"), given.strategy("eval")) == ("steps", "steps")
    assert load_sft_config(None, [*REQUIRED, "training.report_to=none"]).training.report_to == []


def test_a_tracker_whose_package_is_missing_is_refused_naming_key_and_package():
    import importlib.util

    assert importlib.util.find_spec("neptune") is None  # not a moot dependency, dev or not
    with pytest.raises(ConfigError) as caught:
        load_sft_config(None, [*REQUIRED, "training.report_to=[tensorboard, neptune]"])
    assert str(caught.value) == (
        "config: training.report_to: neptune needs the neptune package, which is not "
        "installed (pip install neptune)"
    )


def test_a_tracker_is_not_part_of_what_a_run_folder_is_claimed_for():
    plain = load_sft_config(None, REQUIRED)
    watched = load_sft_config(
        None, [*REQUIRED, "training.report_to=tensorboard", "training.run_name=x"]
    )
    assert plain.trained_settings() == watched.trained_settings()
    assert plain.to_dict() != watched.to_dict()  # the manifest still records it
    other = load_sft_config(None, [*REQUIRED, "training.optim=sgd"])
    assert other.trained_settings() != plain.trained_settings()


def test_a_folder_claimed_before_a_key_existed_is_still_claimed_while_the_key_holds_its_default():
    plain = load_sft_config(None, REQUIRED)
    older = json.loads(json.dumps(plain.trained_settings()))
    del older["training"]["optim"], older["lora"]["dropout"]  # as an earlier moot recorded it
    assert plain.claimed_by(older)
    assert not load_sft_config(None, [*REQUIRED, "training.optim=sgd"]).claimed_by(older)
    changed = json.loads(json.dumps(plain.trained_settings()))
    changed["training"]["learning_rate"] = 1.0
    assert not plain.claimed_by(changed)


def test_required_values_are_named(tmp_path):
    with pytest.raises(ConfigError, match="^config: data.train: required$"):
        load_sft_config(None, ["model.base=x", "training.output_dir=o"])
    with pytest.raises(ConfigError, match="file not found"):
        load_sft_config(tmp_path / "missing.yaml")
