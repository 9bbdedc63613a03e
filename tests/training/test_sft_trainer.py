"""SFT (LoRA and full) on a tiny random-weight Llama built from a config: masks, runs, errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from moot.core.errors import ConfigError, InputError
from moot.training.sft_config import load_sft_config
from moot.training.sft_trainer import build_trainer, check_inputs, train_sft

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train-tiny.yaml"
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Should zoos be banned?"},
    {"role": "assistant", "content": "Zoos confine animals."},
    {"role": "user", "content": "Why?"},
    {"role": "assistant", "content": "Enclosures are small."},
]
EOS = {
    "llama-2": " </s>",
    "vicuna": "</s>",
    "alpaca": "</s>",
    "zephyr": "</s>",
    "chatml": "<|im_end|>",
}


def tiny(tmp_path: Path, *overrides: str):
    """The example's tiny run, writing into `tmp_path`."""
    data = ROOT / "examples" / "sft-tiny.jsonl"
    base = [f"data.train={data}", f"training.output_dir={tmp_path / 'run'}"]
    return load_sft_config(EXAMPLE, [*base, *overrides])


@pytest.mark.parametrize("family", ["llama-2", "vicuna", "alpaca", "zephyr", "llama-3", "chatml"])
def test_the_loss_mask_covers_exactly_the_assistant_tokens(family, tmp_path):
    data = tmp_path / "chat.jsonl"
    data.write_text(json.dumps({"messages": CONVERSATION}) + "\n")
    config = tiny(
        tmp_path, f"data.train={data}", f"model.chat_template={family}", "data.max_length=1024"
    )
    trainer = build_trainer(config, progress=False).trainer
    batch = next(iter(trainer.get_train_dataloader()))
    ids, labels = batch["input_ids"][0], batch["labels"][0]
    tokenizer = trainer.processing_class
    trained = tokenizer.decode(ids[labels != -100])
    eos = EOS.get(family, "<|eot_id|>")
    assistant = [m["content"] for m in CONVERSATION if m["role"] == "assistant"]
    assert trained == "".join(answer + eos for answer in assistant)  # each closed by its eos
    untrained = tokenizer.decode(ids[labels == -100])
    assert "Should zoos be banned?" in untrained and "Zoos" not in untrained
    assert (labels != -100).sum() < (labels == -100).sum()


def test_training_lowers_the_loss_writes_a_manifest_and_a_rerun_trains_nothing(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text((ROOT / "examples" / "sft-tiny.jsonl").read_text())
    config = tiny(tmp_path, f"data.train={data}")
    lines: list[str] = []
    result = train_sft(config, log=lines.append, progress=False)
    manifest = result.manifest
    losses = [entry["loss"] for entry in manifest["log_history"] if "loss" in entry]
    assert losses[-1] < losses[0] - 1  # 7.0 -> 3.0 measured
    assert manifest["steps"] == 30 and manifest["status"] == "complete"
    train = manifest["data"]["train"]
    assert train["samples"] == 12 and train["overlong"] == 0 and len(train["sha256"]) == 64
    assert manifest["tokens_seen"] == train["tokens"] * 10  # ten epochs
    assert set(manifest["versions"]) >= {"torch", "transformers", "trl", "peft", "accelerate"}
    assert manifest["config"]["training"]["learning_rate"] == 0.02
    assert (result.model_dir / "adapter_config.json").is_file()
    assert (result.model_dir / "chat_template.jinja").is_file()
    assert lines[0] == "train: 12 samples, 1629 tokens"
    again = train_sft(config, progress=False)
    assert again.already_done and again.manifest == manifest
    # a folder an earlier moot finished: its old names, its own identity; finished all the same
    old = {"num_train_epochs": "epochs", "lr_scheduler_type": "lr_scheduler"}
    for path in (result.output_dir / ".moot" / "train.json", result.output_dir / "manifest.json"):
        record = json.loads(path.read_text())
        training = record["config"]["training"]
        record["config"]["training"] = {old.get(k, k): v for k, v in training.items()}
        path.write_text(json.dumps({**record, "identity": "0123456789abcdef"}))
    assert train_sft(config, progress=False).already_done
    assert "| learning rate, scheduler | 0.02, cosine |" in sft_card_text(result)
    with pytest.raises(ConfigError, match="another configuration or other data"):
        train_sft(tiny(tmp_path, "training.epochs=2"), progress=False)
    data.write_text("\n".join(data.read_text().splitlines()[:-1]) + "\n")  # one record less
    with pytest.raises(ConfigError, match="another configuration or other data"):
        train_sft(config, progress=False)


def sft_card_text(result) -> str:
    """The card `moot train sft` writes for `result`'s weights, as text."""
    from moot.training.sft_card import write_sft_card

    return (write_sft_card(result.output_dir) / "README.md").read_text()


def test_full_fine_tuning_trains_every_weight_into_a_whole_model(tmp_path):
    from transformers import AutoModelForCausalLM

    overrides = ("training.method=full", "training.max_steps=8", "training.logging_steps=1")
    result = train_sft(tiny(tmp_path, *overrides, "training.learning_rate=1e-2"), progress=False)
    manifest = result.manifest
    assert manifest["method"] == "full" and manifest["steps"] == 8
    counts = manifest["trainable_parameters"]
    assert counts["trainable"] == counts["total"] > 0  # LoRA trains a small share
    losses = [entry["loss"] for entry in manifest["log_history"] if "loss" in entry]
    assert losses[-1] < losses[0] - 1  # 7.5 -> 4.1 measured
    assert result.model_dir == tmp_path / "run" / "model"
    assert (result.model_dir / "model.safetensors").is_file()
    assert (result.model_dir / "chat_template.jinja").is_file()
    assert not (result.model_dir / "adapter_config.json").exists()
    trained = AutoModelForCausalLM.from_pretrained(result.model_dir)
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "base")
    assert not trained.lm_head.weight.equal(base.lm_head.weight)  # frozen under LoRA


