"""`moot train dpo` end to end on a tiny Llama built from a config: it learns the preferences.

One LoRA run, from an SFT-style adapter, on pairs in chat messages (what `moot data preferences`
writes) framed by `model.chat_template`, serves every assert: the chosen-over-rejected margin on
held-out pairs (measured here from the model's log-probabilities through the chat template,
before and after), the run's folder, manifest and card, its rerun, and `moot train merge` on its
adapter.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from moot.core.errors import InputError
from tests.cli.helpers import moot_env, run_moot
from tests.conftest import built_once
from tests.tiny import tiny_llama

pytestmark = [pytest.mark.torch, pytest.mark.subprocess]

ENV = moot_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
CHOSEN = ["yes it harms people", "yes it costs lives"]
REJECTED = ["no it helps people", "no it saves money"]
TRAIN_TOPICS = ["smoking", "gambling", "hunting", "fireworks", "tobacco", "cars"]
HELD_OUT_TOPICS = ["zoos", "boxing", "drones"]
#: the llama-2 chat template's markers as the tiny word-level tokenizer splits them (<s> is its own)
TEMPLATE_WORDS = {"[", "INST", "]", "[/"}
WORDS = sorted(
    {"should", "we", "ban", "?", *TRAIN_TOPICS, *HELD_OUT_TOPICS, *TEMPLATE_WORDS}
    | {word for text in CHOSEN + REJECTED for word in text.split()}
)
#: a pair whose prompt alone fills data.max_length: trl drops it, so it is not counted as trained
OVERLONG = {
    "prompt": [{"role": "user", "content": "should we ban cars ? " * 8}],
    "chosen": [{"role": "assistant", "content": CHOSEN[0]}],
    "rejected": [{"role": "assistant", "content": REJECTED[0]}],
}
CONFIG = """\
model: {{base: {base}, chat_template: llama-2}}
data: {{train: {train}, max_length: 32}}
lora: {{r: 8, alpha: 16, dropout: 0.0}}
dpo: {{beta: 0.5, loss_type: sigmoid}}
training:
  output_dir: {out}
  max_steps: 12
  learning_rate: 5.0e-2
  lr_scheduler_type: constant
  warmup_steps: 0
  per_device_train_batch_size: 6
  activation_checkpointing: false
  logging_steps: 4
  save_steps: 6
  seed: 0
"""


def pairs(topics: list[str]) -> list[dict]:
    """A preference pair per topic and answer, in chat messages: the answer that the topic harms
    is chosen."""
    return [
        {
            "prompt": [{"role": "user", "content": f"should we ban {topic} ?"}],
            "chosen": [{"role": "assistant", "content": good}],
            "rejected": [{"role": "assistant", "content": bad}],
            "judge": "hand",
        }
        for topic in topics
        for good, bad in zip(CHOSEN, REJECTED, strict=True)
    ]


def margin(model, tokenizer, examples: list[dict]) -> float:
    """Mean over `examples` of log p(chosen | prompt) - log p(rejected | prompt), in nats.

    As trl frames a pair: the prompt through the chat template with the generation prompt, the
    answer the rest of the templated conversation (its end-of-turn token included).
    """
    import torch

    def logp(prompt: list[dict], answer: list[dict]) -> float:
        start = tokenizer.apply_chat_template(prompt, add_generation_prompt=True)["input_ids"]
        whole = tokenizer.apply_chat_template(prompt + answer)["input_ids"]
        assert whole[: len(start)] == start and tokenizer.unk_token_id not in whole
        rest = whole[len(start) :]
        ids = torch.tensor([whole])
        with torch.no_grad():
            logits = model(ids).logits.log_softmax(-1)[0]
        return sum(logits[len(start) + i - 1, token].item() for i, token in enumerate(rest))

    model.eval()
    gaps = [logp(e["prompt"], e["chosen"]) - logp(e["prompt"], e["rejected"]) for e in examples]
    return sum(gaps) / len(gaps)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The tiny base, an SFT-style LoRA adapter on it, and one `moot train dpo` from it."""
    return built_once(tmp_path_factory, "dpo", train_dpo)


