"""`moot eval compqa` end to end: real CompQA answers against the scripted server; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.data.compqa import MAXIMA, load_judged
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import run_moot
from tests.conftest import shared_data

pytestmark = pytest.mark.subprocess

SCORES = json.dumps({str(n): MAXIMA[n] for n in MAXIMA} | {"15": 0})  # 18


def real_answers(folder: Path) -> list[Path]:
    """Two GPT-4 answers and one Perplexity answer from CompQA, under their own file names."""
    paths = []
    for name, count in (("gpt4_scenario_1.json", 2), ("perplexity_scenario_3.json", 1)):
        source = shared_data("compqa", "raw_summaries", name)
        answers = json.loads(source.read_text(encoding="utf-8"))[:count]
        paths.append(folder / name)
        paths[-1].write_text(json.dumps(answers), encoding="utf-8")
    return paths


def test_judges_real_answers_and_a_rerun_costs_nothing(tmp_path):
    paths, out = real_answers(tmp_path), tmp_path / "out"
    args = ["eval", "compqa", "--answers", *paths, "--out", out, "--shots", "1"]
    with ScriptedServer(rules=[Rule(pattern="Comparative answer", reply=SCORES)]) as server:
        judge = ["--judge", "openai/judge", "--api-base", server.url, "--max-retries", 0]
        result = run_moot(*args, *judge)
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 3
        prompt = server.requests[0].body["messages"][1]["content"]
        assert "Example 1:" in prompt and "Example 2:" not in prompt
        assert "| **overall** | 3 | 3 | 0 | 0 | 0 | 0 | 18.000 ± 0.000 |" in result.stdout
        server.clear_log()
        rerun = run_moot(*args, *judge)
        assert rerun.returncode == 0, rerun.stderr
        assert server.requests == []
    judged = load_judged(out / "judged" / "gpt4_scenario_1.json")
    assert [(j.status, j.total, j.answer.generator) for j in judged] == [("ok", 18.0, "gpt4")] * 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["files"]["perplexity_scenario_3.json"]["scenario"] == 3
    assert summary["shots"] == 1 and summary["judge"] == "openai/judge"


def test_a_judge_whose_every_judgment_is_invalid_exits_1(tmp_path):
    paths, out = real_answers(tmp_path)[:1], tmp_path / "out"
    with ScriptedServer() as server:  # prose, never a score dict
        judge = ["--judge", "openai/judge", "--api-base", server.url, "--quiet"]
        result = run_moot("eval", "compqa", "--answers", *paths, "--out", out, *judge)
    assert result.returncode == 1 and "not one judge reply could be read" in result.stderr
    judged = load_judged(out / "judged" / "gpt4_scenario_1.json")
    assert [j.status for j in judged] == ["invalid", "invalid"]


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "mine_scenario_1.json"
    bad.write_text(json.dumps([{"object1": "tea", "comparison": "Tea wins."}]), encoding="utf-8")
    judge = ["--judge", "openai/judge", "--api-base", "http://127.0.0.1:9/v1"]
    result = run_moot("eval", "compqa", "--answers", bad, "--out", tmp_path / "o", *judge)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert str(bad) in result.stderr and "index 0" in result.stderr and "object2" in result.stderr

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "x.json").write_text("[]", encoding="utf-8")
    twins = [tmp_path / "a" / "x.json", tmp_path / "b" / "x.json"]
    result = run_moot("eval", "compqa", "--answers", *twins, "--out", tmp_path / "o", *judge)
    assert result.returncode == 2
    assert result.stderr.startswith("moot: error: --answers ") and "'x.json'" in result.stderr
    assert result.stderr.strip().count("\n") == 0 and not (tmp_path / "o").exists()