def test_samples_over_max_length_are_counted_then_truncated_or_dropped(tmp_path):
    truncated = build_trainer(tiny(tmp_path, "data.max_length=120"), progress=False)
    report = truncated.train_report
    assert report["overlong"] > 0 and report["samples"] == 12 and report["tokens"] < 1629
    assert max(len(row["input_ids"]) for row in truncated.trainer.train_dataset) == 120
    dropped = build_trainer(
        tiny(tmp_path, "data.max_length=120", "data.overlong=drop"), progress=False
    ).train_report
    assert dropped["samples"] == 12 - report["overlong"]
    with pytest.raises(InputError, match="every sample is longer than data.max_length 20"):
        build_trainer(tiny(tmp_path, "data.max_length=20", "data.overlong=drop"))


def test_a_base_model_that_is_not_on_this_machine_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = load_sft_config(
        EXAMPLE,
        [
            "model.init=null",
            "model.base=meta-llama/Llama-2-7b-hf",
            f"data.train={ROOT / 'examples' / 'sft-tiny.jsonl'}",
            f"training.output_dir={tmp_path}",
        ],
    )
    with pytest.raises(ConfigError, match="not a local folder, and not in the Hugging Face cache"):
        build_trainer(config)


def test_a_chat_template_whose_end_of_turn_the_tokenizer_lacks_is_refused(tmp_path):
    build_trainer(tiny(tmp_path), progress=False)  # builds a llama-2 family base
    base = tmp_path / "run" / "base"
    config = tiny(tmp_path, "model.init=null", f"model.base={base}", "model.chat_template=llama-3")
    with pytest.raises(ConfigError, match="ends turns with '<\\|eot_id\\|>'"):
        build_trainer(config)


