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
    assert config.training.num_train_epochs == 1.0 and config.training.effective_batch_size == 128
    llama = load_sft_config(None, ["preset=debatune-llama2", *REQUIRED])
    assert (llama.training.learning_rate, llama.data.max_length) == (2e-5, 2048)
    assert llama.training.warmup_steps == 0.03  # below 1: a share of the steps
    assert llama.model.chat_template == "vicuna"  # the released DEBATunE outputs' format
    assert llama.training.method == config.training.method == "full"  # DEBATunE, Appendix B
    compqa = load_sft_config(None, ["preset=compqa-distill", *REQUIRED]).training
    assert (compqa.learning_rate, compqa.effective_batch_size, compqa.weight_decay) == (
        1e-6,
        32,
        0.01,
    )
    assert compqa.lr_scheduler_type == "cosine" and compqa.num_train_epochs == 3


@pytest.mark.parametrize(
    ("preset", "rate"), [("debatune-llama2-lora", 2e-4), ("debatune-vicuna-lora", 1e-4)]
)
def test_lora_presets_keep_the_papers_schedule_with_lora_rates(preset, rate):
    lora = load_sft_config(None, [f"preset={preset}", *REQUIRED])
    paper = load_sft_config(None, [f"preset={preset.removesuffix('-lora')}", *REQUIRED])
    assert lora.training.method == "lora" and lora.training.learning_rate == rate
    assert lora.training.learning_rate == 10 * paper.training.learning_rate
    same = (
        "num_train_epochs",
        "effective_batch_size",
        "warmup_steps",
        "lr_scheduler_type",
        "weight_decay",
    )
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
        (
            "",
            ["training.num_train_epochs=three"],
            "training.num_train_epochs: must be a valid number, got 'three'",
        ),
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


OLD_NAMES = (
    "training:\n  epochs: 2\n  lr_scheduler: linear\n  warmup_ratio: 0.1\n"
    "  per_device_batch_size: 2\n  gradient_checkpointing: false\n"
)


def test_moots_old_names_of_trls_fields_still_load_as_trls_names(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(OLD_NAMES)
    training = load_sft_config(path, REQUIRED).training
    assert (training.num_train_epochs, training.lr_scheduler_type) == (2.0, "linear")
    assert (training.warmup_steps, training.per_device_train_batch_size) == (0.1, 2)
    assert training.activation_checkpointing is False
    # an override replaces the file's value whichever name either gives, over a preset too
    over = [
        "preset=debatune-llama2",
        "training.num_train_epochs=5",
        "training.lr_scheduler=constant",
    ]
    training = load_sft_config(path, [*REQUIRED, *over]).training
    assert (training.num_train_epochs, training.lr_scheduler_type) == (5.0, "constant")
    assert training.effective_batch_size == 128  # the preset's, under the file
    both = tmp_path / "both.yaml"
    both.write_text("training:\n  epochs: 2\n  num_train_epochs: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_sft_config(both, REQUIRED)
    assert str(caught.value) == (
        f"{both}: training.epochs: the old name of num_train_epochs, also given: keep one"
    )
    with pytest.raises(ConfigError, match="training.warmup_ratio: a share of the steps, in"):
        load_sft_config(None, [*REQUIRED, "training.warmup_ratio=5"])


def test_trls_other_fields_pass_through_and_a_key_it_lacks_or_moot_sets_is_refused(tmp_path):
    given = ["training.neftune_noise_alpha=5", "training.lr_scheduler_kwargs={min_lr: 1.0e-6}"]
    training = load_sft_config(None, [*REQUIRED, *given]).training
    arguments = training.trainer_arguments()
    assert arguments["neftune_noise_alpha"] == 5 and arguments["lr_scheduler_kwargs"] == {
        "min_lr": 1e-6
    }
    assert arguments["num_train_epochs"] == 3.0 and "output_dir" not in arguments  # moot's own
    assert "optim" not in arguments  # None: trl's default
    path = tmp_path / "run.yaml"
    for key, message in [
        ("neftune_noise_alfa: 5", "unknown key (did you mean 'neftune_noise_alpha'?)"),
        ("gradient_acumulation_steps: 4", "unknown key (did you mean 'gradient_accumulation"),
        ("gradient_accumulation_steps: 4", "set by moot from training.effective_batch_size"),
        ("bf16: true", "set by moot from training.precision"),
        ("hub_token: hf_abc", "a secret does not belong in a config"),
    ]:
        path.write_text(f"training:\n  {key}\n")
        with pytest.raises(ConfigError) as caught:
            load_sft_config(path, REQUIRED)
        assert str(caught.value).startswith(f"{path}: training.{key.split(':')[0]}: {message}")
        assert "hf_abc" not in str(caught.value)


def test_a_folder_claimed_under_the_old_names_is_claimed_and_a_passed_field_counts(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(OLD_NAMES)
    config = load_sft_config(path, REQUIRED)
    older = json.loads(json.dumps(config.trained_settings()))
    renamed = {"num_train_epochs": "epochs", "lr_scheduler_type": "lr_scheduler"}
    older["training"] = {renamed.get(k, k): v for k, v in older["training"].items()}
    assert "epochs" in older["training"] and config.claimed_by(older)
    passed = load_sft_config(path, [*REQUIRED, "training.neftune_noise_alpha=5"])
    assert not passed.claimed_by(older)  # the earlier run was not given it
    assert not config.claimed_by(json.loads(json.dumps(passed.trained_settings())))
    assert passed.claimed_by(json.loads(json.dumps(passed.trained_settings())))


def test_required_values_are_named(tmp_path):
    with pytest.raises(ConfigError, match="^config: data.train: required$"):
        load_sft_config(None, ["model.base=x", "training.output_dir=o"])
    with pytest.raises(ConfigError, match="file not found"):
        load_sft_config(tmp_path / "missing.yaml")