def train_dpo(tmp: Path) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = tiny_llama(tmp / "base", WORDS)
    torch.manual_seed(1)
    lora = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    sft = get_peft_model(AutoModelForCausalLM.from_pretrained(base), lora)
    sft.save_pretrained(tmp / "sft-adapter")  # the shape of `moot train sft`'s adapter/
    train = tmp / "train.jsonl"
    train.write_text("".join(json.dumps(p) + "\n" for p in [*pairs(TRAIN_TOPICS), OVERLONG]))
    config = tmp / "dpo.yaml"
    out = tmp / "run"
    config.write_text(CONFIG.format(base=tmp / "sft-adapter", train=train, out=out))
    trained = run_moot("train", "dpo", "--config", config, env=ENV)
    return {
        "base": base,
        "sft": tmp / "sft-adapter",
        "config": config,
        "out": out,
        "done": trained,
        "train": train,
    }


def test_dpo_raises_the_chosen_over_rejected_margin_on_held_out_pairs(run):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert run["done"].returncode == 0, run["done"].stderr
    tokenizer = AutoTokenizer.from_pretrained(run["out"] / "adapter")  # with llama-2's template
    held_out = pairs(HELD_OUT_TOPICS)
    sft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(run["base"]), run["sft"])
    before = margin(sft.merge_and_unload(), tokenizer, held_out)  # where DPO started
    start = AutoModelForCausalLM.from_pretrained(run["out"] / "base")  # the SFT adapter merged
    policy = PeftModel.from_pretrained(start, run["out"] / "adapter")
    after = margin(policy, tokenizer, held_out)
    with policy.disable_adapter():  # the reference trl used: the adapter off
        reference = margin(policy, tokenizer, held_out)
    print(f"held-out margin: before {before:.3f}, after {after:.3f} nats")
    assert reference == pytest.approx(before, abs=1e-4)
    assert after > before + 1.0  # a preference learnt, on topics the training never saw


def test_moot_train_dpo_writes_its_adapter_card_and_manifest_and_merges(run, tmp_path):
    done, out = run["done"], run["out"]
    assert done.returncode == 0, done.stderr
    assert f"adapter  {out / 'adapter'}" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["trainer"] == "dpo" and manifest["method"] == "lora"
    train = manifest["data"]["train"]
    assert manifest["steps"] == 12 and (train["samples"], train["overlong"]) == (12, 1)
    dropped = "1 dropped, their prompt alone filling data.max_length 32 tokens"
    assert f"train: 12 preference pairs; {dropped}\n" in done.stdout
    assert manifest["config"]["dpo"] == {
        "beta": 0.5,
        "loss_type": ["sigmoid"],
        "loss_weights": None,
        "label_smoothing": 0.0,
    }
    assert manifest["base"] == str(out / "base")  # the SFT adapter merged: DPO's start
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(out / "base")
    margins = [e["rewards/margins"] for e in manifest["log_history"] if "rewards/margins" in e]
    assert len(margins) == 3 and margins[-1] > margins[0]  # trl's own view, on the train pairs
    saved = sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*"))
    assert saved == ["checkpoint-12", "checkpoint-6"]
    assert all((out / "checkpoints" / name / "moot-complete.json").is_file() for name in saved)
    card = ModelCard.load(out / "adapter" / "README.md")
    assert {"dpo", "moot-dpo", "lora"} <= set(card.data.tags)
    assert "moot DPO adapter" in card.text and "| DPO loss, beta | sigmoid, 0.5 |" in card.text
    assert "| train preference pairs | 12 |" in card.text
    again = run_moot("train", "dpo", "--config", run["config"], env=ENV)
    assert again.returncode == 0, again.stderr
    assert "already trained" in again.stdout
    merged = tmp_path / "merged"
    merging = run_moot("train", "merge", "--adapter", out / "adapter", "--out", merged, env=ENV)
    assert merging.returncode == 0, merging.stderr
    assert (merged / "model.safetensors").is_file()
    assert not (merged / "adapter_config.json").exists()