def test_the_trainer_options_reach_the_trainer_and_an_unknown_optimizer_is_named(tmp_path):
    data = ROOT / "examples" / "sft-tiny.jsonl"
    options = [
        "training.optim=sgd",
        "training.max_grad_norm=0.5",
        "training.logging_strategy=epoch",
        "training.save_steps=7",
        f"data.eval={data}",
        "training.eval_steps=3",
        "training.report_to=tensorboard",
        "training.epochs=2",  # moot's old name of num_train_epochs
        "training.neftune_noise_alpha=5.0",  # trl's fields moot does not name: passed through
        "training.per_device_eval_batch_size=2",
        "training.dataloader_drop_last=true",
        "training.activation_checkpointing=true",  # transformers < 5.23: gradient_checkpointing
    ]
    args = build_trainer(tiny(tmp_path, *options), progress=False).trainer.args
    assert args.gradient_checkpointing is True  # both names on transformers >= 5.23
    assert (args.num_train_epochs, args.warmup_steps, args.lr_scheduler_type) == (2, 0.03, "cosine")
    assert (args.neftune_noise_alpha, args.dataloader_drop_last) == (5.0, True)
    assert (args.per_device_train_batch_size, args.per_device_eval_batch_size) == (4, 2)
    assert (args.optim, args.max_grad_norm, args.logging_strategy) == ("sgd", 0.5, "epoch")
    assert (args.save_strategy, args.save_steps) == ("steps", 7)
    assert (args.eval_strategy, args.eval_steps) == ("steps", 3)
    assert (args.report_to, args.run_name) == (["tensorboard"], "run")  # the folder's name
    with pytest.raises(ConfigError) as caught:
        build_trainer(tiny(tmp_path, "training.optim=adamw_torchh"), progress=False)
    assert str(caught.value) == (
        "training.optim: unknown optimizer 'adamw_torchh' (did you mean 'adamw_torch'?) "
        "(transformers' OptimizerNames)"
    )
    with pytest.raises(
        ConfigError, match="^training: cosin is not a valid SchedulerType, please select one of"
    ):
        build_trainer(tiny(tmp_path, "training.lr_scheduler_type=cosin"), progress=False)


def test_activation_checkpointing_goes_by_its_old_name_where_transformers_has_only_that():
    import dataclasses

    from moot.training.sft_trainer import _known_names

    @dataclasses.dataclass
    class Before523:  # transformers' TrainingArguments before 5.23 (vLLM 0.33 allows < 5.21)
        gradient_checkpointing: bool = False
        gradient_checkpointing_kwargs: dict | None = None

    @dataclasses.dataclass
    class Since523(Before523):
        activation_checkpointing: bool = False

    given = {"activation_checkpointing": True, "activation_checkpointing_kwargs": {}, "seed": 0}
    assert _known_names(given, Since523) == given
    assert _known_names(given, Before523) == {
        "gradient_checkpointing": True,
        "gradient_checkpointing_kwargs": {},
        "seed": 0,
    }


def test_the_fields_read_from_trls_source_are_sft_configs_own():
    import dataclasses

    from trl import SFTConfig

    from moot.training.trl_fields import sft_config_fields

    assert sft_config_fields() == {f.name for f in dataclasses.fields(SFTConfig) if f.init}


def test_a_mix_folder_gives_train_and_eval_splits(tmp_path):
    from moot.training import mix_datasets

    mix_datasets([ROOT / "examples" / "sft-tiny.jsonl"], tmp_path / "mix", eval_fraction=0.25)
    config = tiny(tmp_path, f"data.train={tmp_path / 'mix'}", "training.max_steps=2")
    manifest = train_sft(config, progress=False).manifest
    train, evaluation = manifest["data"]["train"], manifest["data"]["eval"]
    assert train["samples"] + evaluation["samples"] == 12 and evaluation["samples"] > 0
    assert train["source"] == evaluation["source"] == str(tmp_path / "mix")
    assert manifest["losses"]["eval_loss"] > 0 and manifest["steps"] == 2


def test_an_eval_file_is_read_whole_and_the_data_checked_without_torch(tmp_path):
    data = ROOT / "examples" / "sft-tiny.jsonl"
    digests = check_inputs(tiny(tmp_path, f"data.eval={data}"))  # a file is one split: all of it
    assert digests["eval"] == digests["train"] and len(digests["train"]) == 64
    assert check_inputs(tiny(tmp_path))["eval"] is None
    assert not (tmp_path / "run").exists()  # checked, nothing claimed


WORKER_END = """
import sys, torch.distributed as dist
from moot.training.sft_trainer import exit_worker

exit_worker()  # not in a process group yet: returns
print("alone", flush=False)
dist.init_process_group("gloo", init_method=sys.argv[1], rank=0, world_size=1)
print("in a group", flush=False)  # still buffered: exit_worker must flush it
exit_worker()
print("after exit_worker")
sys.exit(3)
"""


