"""`moot train sft|dpo|merge`, `moot data mix` refuse a bad config or bad data before heavy imports.

Each case runs moot in a fresh interpreter with its import log on (``PYTHONPROFILEIMPORTTIME``),
so the test sees both the one error line and every module the refusal loaded: none of torch,
transformers, trl, peft, accelerate or datasets (seconds of imports, tens under load).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import moot_env, run_fresh_moot

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train-tiny.yaml"
DATA = ROOT / "examples" / "sft-tiny.jsonl"
HEAVY = {"torch", "transformers", "trl", "peft", "accelerate", "datasets"}
COLUMNS = json.dumps({"question": "q", "answer": "a"}) + "\n"  # no SFT columns


def refusal(tmp_path: Path, *args: object) -> tuple[str, set[str]]:
    """Run moot fresh; check it exits 2 with one line; that line and the modules it imported."""
    env = moot_env(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPROFILEIMPORTTIME="1")
    result = run_fresh_moot(*args, env=env)
    lines = result.stderr.splitlines()
    log = [line for line in lines if line.startswith("import time:")]
    said = [line for line in lines if not line.startswith("import time:")]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(said) == 1 and said[0].startswith("moot: error: "), said
    return said[0], {line.rsplit("|", 1)[1].strip().split(".")[0] for line in log}


def train(tmp_path: Path, *extra: object) -> list[object]:
    out = f"training.output_dir={tmp_path / 'run'}"
    return ["train", "sft", "--config", EXAMPLE, f"data.train={DATA}", out, *extra]


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("learnin_rate", "learning_rate"),  # one of moot's keys
        ("neftune_noise_alfa", "neftune_noise_alpha"),  # a field of trl's SFTConfig
    ],
)
def test_a_config_typo_is_one_line_before_heavy_imports(
    tmp_path: Path, key: str, meant: str
) -> None:
    line, modules = refusal(tmp_path, *train(tmp_path, f"training.{key}=1e-3"))
    assert line == (
        f"moot: error: {EXAMPLE}: training.{key}: unknown key (did you mean {meant!r}?)"
    )
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        # a tracker whose package is missing: neptune is no moot dependency, dev or not
        (
            "training.report_to=[tensorboard, neptune]",
            "training.report_to: neptune needs the neptune package, which is not installed "
            "(pip install neptune)",
        ),
        ("training.eval_steps=0", "training.eval_steps: must be greater than 0, got 0"),
    ],
)
def test_a_bad_trainer_option_is_one_line_before_heavy_imports(
    tmp_path: Path, override: str, problem: str
) -> None:
    line, modules = refusal(tmp_path, *train(tmp_path, override))
    assert line == f"moot: error: {EXAMPLE}: {problem}"
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()


def test_an_eval_schedule_without_eval_data_is_refused_before_heavy_imports(
    tmp_path: Path,
) -> None:
    line, modules = refusal(tmp_path, *train(tmp_path, "training.eval_steps=5"))
    assert line == (
        "moot: error: training.eval_strategy and eval_steps need eval data: set data.eval, or "
        "train on a moot data mix folder with an eval split"
    )
    assert not modules & HEAVY


def test_launch_flags_without_launch_are_one_line(tmp_path: Path) -> None:
    line, modules = refusal(tmp_path, *train(tmp_path, "--num-processes", 2, "--machine-rank", 3))
    assert "--num-processes, --machine-rank need --launch" in line
    assert not modules & HEAVY


@pytest.mark.parametrize(
    ("where", "text", "problem"),
    [
        ("data.train", "", "file is empty"),
        ("data.train", COLUMNS, "line 1: no recognised columns (found 'question', 'answer'"),
        ("data.eval", COLUMNS, "line 1: no recognised columns"),
        ("--launch", COLUMNS, "line 1: no recognised columns"),  # before any worker starts
    ],
)
def test_bad_data_is_refused_before_heavy_imports(
    tmp_path: Path, where: str, text: str, problem: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    args = train(tmp_path, f"data.train={bad}" if where == "--launch" else f"{where}={bad}")
    if where == "--launch":
        args[2:2] = ["--launch", "ddp"]
    line, modules = refusal(tmp_path, *args)
    assert line.startswith(f"moot: error: {bad}") and problem in line, line
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()  # nothing claimed, nothing half-written


def test_an_output_dir_in_the_base_or_the_data_is_refused_before_heavy_imports(
    tmp_path: Path,
) -> None:
    """A run folder inside the SFT adapter DPO starts from (where its merge would go) is refused
    as the folder, not as the merge's --out an hour in; likewise the data's folder."""
    adapter = tmp_path / "sft" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}", encoding="utf-8")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
    args = ["train", "dpo", "--config", EXAMPLE, f"data.train={pairs}", f"model.base={adapter}"]
    line, modules = refusal(tmp_path, *args, "model.init=null", f"training.output_dir={adapter}/x")
    assert line == (
        f"moot: error: training.output_dir {adapter}/x lies inside an input ({adapter}): "
        "choose another folder"
    )
    assert not modules & HEAVY
    data = tmp_path / "data"  # a folder with dataset.jsonl, as `moot debate` writes it
    data.mkdir()
    (data / "dataset.jsonl").write_bytes(DATA.read_bytes())
    line, _ = refusal(
        tmp_path, *train(tmp_path, f"data.train={data}", f"training.output_dir={data}/run")
    )
    assert line == (
        f"moot: error: training.output_dir {data}/run lies inside an input ({data}): choose "
        "another folder"
    )
    assert not (adapter / "x").exists() and not (data / "run").exists()


def test_a_bad_preference_record_is_refused_before_heavy_imports(tmp_path: Path) -> None:
    bad = tmp_path / "pairs.jsonl"
    bad.write_text(json.dumps({"prompt": "p", "chosen": "a"}) + "\n")
    base = tmp_path / "base"
    base.mkdir()
    args = ["train", "dpo", "--config", EXAMPLE, f"data.train={bad}", f"model.base={base}"]
    args += ["model.init=null", f"training.output_dir={tmp_path / 'run'}", "--launch", "ddp"]
    line, modules = refusal(tmp_path, *args)
    said = "no 'rejected' (a preference record is {prompt, chosen, rejected})"
    assert line == f"moot: error: {bad}, line 1: {said}", line
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("base", "problem"),
    [
        ("meta-llama/Llama-2-7b-hf", "not a local folder, and not in the Hugging Face cache"),
        ("./models/no-such-model", "no such folder"),
    ],
)
def test_a_base_model_not_on_this_machine_is_refused_before_heavy_imports(
    tmp_path: Path, base: str, problem: str
) -> None:
    line, modules = refusal(tmp_path, *train(tmp_path, "model.init=null", f"model.base={base}"))
    assert line == f"moot: error: cannot load model {base!r}: {problem}" + (
        " (HF_HUB_OFFLINE=1)" if "cache" in problem else ""
    )
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()


def test_mix_refuses_bad_data_before_importing_datasets(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(COLUMNS)
    line, modules = refusal(tmp_path, "data", "mix", "--in", DATA, bad, "--out", tmp_path / "o")
    assert line.startswith(f"moot: error: {bad}, line 1: no recognised columns"), line
    assert not modules & HEAVY
    assert not (tmp_path / "o").exists()


def test_merge_refuses_a_folder_that_is_no_adapter_before_heavy_imports(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    line, modules = refusal(
        tmp_path, "train", "merge", "--adapter", tmp_path / "notes", "--out", tmp_path / "m"
    )
    assert "not a LoRA adapter folder" in line
    assert not modules & HEAVY


def test_an_output_dir_of_another_command_or_of_other_files_is_refused_before_heavy_imports(
    tmp_path: Path,
) -> None:
    """training.output_dir is held as every command's --out: owner, lock, mark (it was not)."""
    theirs = tmp_path / "run"
    (theirs / ".moot").mkdir(parents=True)
    (theirs / ".moot" / "owner.json").write_text('{"command": "moot judge"}', encoding="utf-8")
    line, modules = refusal(tmp_path, *train(tmp_path))
    assert line == (
        f"moot: error: training.output_dir {theirs} belongs to `moot judge`, not "
        "`moot train sft`: choose another folder"
    )
    (theirs / ".moot" / "owner.json").unlink()
    (theirs / "notes.txt").write_text("mine", encoding="utf-8")
    line, _ = refusal(tmp_path, *train(tmp_path))
    assert line.endswith("holds files moot did not make; choose a new or empty folder")
    assert not modules & HEAVY
    assert sorted(p.name for p in theirs.rglob("*")) == [".moot", "notes.txt"]


