"""`moot train sft` and `moot train merge` end to end: example config, merge, generate, resume."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from tests.cli.helpers import (
    TOKEN,
    assert_no_token,
    hub_env,
    local_files,
    moot_env,
    popen_moot,
    run_moot,
)
from tests.hub_server import ScriptedHub

pytestmark = pytest.mark.slow  # torch, peft and tens of training steps per test

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train-tiny.yaml"
DATA = ROOT / "examples" / "sft-tiny.jsonl"
ENV = moot_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")


def train(out: Path, *overrides: str, env: dict[str, str] = ENV, **options):
    args = ["train", "sft", "--config", EXAMPLE, f"data.train={DATA}"]
    return run_moot(*args, f"training.output_dir={out}", *overrides, env=env, **options)


def test_example_trains_merges_and_generates(tmp_path):
    run, merged = tmp_path / "run", tmp_path / "merged"
    # logged to TensorBoard (offline, into the run folder) and evaluated every 10 steps, and both
    # pushed to the scripted Hub (tests/cli/test_hub.py): the example's one training run serves
    # those asserts too
    tracking = ["training.report_to=[tensorboard]", f"data.eval={DATA}", "training.eval_steps=10"]
    with ScriptedHub(TOKEN) as hub:
        env = hub_env(hub, tmp_path, OMP_NUM_THREADS="1")
        result = train(run, *tracking, "--push-to-hub", "me/adapter", env=env)
        assert result.returncode == 0, result.stderr
        assert "train: 12 samples, 1629 tokens" in result.stdout
        assert "trained 30 steps (10.00 epochs) on 1 process(es)" in result.stdout
        args = ("--adapter", run / "adapter", "--out", merged, "--push-to-hub", "me/merged")
        merging = run_moot("train", "merge", *args, "--hub-private", env=env)
    assert merging.returncode == 0, merging.stderr
    assert_tensorboard_has_the_trainers_log(run)
    assert (merged / "model.safetensors").is_file()
    assert not (merged / "adapter_config.json").exists()  # a plain model, no peft needed
    assert json.loads((merged / "manifest.json").read_text())["kind"] == "merged-model"
    for done, repo, folder in (
        (result, "me/adapter", run / "adapter"),
        (merging, "me/merged", merged),
    ):
        assert_no_token(done.stdout, done.stderr, *local_files(folder).values())
        assert hub.repo(repo, "model").files == local_files(folder)  # every file, byte for byte
    assert hub.repo("me/merged", "model").private
    # the cards: peft's template card replaced by moot's, naming base, data and sizes
    manifest = json.loads((run / "manifest.json").read_text())
    adapter = ModelCard.load(run / "adapter" / "README.md")
    data = adapter.data.to_dict()
    assert data["library_name"] == "peft" and {"moot", "lora"} <= set(data["tags"])
    assert "base_model" not in data and "datasets" not in data  # local files have no Hub id
    assert data["license"] == "unknown"  # its data has no card that states one
    trainable = manifest["trainable_parameters"]["trainable"]
    assert f"| trainable parameters | {trainable} |" in adapter.text
    assert "sft-tiny.jsonl`: licence not known (no moot card)" in adapter.text
    assert "Model Card for Model ID" not in adapter.text
    card = ModelCard.load(merged / "README.md")
    assert card.data.library_name == "transformers" and "merged" in card.data.tags
    topics = tmp_path / "topics.jsonl"
    topic = {
        "topic": "Should zoos be banned?",
        "Affirmative": {"arguments": ["Captivity harms animals"]},
        "Negative": {"arguments": ["Zoos fund conservation"]},
    }
    topics.write_text(json.dumps(topic) + "\n")
    out = tmp_path / "responses.json"
    args = ["--dataset", topics, "--model", merged, "--out", out, "--max-tokens", "12", "--quiet"]
    result = run_moot("generate", *args, env=ENV)
    assert result.returncode == 0, result.stderr
    responses = json.loads(out.read_text())
    assert [r["side"] for r in responses] == ["affirmative", "negative"]
    assert all(r["raw_output"] for r in responses)


def assert_tensorboard_has_the_trainers_log(run: Path) -> None:
    """The event file in OUT/logs holds every loss the trainer logged, at its step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    history = json.loads((run / "manifest.json").read_text())["log_history"]
    assert list((run / "logs").glob("events.out.tfevents.*"))  # the final evaluation adds one
    board = EventAccumulator(str(run / "logs"))  # every event file in the folder, in order
    board.Reload()
    for tag, key in (("train/loss", "loss"), ("eval/loss", "eval_loss")):
        logged = [(entry["step"], entry[key]) for entry in history if key in entry]
        shown = [(event.step, event.value) for event in board.Scalars(tag)]
        assert [step for step, _ in shown] == [step for step, _ in logged], tag
        assert [value for _, value in shown] == pytest.approx([v for _, v in logged], rel=1e-6)
    assert [event.step for event in board.Scalars("train/loss")] == [5, 10, 15, 20, 25, 30]
    assert [event.step for event in board.Scalars("eval/loss")] == [10, 20, 30, 30]  # + final