def test_exit_worker_flushes_and_ends_a_distributed_worker_with_0(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", WORKER_END, f"file://{tmp_path / 'rendezvous'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n") == ["alone", "in a group", ""]


def test_resume_takes_the_newest_marked_checkpoint_and_deletes_torn_ones(tmp_path: Path) -> None:
    from moot.training.sft_trainer import COMPLETE, _resume_point

    said: list[str] = []
    for step, files in ((10, [COMPLETE, "trainer_state.json"]), (20, ["adapter.safetensors"])):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in files:
            (folder / name).write_text("{}")
    assert _resume_point(tmp_path, said.append) == tmp_path / "checkpoint-10"
    assert not (tmp_path / "checkpoint-20").exists() and "checkpoint-20" in said[0]


def test_a_run_begun_before_the_marks_resumes_from_its_newest_checkpoint_with_state(
    tmp_path: Path,
) -> None:
    from moot.training.sft_trainer import _resume_point

    for step, files in ((10, ["trainer_state.json"]), (20, ["trainer_state.json"]), (30, [])):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in files:
            (folder / name).write_text("{}")
    assert _resume_point(tmp_path, lambda _: None) == tmp_path / "checkpoint-20"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-10", "checkpoint-20"]


def test_packing_on_the_cpu_batches_packs_as_rows_whose_samples_never_see_each_other(tmp_path):
    import torch

    config = tiny(tmp_path, "training.packing=true", "training.per_device_batch_size=2")
    trainer = build_trainer(config, progress=False).trainer
    batch = next(iter(trainer.get_train_dataloader()))
    ids, positions = batch["input_ids"], batch["position_ids"]
    # one row per pack (trl alone flattens a batch into 1 x 2*256 tokens for FlashAttention)
    assert ids.shape[0] == 2 and ids.shape[1] <= 256 and "attention_mask" not in batch
    row, where = ids[:1], positions[:1]
    starts = (where[0] == 0).nonzero().flatten().tolist() + [where.shape[1]]
    assert len(starts) > 2  # several samples share the row
    model = trainer.model.eval()
    with torch.no_grad():
        packed = model(input_ids=row, position_ids=where).logits[0]
        for start, end in zip(starts, starts[1:], strict=False):
            alone = model(input_ids=row[:, start:end]).logits[0]
            torch.testing.assert_close(packed[start:end], alone, atol=1e-4, rtol=1e-4)


def test_a_packed_run_counts_every_token_once(tmp_path):
    config = tiny(tmp_path, "training.packing=true", "training.epochs=1")
    manifest = train_sft(config, progress=False).manifest
    train = manifest["data"]["train"]
    assert manifest["tokens_seen"] == train["tokens"]  # the rows' filler is not counted
    (entry,) = [e for e in manifest["log_history"] if "num_tokens" in e][-1:]
    assert entry["num_tokens"] == train["tokens"]  # trl's own count, all rows of each batch


def test_a_run_folder_an_earlier_version_claimed_and_finished_is_not_trained_again(tmp_path):
    """Issue 30, item 3: ``.moot/train.json`` is a `RunFolder` claim now, the same file.

    The folder is made as an earlier version left a finished run: its claim as that version
    wrote it (the identity a hash of the settings and data), its manifest. It is done, its claim
    untouched; another configuration is refused, naming the flag to change.
    """
    config = tiny(tmp_path)
    out = Path(config.training.output_dir)
    settings, data = config.trained_settings(), check_inputs(config)
    text = json.dumps({"config": settings, "data": data}, sort_keys=True)
    identity = hashlib.sha256(text.encode()).hexdigest()[:16]
    claim = json.dumps({"identity": identity, "config": settings, "data": data}, indent=2)
    (out / ".moot").mkdir(parents=True)
    (out / ".moot" / "train.json").write_text(claim + "\n")
    (out / "manifest.json").write_text(json.dumps({"identity": identity, "status": "complete"}))
    assert train_sft(config).already_done
    assert (out / ".moot" / "train.json").read_text() == claim + "\n"
    other = tiny(tmp_path, "training.learning_rate=0.5")
    refusal = "holds a training run of another configuration or other data; use a new training"
    with pytest.raises(ConfigError, match=f"^{out} {refusal}.output_dir$"):
        train_sft(other)