def test_dpo_settings_trl_refuses_only_once_the_model_is_loaded_are_refused_before_heavy_imports(
    tmp_path: Path,
) -> None:
    """Chat pairs (what `moot data preferences` writes) over a base whose tokenizer has no chat
    template were trl's traceback after the model loaded, leaving the folder claimed; likewise
    exo_pair with label_smoothing 0."""
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    (base / "tokenizer_config.json").write_text('{"eos_token": "</s>"}', encoding="utf-8")
    pairs = tmp_path / "pairs.jsonl"
    prompt = [{"role": "user", "content": "Ban zoos?"}]
    pairs.write_text(json.dumps({"prompt": prompt, "chosen": "Yes.", "rejected": "No."}) + "\n")
    args = ["train", "dpo", "--config", EXAMPLE, f"data.train={pairs}", f"model.base={base}"]
    args += ["model.init=null", "model.chat_template=null", f"training.output_dir={tmp_path}/run"]
    line, modules = refusal(tmp_path, *args)
    assert line == (
        f"moot: error: {pairs}: the pairs are chat messages and {base}'s tokenizer has no chat "
        "template: set model.chat_template"
    )
    assert not modules & HEAVY
    line, modules = refusal(tmp_path, *args, "dpo.loss_type=exo_pair")
    assert line == (
        f"moot: error: {EXAMPLE}: dpo.label_smoothing: the exo_pair loss needs a value above 0 "
        "(EXO's paper suggests 1e-3)"
    )
    assert not modules & HEAVY
    assert not (tmp_path / "run").exists()  # nothing claimed