def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    run = tmp_path / "run"
    # 30 steps, a checkpoint every 10: the kill lands after the first whole one, 20 steps before
    # the end (the poll below is every 50 ms); more steps only lengthened the resumed run
    overrides = ["training.epochs=10", "training.save_steps=10", "training.save_total_limit=1"]
    args = ["train", "sft", "--config", EXAMPLE, f"data.train={DATA}"]
    process = popen_moot(*args, f"training.output_dir={run}", *overrides, env=ENV)
    # a guard against a hang, not a speed limit: on 2 cores at load 18 a fresh interpreter took
    # over 120 s to import torch and reach its first checkpoint
    deadline = time.monotonic() + 600
    while not list((run / "checkpoints").glob("checkpoint-*/moot-complete.json")):  # whole
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (run / "manifest.json").exists()
    result = train(run, *overrides)
    assert result.returncode == 0, result.stderr
    assert "resuming from checkpoint-" in result.stdout
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["steps"] == 30 and manifest["epochs"] == 10


def test_a_run_killed_mid_save_resumes_from_its_last_complete_checkpoint(tmp_path):
    from safetensors.torch import load_file

    run = tmp_path / "run"
    # 12 steps (3 a epoch), a checkpoint every 4: the fewest that leave one whole checkpoint, one
    # torn one and one after it
    overrides = ["training.epochs=4", "training.save_steps=4", "training.save_total_limit=3"]
    assert train(run, *overrides).returncode == 0
    finished = load_file(run / "adapter" / "adapter_model.safetensors")
    # What a kill while checkpoint-8 was being saved leaves: checkpoint-4 whole, checkpoint-8
    # with half its weights and nothing after them (no completion mark), no checkpoint-12, no
    # weights, no manifest
    checkpoints = run / "checkpoints"
    shutil.rmtree(checkpoints / "checkpoint-12")
    shutil.rmtree(run / "adapter")
    (run / "manifest.json").unlink()
    torn = checkpoints / "checkpoint-8"
    weights = torn / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    for name in ["optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json"]:
        (torn / name).unlink()
    (torn / "moot-complete.json").unlink(missing_ok=True)
    result = train(run, *overrides)
    assert result.returncode == 0, result.stderr
    assert (
        "checkpoint-8 is incomplete (a kill cut its save or deletion short): deleted"
        in result.stdout
    )
    assert "resuming from checkpoint-4" in result.stdout
    assert (torn / "trainer_state.json").is_file() and (torn / "moot-complete.json").is_file()
    assert json.loads((run / "manifest.json").read_text())["steps"] == 12
    resumed = load_file(run / "adapter" / "adapter_model.safetensors")
    assert resumed.keys() == finished.keys()
    assert all((resumed[k] == finished[k]).all() for k in finished)  # as if never interrupted
