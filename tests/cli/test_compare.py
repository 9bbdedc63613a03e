"""`moot compare` end to end: the real CLI in a subprocess, CompQA questions, scripted server."""

from __future__ import annotations

import json

import pytest

from moot.core.data.compqa import load_comparisons
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import read_jsonl, run_moot
from tests.conftest import shared_data

pytestmark = pytest.mark.subprocess

ANSWER = "Summary: both are fine.\nMain Aspects of Comparison:\n- Cost: equal.\nBest Option: Tea"


def questions(tmp_path, count):
    lines = shared_data("compqa", "derived_questions.jsonl").read_text().splitlines()[:count]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def compare(server, *args):
    return run_moot(
        "compare",
        *args,
        *("--model", "openai/scripted", "--api-base", server.url, "--max-retries", 0),
    )


def test_scenario_3_writes_the_answer_file_and_reruns_free(tmp_path):
    path, out = questions(tmp_path, 3), tmp_path / "out"
    with ScriptedServer(rules=[Rule("the best option", ANSWER)]) as server:
        result = compare(server, "--questions", path, "--out", out, "--scenario", 3, "--no-cache")
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 3
        assert "3/3 answered (scenario 3, scripted)" in result.stdout
        answers = load_comparisons(out / "scripted_scenario_3.json")
        assert [(a.object1, a.scenario, a.text) for a in answers] == [
            ("baseball", 3, ANSWER),
            ("basketball", 3, ANSWER),
            ("ASP", 3, ANSWER),
        ]
        assert answers[2].record["aspect"] == ""  # none, as in CompQA's files
        # the paper's "standard configuration and parameters" (Section 3): no sampling settings
        assert all("temperature" not in r.body and "top_p" not in r.body for r in server.requests)
        server.clear_log()
        again = compare(server, "--questions", path, "--out", out, "--scenario", 3, "--no-cache")
        assert again.returncode == 0 and server.requests == []
        hot = compare(
            server,
            "--questions",
            path,
            "--out",
            tmp_path / "hot",
            "--scenario",
            3,
            "--temperature",
            0.5,
            "--no-cache",
            "--limit",
            1,
        )
        assert hot.returncode == 0, hot.stderr
        assert [r.body["temperature"] for r in server.requests] == [0.5]


def test_questions_without_arguments_are_reported_and_exit_1(tmp_path):
    path, out = questions(tmp_path, 2), tmp_path / "out"
    arguments = tmp_path / "arguments.jsonl"
    record = {
        "object1": "basketball",
        "object2": "volleyball",
        "aspect": "number of spectators",
        "arguments": {"basketball": ["The NBA is watched worldwide."], "volleyball": []},
    }
    arguments.write_text(json.dumps(record) + "\n")
    with ScriptedServer(rules=[Rule("Compare", "Basketball draws more spectators.")]) as server:
        result = compare(
            server, "--questions", path, "--out", out, "--scenario", 2, "--arguments", arguments
        )
        assert result.returncode == 1
        assert "moot: no arguments for question 0 (baseball vs softball, most played sport)" in (
            result.stderr
        )
        assert len(server.requests) == 1
        assert [r["status"] for r in read_jsonl(out / "answers.jsonl")] == ["no_arguments", "ok"]
        (answer,) = load_comparisons(out / "scripted_scenario_2.json")
        assert answer.object1 == "basketball"


def test_bad_input_and_bad_options_exit_2_with_one_line(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(
        '{"object1": "tea", "object2": "coffee"}\n{"object1": "tea", "object2": "Tea"}\n'
    )
    result = run_moot("compare", "--questions", path, "--out", tmp_path / "o", "--scenario", 1)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"moot: error: {path}, line 2: object1 and object2 are the same ('tea')"
    ]
    wrong = run_moot(
        "compare",
        *("--questions", path, "--out", tmp_path / "o", "--scenario", 3, "--generate-arguments"),
    )
    assert wrong.returncode == 2
    assert wrong.stderr.splitlines() == [
        "moot: error: scenario 3 uses no arguments: drop --arguments/--generate-arguments"
    ]
    assert not (tmp_path / "o").exists()
