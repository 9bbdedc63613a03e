"""`moot data distill-compqa` and `moot data mix` end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from moot.cli import main
from tests.cli.helpers import moot_env, read_jsonl, run_moot
from tests.conftest import shared_data

ENV = moot_env(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


def assert_clean_failure(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moot: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def judged(path: Path, scores: list[object]) -> Path:
    answers = [
        {"object1": "A", "object2": "B", "aspect": "", "comparison": f"Answer {i}."}
        | {"score_dict": None, "score": score}
        for i, score in enumerate(scores)
    ]
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


@pytest.mark.subprocess
def test_distill_real_files_then_mix(tmp_path: Path) -> None:
    files = sorted(shared_data("compqa", "evaluated_summaries", "gpt-4").glob("*.json"))
    out = tmp_path / "compqa"
    result = run_moot("data", "distill-compqa", "--judged", *files, "--out", out, env=ENV)
    assert result.returncode == 0, result.stderr
    table = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()}
    assert table["gpt4"] == ["600", "370"] and table["cam"] == ["50", "0"]
    assert table["total"] == ["2158", "1056"]
    assert "wrote 1056 records" in result.stdout and "1 duplicate(s) dropped" in result.stdout
    assert "1 invalid or failed judgment(s) skipped" in result.stderr  # C5 = C6 = 2
    assert {p.name for p in out.iterdir()} == {
        "dataset.jsonl",
        "dataset",
        "manifest.json",
        "README.md",
        ".moot",  # its owner mark
    }

    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"prompt": "Hi?", "completion": "Hello."}) + "\n", encoding="utf-8")
    args = ("data", "mix", "--in", out, extra, "--weights", "0.5", "3", "--seed", "1")
    mixed = run_moot(*args, "--out", tmp_path / "mix", env=ENV)
    assert mixed.returncode == 0, mixed.stderr
    assert f"wrote {tmp_path / 'mix'}: " in mixed.stdout
    manifest = json.loads((tmp_path / "mix" / "manifest.json").read_text())
    rows = {i["source"]: i["train"] + i["eval"] for i in manifest["inputs"]}
    assert rows == {str(out): 528, str(extra): 3}
    train = read_jsonl(tmp_path / "mix" / "train.jsonl")
    assert {r["source"] for r in train} >= {"compqa:gpt4", str(extra)}


@pytest.mark.subprocess
def test_distill_nothing_kept_exits_1(tmp_path: Path) -> None:
    low = judged(tmp_path / "cam.json", [9, 12])
    result = run_moot("data", "distill-compqa", "--judged", low, "--out", tmp_path / "o", env=ENV)
    assert result.returncode == 1
    assert result.stderr.strip() == "moot: no answer scored >= 18; nothing written"
    assert not (tmp_path / "o").exists()


@pytest.mark.subprocess
def test_bad_judged_record_is_one_line(tmp_path: Path) -> None:
    # a malformed judgment (a score as words) is skipped and counted, not a bad file
    odd = judged(tmp_path / "gpt4_scenario_1.json", [19, "high"])
    result = run_moot("data", "distill-compqa", "--judged", odd, "--out", tmp_path / "o", env=ENV)
    assert result.returncode == 0 and "1 invalid or failed judgment(s) skipped" in result.stderr
    bad = tmp_path / "gpt4_scenario_2.json"
    bad.write_text(json.dumps([{**json.loads(odd.read_text())[0], "object2": ""}]))
    result = run_moot("data", "distill-compqa", "--judged", bad, "--out", tmp_path / "p", env=ENV)
    assert_clean_failure(result, str(bad), "index 0", "missing or empty 'object2'")
    assert not (tmp_path / "p").exists()


@pytest.mark.subprocess
def test_uncached_hub_name_exits_2(tmp_path: Path) -> None:
    result = run_moot("data", "mix", "--in", "nobody-moot/absent", "--out", tmp_path / "o", env=ENV)
    assert_clean_failure(
        result, "nobody-moot/absent: not a local file or folder, and not in the Hugging Face cache"
    )
    assert not (tmp_path / "o").exists()


BAD_MIX = {
    "columns": ('{"text": "x"}\n', ["line 1", "no recognised columns (found 'text'"]),
    "role": (
        '{"messages": [{"role": "user", "content": "u"}, {"role": "tool", "content": "t"}]}\n',
        ["line 1", "bad role 'tool'"],
    ),
    "content": (
        '{"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": "a"}]}\n',
        ["line 1", "message 0 (user): empty content"],
    ),
    "last": (
        '{"messages": [{"role": "assistant", "content": "a"}, {"role": "user", "content": "u"}]}\n',
        ["line 1", "the last turn must be the assistant's"],
    ),
    "empty": ("[]", ["no records"]),
}


@pytest.mark.parametrize("case", sorted(BAD_MIX))
def test_bad_mix_inputs_exit_2_and_write_nothing(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text, needles = BAD_MIX[case]
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "P", "completion": "C"}\n', encoding="utf-8")
    bad = tmp_path / f"{case}.jsonl"
    bad.write_text(text, encoding="utf-8")
    code = main(["data", "mix", "--in", str(good), str(bad), "--out", str(tmp_path / "o")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.startswith(f"moot: error: {bad}") and "\n" not in error
    for needle in needles:
        assert needle in error, error
    assert not (tmp_path / "o").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        (["--weights", "1", "1"], "--weights: got 2 for 1 input(s)"),
        (["--weights", "-1"], "--weights must be numbers above 0"),
        (["--eval-fraction", "1"], "--eval-fraction must be in [0, 1)"),
    ],
)
def test_bad_mix_options(
    tmp_path: Path, options: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "P", "completion": "C"}\n', encoding="utf-8")
    code = main(["data", "mix", "--in", str(good), "--out", str(tmp_path / "o"), *options])
    assert code == 2 and needle in capsys.readouterr().err
