"""What the model layer does with hostile replies, through the CLI: empty replies, retries made
visible, a reply that drips past the deadline, a lone surrogate in a reply."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import read_jsonl, run_moot
from tests.cli.test_judge import SCORE, judge_args, real_debates

pytestmark = pytest.mark.subprocess


def questions(tmp_path: Path, count: int = 2) -> Path:
    path = tmp_path / "questions.jsonl"
    rows = [
        {"id": f"q{i}", "question": f"Is universal basic income good ({i})?"} for i in range(count)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def answer(server: ScriptedServer, tmp_path: Path, out: Path, *extra: object):
    return run_moot(
        "answer", "--questions", questions(tmp_path), "--out", out, "--model", "openai/scripted",
        "--api-base", server.url, "--max-retries", 0, *extra,
    )  # fmt: skip


@pytest.mark.parametrize("empty", ["", "  \n"], ids=["empty", "whitespace"])
def test_an_empty_reply_is_a_failed_call_in_judge_answer_and_generate(tmp_path, empty):
    debates, records = real_debates(tmp_path, 1)
    winner = Rule('"winner"', json.dumps({"winner": records[0]["pro"][0]}))
    topic = {
        "topic": "Zoos?",
        "Affirmative": {"arguments": ["A1"]},
        "Negative": {"arguments": ["N1"]},
    }
    (tmp_path / "topics.jsonl").write_text(json.dumps(topic) + "\n")
    generate = ["generate", "--dataset", tmp_path / "topics.jsonl", "--model", "openai/m",
                "--out", tmp_path / "responses.json", "--max-retries", 0]  # fmt: skip
    with ScriptedServer(rules=[Rule(".", empty)]) as server:
        judged = run_moot(*judge_args(server, debates, tmp_path / "judge"))
        server.clear_log()
        answered = answer(server, tmp_path, tmp_path / "answer", "--max-retries", 1)
        asked = [json.dumps(r.body["messages"]) for r in server.requests]
        generated = run_moot(*generate, "--api-base", server.url)
    assert judged.returncode == 1 and "1 of 1 judgments failed" in judged.stderr
    (judgment,) = read_jsonl(tmp_path / "judge" / "judgments.jsonl")
    assert judgment["status"] == "error" and "empty reply" in judgment["reason"]
    assert answered.returncode == 1 and "2 of 2 questions failed" in answered.stderr
    answers = read_jsonl(tmp_path / "answer" / "answers.jsonl")
    assert [a["status"] for a in answers] == ["error", "error"] and "answer" not in answers[0]
    assert "empty reply" in answers[0]["error"] and "after 2 attempts" in answers[0]["error"]
    assert len(asked) == 4 and len(set(asked)) == 2  # each question asked twice: one retry
    assert generated.returncode == 1 and not (tmp_path / "responses.json").exists()

    with ScriptedServer(rules=[SCORE, winner, Rule(".", "A real reply.")]) as server:
        judged = run_moot(*judge_args(server, debates, tmp_path / "judge"))
        answered = answer(server, tmp_path, tmp_path / "answer")
        generated = run_moot(*generate, "--api-base", server.url)
    assert judged.returncode == 0, judged.stderr
    assert read_jsonl(tmp_path / "judge" / "judgments.jsonl")[0]["status"] == "complete"
    assert answered.returncode == 0, answered.stderr
    answers = read_jsonl(tmp_path / "answer" / "answers.jsonl")
    assert [a["answer"] for a in answers] == ["A real reply."] * 2
    assert generated.returncode == 0, generated.stderr
    responses = json.loads((tmp_path / "responses.json").read_text())
    assert [r["response"] for r in responses] == ["A real reply."] * 2


def test_retries_are_logged_with_verbose_counted_and_shown(tmp_path):
    with ScriptedServer(rules=[Rule(".", "Fine.")]) as server:
        server.add_fault(Fault("500", times=1, match=r"\(1\)"))
        verbose = answer(server, tmp_path, tmp_path / "a", "--max-retries", 2, "--verbose")
        server.add_fault(Fault("500", times=1, match=r"\(1\)"))
        quiet = answer(server, tmp_path, tmp_path / "b", "--max-retries", 2, "--no-cache")
    assert verbose.returncode == 0, verbose.stderr
    (line,) = [x for x in verbose.stderr.splitlines() if "retry" in x]
    assert re.fullmatch(
        r"moot: answerer/plain \(openai/scripted\): retry 1 of 2 in \d+\.\d s after HTTP 500 from "
        r"http://127\.0\.0\.1:\d+/v1: The server had an error while processing your request\.",
        line,
    ), line
    assert quiet.returncode == 0 and "retry" not in quiet.stderr
    for result, out in ((verbose, "a"), (quiet, "b")):
        assert "1 retries" in result.stdout  # the summary's total line
        assert re.search(
            r"answerer +plain +openai/scripted +2 +0 +1 ", result.stdout
        )  # calls, cached, retries
        summary = json.loads((tmp_path / out / "summary.json").read_text())
        assert summary["ledger"]["total"]["retries"] == 1


def test_timeout_is_a_deadline_for_a_reply_that_drips(tmp_path):
    # a reply of about 350 bytes, one each 0.1 s: each read is quick, the whole takes 35 s
    with ScriptedServer(rules=[Rule(".", "Fine.")]) as server:
        server.add_fault(Fault("drip", times=2, match=r"\(0\)", drip_seconds=0.1))
        start = time.monotonic()
        first = answer(server, tmp_path, tmp_path / "out", "--timeout", 1, "--max-retries", 1)
        elapsed = time.monotonic() - start
        failed = read_jsonl(tmp_path / "out" / "answers.jsonl")[0]
        again = answer(server, tmp_path, tmp_path / "out", "--timeout", 1)
    assert first.returncode == 1 and "1 of 2 questions failed" in first.stderr
    # two attempts of 1 s and a wait of at most 1 s, not minutes (the process's start aside)
    seconds = float(re.search(r"questions +2 +0 +1 +1 +(\S+)", first.stdout)[1])
    assert seconds < 4.5 and elapsed < 20, (seconds, elapsed)
    assert failed["status"] == "error" and "timed out after 1s (gave up after 2" in failed["error"]
    assert again.returncode == 0, again.stderr  # the drip is over: the rerun finishes it


def test_a_lone_surrogate_in_a_reply_is_stored_as_a_replacement_character(tmp_path):
    with ScriptedServer(rules=[Rule(".", "Fine \ud800 answer.")]) as server:
        first = answer(server, tmp_path, tmp_path / "a")
        server.clear_log()
        other = answer(server, tmp_path, tmp_path / "b")  # another folder, the same cache
        assert server.requests == []  # served from the cache: nothing paid twice
    assert first.returncode == 0, first.stderr
    assert other.returncode == 0, other.stderr
    for out in ("a", "b"):
        answers = read_jsonl(tmp_path / out / "answers.jsonl")
        assert [a["answer"] for a in answers] == ["Fine \ufffd answer."] * 2
    cache = next((tmp_path / "moot-cache").glob("*.sqlite"))
    values = [
        json.loads(v) for (v,) in sqlite3.connect(cache).execute("SELECT value FROM responses")
    ]
    assert {v["text"] for v in values} == {"Fine \ufffd answer."}