def test_full_weight_dpo_writes_a_whole_model_and_resumes_from_its_last_checkpoint(
    run, tmp_path, capsys
):
    """Every weight trained against trl's reference, a copy of the start; then a kill after
    checkpoint-2 (what it leaves: no checkpoint-4, no model/, no manifest), resumed; last, a
    max_length every prompt fills, refused (trl would drop every pair). In process
    (`moot.train.dpo`, the command's own parser and guarantees): a new process would spend ~2 s
    a run importing trl."""
    from safetensors.torch import load_file

    import moot

    out, model = tmp_path / "full", tmp_path / "full" / "model"
    overrides = [f"model.base={run['base']}", f"training.output_dir={out}"]
    overrides += ["training.method=full", "training.learning_rate=1e-2", "training.max_steps=4"]
    overrides += ["training.save_steps=2", "training.logging_steps=1"]
    done = moot.train.dpo(config=run["config"], overrides=overrides)
    assert done.lines[0].startswith(f"model    {model}\n") and not (out / "adapter").exists()
    assert (model / "model.safetensors").is_file() and (model / "config.json").is_file()
    assert not (model / "adapter_config.json").exists()  # a whole model, not an adapter
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["trainer"], manifest["method"], manifest["steps"]) == ("dpo", "full", 4)
    assert manifest["base"] == str(run["base"])
    parameters = manifest["trainable_parameters"]
    assert parameters["trainable"] == parameters["total"]
    card = ModelCard.load(model / "README.md")
    assert card.data.library_name == "transformers" and "lora" not in card.data.tags
    assert "the starting model, a frozen copy" in card.text and "| method | full |" in card.text
    steps = [e for e in manifest["log_history"] if "loss" in e]
    # step 1 is measured before any update: the policy is its reference, a copy of the start;
    # by step 4 the policy has moved and the reference has not
    assert (steps[0]["rewards/chosen"], steps[0]["rewards/rejected"]) == (0.0, 0.0)
    assert steps[-1]["rewards/margins"] > 0
    losses = [e["loss"] for e in steps]
    assert manifest["losses"]["train_loss"] == pytest.approx(sum(losses) / 4, abs=1e-6)
    finished = load_file(model / "model.safetensors")

    shutil.rmtree(out / "checkpoints" / "checkpoint-4")
    shutil.rmtree(model)
    (out / "manifest.json").unlink()
    capsys.readouterr()
    moot.train.dpo(config=run["config"], overrides=overrides)
    assert "resuming from checkpoint-2\n" in capsys.readouterr().out
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["steps"] == 4 and manifest["method"] == "full"
    # the trainer's loss is that of the steps this call trained: 3 and 4, not 1 to 4
    assert manifest["losses"]["train_loss"] == pytest.approx(sum(losses[2:]) / 2, abs=1e-6)
    weights = load_file(model / "model.safetensors")
    assert weights.keys() == finished.keys()
    assert all((weights[k] == finished[k]).all() for k in finished)  # as if never interrupted

    # a max_length every prompt fills: trl would drop every pair and train on nothing
    short = [overrides[0], f"training.output_dir={tmp_path / 'short'}", "data.max_length=8"]
    with pytest.raises(InputError) as refused:
        moot.train.dpo(config=run["config"], overrides=short)
    said = "every pair's prompt alone fills data.max_length 8 tokens"
    assert str(refused.value) == f"{run['train']}: {said}"
    assert not (tmp_path / "short" / "manifest.json").exists()
    assert not list((tmp_path / "short").glob("checkpoints/*"))  # the trainer's empty folder


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"prompt": "should we ban zoos ?", "chosen": "yes"}, "no 'rejected'"),
        ({"prompt": "should we ban zoos ?", "chosen": "yes", "rejected": "yes"}, "the same"),
        (
            {"prompt": [{"role": "assistant", "content": "hi"}], "chosen": "a", "rejected": "b"},
            "'prompt' must end with a user turn",
        ),
    ],
)
def test_a_bad_preference_record_is_refused_in_one_line_with_exit_2(run, tmp_path, record, problem):
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps(pairs(["zoos"])[0]) + "\n" + json.dumps(record) + "\n")
    out = tmp_path / "refused"
    overrides = [f"data.train={data}", f"training.output_dir={out}"]
    done = run_moot("train", "dpo", "--config", run["config"], *overrides, env=ENV)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(data) in done.stderr and "line 2" in done.stderr and problem in done.stderr
    assert not (out / "manifest.json").exists() and not (out / "checkpoints").exists()
