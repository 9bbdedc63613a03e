"""Items ``--budget`` stopped, in every evaluation's ``summary.json``: counted apart, not failed.

Each test runs a command twice against the scripted server, priced by a price file whose output
tokens are free, so a call reserves exactly what it costs (its prompt): once with a budget that
lets the first `DONE` items through, then with a larger budget that finishes the rest. The first
summary counts the others as ``stopped`` (never as ``errors``) and computes every figure over the
finished items only; the second is whole, and nothing was paid twice. In process (`moot.call`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import moot
from moot.core.data.compqa import load_judged
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import stderr, stdout
from tests.cli.test_berds import berds_fixture, demo_answers, detector_subset, write_jsonl
from tests.cli.test_compare import ANSWER, questions
from tests.cli.test_eval import responses_file
from tests.cli.test_eval_compqa import SCORES, real_answers

DONE = 2  # items the first run's budget lets through (at --concurrency 1)
TEXTS = (".json", ".jsonl", ".md")


@dataclass
class Runs:
    """A run stopped by ``--budget`` and its rerun with a larger one."""

    stopped: moot.Result  # the result of each
    resumed: moot.Result
    first: dict[str, Any]  # summary.json after each
    second: dict[str, Any]
    files: dict[str, str]  # the output folder's text files after the first run, by name
    requests: int  # chat requests the server saw in all


def stop_then_finish(
    server: ScriptedServer,
    folder: Path,
    command: str,
    options: dict[str, Any],
    items: int,
    done: int = DONE,
) -> Runs:
    """Run `command` with `options` and a budget for `done` of its `items` equally priced items
    (it stops: `moot.RunStopped`), then finish.

    The budget comes from the command's own dry-run estimate (prompt tokens, as the run counts
    them): `done` items and half of the next.
    """
    prices = folder / "prices.json"
    prices.write_text(json.dumps({"openai/judge": {"input": 1000, "output": 0}}))
    options |= {"prices": prices, "cache": folder / "cache.sqlite", "concurrency": 1}
    plan = stdout(moot.call(command, **options, dry_run=True))
    total = float(re.search(r"cost about \$([\d.]+)", plan)[1])  # type: ignore[index]
    with pytest.raises(moot.RunStopped) as stopping:
        moot.call(command, **options, budget=f"{total * (done + 0.5) / items:.6f}")
    stopped = stopping.value.result
    summary = folder / "out" / "summary.json"
    first = json.loads(summary.read_text())
    out = folder / "out"
    files = {str(p.relative_to(out)): p.read_text() for p in out.rglob("*") if p.suffix in TEXTS}
    resumed = moot.call(command, **options, budget=f"{total * 10:.6f}")
    second = json.loads(summary.read_text())
    requests = sum(1 for r in server.requests if r.path == "/v1/chat/completions")
    return Runs(stopped, resumed, first, second, files, requests)


def judge(server: ScriptedServer, folder: Path, flag: str = "judge") -> dict[str, Any]:
    """The options of a command judged by ``openai/judge`` on `server` (`flag`: its option)."""
    return {"out": folder / "out", flag: "openai/judge", "api_base": server.url, "max_retries": 0}


def assert_stopped_then_finished(runs: Runs, items: int, unit: str) -> None:
    """Exit 3 then 0; no failure is invented; the rerun leaves nothing stopped."""
    assert runs.stopped.exit_code == 3, stderr(runs.stopped)
    assert f"not done: {items - DONE} of {items} {unit};" in stderr(runs.stopped)
    assert "failed" not in stderr(runs.stopped)
    assert runs.resumed.exit_code == 0, stderr(runs.resumed)
    assert runs.second["stopped"] == 0 and runs.second["errors"] == 0


def test_controllability_counts_stopped_apart_from_errors(tmp_path: Path) -> None:
    sides = ["affirmative", "negative"] * 3
    texts = [(side, f"RESPONSE-{i} is here.") for i, side in enumerate(sides)]
    responses = responses_file(tmp_path / "r.json", texts)
    # the first item fails for good (no retries); then DONE are judged, and the budget stops
    fault = Fault("500", times=1, match="RESPONSE-0 ")
    rules = [Rule(pattern="RESPONSE-[0-9]", reply="100 0")]
    with ScriptedServer(rules=rules, faults=[fault]) as server:
        options = {"responses": responses, **judge(server, tmp_path)}
        runs = stop_then_finish(
            server, tmp_path, "eval controllability", options, items=6
        )  # a failure costs nothing
    assert runs.stopped.exit_code == 3, stderr(runs.stopped)  # stopped wins over failed
    assert "moot: 1 of 6 judgments failed" in stderr(runs.stopped)
    assert "not done: 3 of 6 judgments;" in stderr(runs.stopped)
    first = runs.first
    assert (first["items"], first["errors"], first["stopped"]) == (DONE, 1, 3)
    assert first["judged"] == {"affirmative": 1, "negative": 1}  # items 1 and 2 only
    assert (first["cc_p"], first["cc_n"]) == (1.0, 0.0)
    assert "| stopped | 3 |" in runs.files["summary.md"]
    assert runs.resumed.exit_code == 0, stderr(runs.resumed)
    second = runs.second
    assert (second["items"], second["errors"], second["stopped"]) == (6, 0, 0)
    assert second["judged"] == {"affirmative": 3, "negative": 3}
    assert runs.requests == 6 + 1  # every judgment paid once, the failed one asked again


QUALITY_RULES = [
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nOURS", reply="9 5"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE", reply="5 9"),
]


def test_quality_counts_stopped_pairs_apart(tmp_path: Path) -> None:
    sides = ["affirmative", "negative"] * 2
    ours = responses_file(
        tmp_path / "ours.json", [(s, f"OURS-{i} text") for i, s in enumerate(sides)]
    )
    base = responses_file(
        tmp_path / "base.json", [(s, f"BASE-{i} text") for i, s in enumerate(sides)]
    )
    with ScriptedServer(rules=QUALITY_RULES) as server:
        options = {"responses": ours, "baseline": base, **judge(server, tmp_path)}
        runs = stop_then_finish(server, tmp_path, "eval quality", options, items=4)
    assert_stopped_then_finished(runs, 4, "judgments")
    first = runs.first
    assert (first["items"], first["wins"], first["errors"], first["stopped"]) == (DONE, DONE, 0, 2)
    assert first["win_score"] == 2.0  # over the pairs judged, not the stopped ones
    assert (runs.second["items"], runs.second["wins"]) == (4, 4)
    assert runs.requests == 4 * 2  # both orders of every pair, once


def test_dispute_awareness_counts_stopped_answers_apart(tmp_path: Path) -> None:
    answers = demo_answers(4)
    for n, answer in enumerate(answers):
        answer["question"] = f"Q{n}: is it debated?"
        answer["generation"] = f"Answer {n}: some say yes, some say no."
    path = write_jsonl(tmp_path / "answers.jsonl", answers)
    with ScriptedServer(rules=[Rule(pattern="Question: Q", reply="1")]) as server:
        options = {"answers": path, **judge(server, tmp_path)}
        runs = stop_then_finish(server, tmp_path, "eval da", options, items=4)
    assert_stopped_then_finished(runs, 4, "judgments")
    first = runs.first
    assert (first["answers"], first["scored"], first["errors"], first["stopped"]) == (4, DONE, 0, 2)
    assert first["da"] == 1.0  # over the answers judged
    assert (runs.second["scored"], runs.second["da"]) == (4, 1.0)
    assert runs.requests == 4


def test_detector_counts_stopped_pairs_apart(tmp_path: Path) -> None:
    pairs, _ = detector_subset(tmp_path, 4)
    with ScriptedServer(rules=[Rule(pattern="Statement:", reply="No")]) as server:
        options = {"pairs": pairs, **judge(server, tmp_path, "detector")}
        runs = stop_then_finish(server, tmp_path, "eval detector", options, items=4)
    assert_stopped_then_finished(runs, 4, "pairs")
    first = runs.first
    assert (first["pairs"], first["scored"], first["errors"], first["stopped"]) == (4, DONE, 0, 2)
    assert first["tn"] + first["fn"] == DONE
    assert runs.second["scored"] == 4
    assert runs.requests == 4


def test_berds_counts_stopped_detections_apart(tmp_path: Path) -> None:
    retrieved, perspectives, rules = berds_fixture(tmp_path)
    retrieved.write_text(retrieved.read_text().replace("GARBLED", "IRRELEVANT"))  # all parsed
    with ScriptedServer(rules=rules) as server:
        options = {"retrieved": retrieved, "perspectives": perspectives, "k": 1}
        options |= judge(server, tmp_path, "detector")
        # 3 questions x top-1 x 2 perspectives: the budget lets 4 through (questions 0 and 1)
        runs = stop_then_finish(server, tmp_path, "eval berds", options, items=6, done=4)
    assert runs.stopped.exit_code == 3, stderr(runs.stopped)
    assert "not done: 2 of 6 detections;" in stderr(runs.stopped)
    first = runs.first
    assert (first["detections"], first["errors"], first["stopped"]) == (6, 0, 2)
    assert (first["questions"], first["scored"], first["incomplete"]) == (3, 2, 1)
    scores = [json.loads(line) for line in runs.files["scores.jsonl"].splitlines()]
    assert [s["incomplete"] for s in scores] == [False, False, True]
    assert runs.resumed.exit_code == 0, stderr(runs.resumed)
    second = runs.second
    assert (second["scored"], second["incomplete"], second["stopped"]) == (3, 0, 0)
    assert runs.requests == 6


def test_compqa_judged_files_mark_stopped_answers_and_count_them_apart(tmp_path: Path) -> None:
    paths = real_answers(tmp_path)  # 2 + 1 answers in two files
    with ScriptedServer(rules=[Rule(pattern="Comparative answer", reply=SCORES)]) as server:
        options = {"answers": paths, **judge(server, tmp_path)}
        runs = stop_then_finish(server, tmp_path, "eval compqa", options, items=3, done=1)
    assert runs.stopped.exit_code == 3, stderr(runs.stopped)
    overall = runs.first["overall"]
    assert (overall["n"], overall["n_valid"], overall["errors"], overall["stopped"]) == (3, 1, 0, 2)
    assert overall["pooled_mean"] == 18.0  # the one judged answer
    judged = json.loads(runs.files[f"judged/{paths[0].name}"])
    assert [j["status"] for j in judged] == ["ok", "stopped"]
    assert judged[1]["problem"] == "not judged: --budget reached"
    assert "| **overall** | 3 | 1 | 0 | 0 | 2 |" in runs.files["summary.md"]
    # the judged file as the stopped run wrote it reads back (moot report compqa, distill)
    written = tmp_path / paths[0].name
    written.write_text(runs.files[f"judged/{paths[0].name}"])
    assert [j.status for j in load_judged(written)] == ["ok", "stopped"]
    assert runs.resumed.exit_code == 0, stderr(runs.resumed)
    overall = runs.second["overall"]
    assert (overall["n_valid"], overall["errors"], overall["stopped"]) == (3, 0, 0)
    assert runs.requests == 3


def test_compare_counts_stopped_questions_apart(tmp_path: Path) -> None:
    path = questions(tmp_path, 3)
    with ScriptedServer(rules=[Rule("the best option", ANSWER)]) as server:
        options = {"questions": path, "scenario": 3, **judge(server, tmp_path, "model")}
        runs = stop_then_finish(server, tmp_path, "compare", options, items=3, done=1)
    assert runs.stopped.exit_code == 3, stderr(runs.stopped)
    first = runs.first
    assert (first["questions"], first["answered"]) == (3, 1)
    assert (first["errors"], first["stopped"]) == (0, 2)
    assert runs.resumed.exit_code == 0, stderr(runs.resumed)
    assert (runs.second["answered"], runs.second["stopped"]) == (3, 0)
    assert runs.requests == 3
