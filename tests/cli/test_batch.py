"""``--batch`` end to end against the scripted server's Batch API: the same outputs as live runs.

In process (`moot.debate(..., batch=True)`), but a run killed while it waits.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import moot
from moot.cli import main
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    popen_moot,
    read_jsonl,
    write_topics,
)
from tests.cli.test_eval import CONTROL_RULES, responses_file
from tests.cli.test_eval_compqa import SCORES, real_answers
from tests.cli.test_judge import SCORE, real_debates
from tests.cli.test_run import recipe, write

#: Fast polls: the scripted batches end after a few looks.
FAST = {"batch": True, "batch_poll": 0.01}
#: An order-free reply (``{n}`` counts arrivals, which differ between live and batch runs).
ARGUMENTS = Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY.replace("{n}", "x"))
#: The scripted models' prices: their batch rates are half (`moot.core.llm.prices`).
PRICES = {name: {"input": 1.0, "output": 2.0} for name in ("openai/scripted", "openai/judge")}
#: What differs between two runs whatever they do: their endpoint, their timings, their cards.
RUN_FACTS = {"manifest.json", "README.md", "summary.json"}


def outputs(folder: Path) -> dict[str, bytes]:
    """Every output file of a run but its journal and the run facts, by relative path."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and ".moot" not in path.parts and path.name not in RUN_FACTS
    }


def debate(server: ScriptedServer, tmp_path: Path, out: Path, **extra: object) -> moot.Result:
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?", "Is tea better?"])
    options = {"topics": topics, "out": out, "model": "openai/scripted", "api_base": server.url}
    options |= {"arguments_per_stance": 2, "max_retries": 1, "no_cache": True}
    return moot.debate(**options | extra)


def judge(server: ScriptedServer, tmp_path: Path, out: Path, **extra: object) -> moot.Result:
    debates, _ = real_debates(tmp_path, 2)
    options = {"debates": debates, "out": out, "judge": "openai/scripted", "api_base": server.url}
    return moot.judge(**options, max_retries=1, no_cache=True, **extra)


def controllability(
    server: ScriptedServer, tmp_path: Path, out: Path, **extra: object
) -> moot.Result:
    texts = [("affirmative", "AFF-FULL a"), ("negative", "NEG-HALF"), ("affirmative", "AFF-BAD")]
    responses = responses_file(tmp_path / "r.json", texts)
    options = {"responses": responses, "out": out, "judge": "openai/judge", "api_base": server.url}
    return moot.eval.controllability(**options, max_retries=1, no_cache=True, **extra)


def compqa(server: ScriptedServer, tmp_path: Path, out: Path, **extra: object) -> moot.Result:
    answers = real_answers(tmp_path)
    options = {"answers": answers, "out": out, "judge": "openai/judge", "api_base": server.url}
    return moot.eval.compqa(**options, shots=1, max_retries=1, no_cache=True, **extra)


COMMANDS = {
    "debate": (debate, [ARGUMENTS]),
    "judge": (judge, [SCORE]),
    "eval controllability": (controllability, CONTROL_RULES),
    "eval compqa": (compqa, [Rule(pattern="Comparative answer", reply=SCORES)]),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_batch_run_writes_what_a_live_run_writes(tmp_path, command):
    run, rules = COMMANDS[command]
    with ScriptedServer(rules=rules) as server:
        live = run(server, tmp_path, tmp_path / "live", prices=PRICES)
    with ScriptedServer(rules=rules, batch_polls=1) as server:
        batched = run(server, tmp_path, tmp_path / "batched", prices=PRICES, **FAST)
        paths = Counter(request.path for request in server.requests)
        lines = server.batch_lines
    assert live.exit_code == batched.exit_code == 0 or command == "eval controllability"
    assert batched.exit_code == live.exit_code
    assert outputs(tmp_path / "batched") == outputs(tmp_path / "live")
    assert "/v1/chat/completions" not in paths  # every request went in a batch
    assert len(lines) == len({line.custom_id for line in lines})  # each once
    assert live.ledger.total().calls == batched.ledger.total().calls == len(lines)
    assert batched.ledger.total().batch_calls == len(lines)
    assert batched.ledger.spent() == pytest.approx(live.ledger.spent() / 2)  # half the price


def test_a_debate_asks_one_batch_per_step_of_every_debate(tmp_path):
    with ScriptedServer(rules=[ARGUMENTS], batch_polls=1) as server:
        result = debate(server, tmp_path, tmp_path / "out", **FAST)
        batches = Counter(line.batch_id for line in server.batch_lines)
    # the argument lists, then each of a debate's five turns across both debates' arguments
    assert result.exit_code == 0
    assert sorted(batches.values()) == [4] + [8] * 5
    journal = read_jsonl(tmp_path / "out" / ".moot" / "batches.jsonl")
    assert len([line for line in journal if "keys" in line]) == 6
    assert len([line for line in journal if line.get("batch")]) == 6


def test_failed_and_expired_requests_are_asked_again_in_the_next_batch(tmp_path):
    faults = [Fault("500", match="Should zoos", times=2), Fault("batch_expired", times=1)]
    with ScriptedServer(rules=[ARGUMENTS], faults=faults, batch_polls=1) as server:
        result = debate(server, tmp_path, tmp_path / "out", **FAST, max_retries=2)
        lines = server.batch_lines
        live = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert result.exit_code == 0
    asked = Counter(line.custom_id for line in lines)
    assert sorted(asked.values(), reverse=True)[:3] == [2, 2, 2] and not live
    assert result.ledger.total().retries == 3
    with ScriptedServer(rules=[ARGUMENTS]) as server:
        debate(server, tmp_path, tmp_path / "live")
    assert outputs(tmp_path / "out") == outputs(tmp_path / "live")


def test_with_batch_fallback_live_a_failed_request_is_asked_live(tmp_path):
    faults = [Fault("500", match="Should zoos", times=1)]
    with ScriptedServer(rules=[ARGUMENTS], faults=faults, batch_polls=1) as server:
        result = debate(server, tmp_path, tmp_path / "out", **FAST, batch_fallback="live")
        live = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert result.exit_code == 0 and len(live) == 1


def test_no_wait_submits_and_exits_then_collect_finishes_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    with ScriptedServer(rules=[ARGUMENTS], batch_polls=3) as server:
        args = ["debate", "--topics", "topics.json", "--out", "out", "--model", "openai/scripted"]
        args += ["--api-base", server.url, "--arguments-per-stance", "1", "--no-cache"]
        assert main([*args, "--batch", "--no-wait", "--batch-poll", "0.01"]) == 0
        said = capsys.readouterr().err
        assert "waiting for their batches: 2 of 2 argument lists" in said
        assert "moot collect out" in said
        assert len(server.batch_lines) == 2  # the argument lists: no debate yet
        assert read_jsonl(tmp_path / "out" / "debates.jsonl") == []
        monkeypatch.chdir(tmp_path.parent)  # collect runs the command where it ran
        assert main(["collect", str(tmp_path / "out")]) == 0
        lines = server.batch_lines
    assert len(lines) == len({line.custom_id for line in lines})
    assert len(read_jsonl(tmp_path / "out" / "debates.jsonl")) == 2
    assert topics.exists()


@pytest.mark.subprocess
def test_a_run_killed_while_waiting_submits_nothing_twice(tmp_path):
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?", "Is tea better?"])
    out = tmp_path / "out"
    with ScriptedServer(rules=[ARGUMENTS], batch_polls=20) as server:
        args = ["debate", "--topics", topics, "--out", out, "--model", "openai/scripted"]
        args += ["--api-base", server.url, "--arguments-per-stance", 2, "--no-cache"]
        args += ["--batch", "--batch-poll", "0.02", "--quiet"]
        run = popen_moot(*args)
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline and len({line.batch_id for line in server.batch_lines}) < 2
        ):
            time.sleep(0.02)  # killed while its second batch (the openings) waits
        run.send_signal(signal.SIGKILL)
        run.wait()
        rerun = popen_moot(*args)
        assert rerun.wait(timeout=120) == 0, rerun.stderr.read()
        lines = server.batch_lines
    assert len(lines) == len({line.custom_id for line in lines}) == 44
    with ScriptedServer(rules=[ARGUMENTS]) as server:
        debate(server, tmp_path, tmp_path / "live")
    assert outputs(out) == outputs(tmp_path / "live")


def test_models_without_a_batch_api_and_batch_options_alone_are_refused(tmp_path, capsys):
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    base = ["debate", "--topics", str(topics), "--out", str(tmp_path / "out")]
    local = [*base, "--model", "local/smollm2", "--batch"]
    alone = [*base, "--model", "openai/x", "--api-base", "http://127.0.0.1:9/v1", "--no-wait"]
    for args, said in ((local, "--batch: local/smollm2 has no batch API"), (alone, "--no-wait")):
        assert main(args) == 2
        error = capsys.readouterr().err
        assert said in error and error.count("\n") == 1, error
    assert not (tmp_path / "out").exists()


def test_budget_refuses_the_requests_of_a_batch_that_could_cross_it(tmp_path):
    with ScriptedServer(rules=[ARGUMENTS], batch_polls=1) as server:
        full = debate(server, tmp_path, tmp_path / "full", prices=PRICES, **FAST)
        calls, budget = full.ledger.total().calls, full.ledger.spent() / 3
        with pytest.raises(moot.api.RunStopped) as stopped:
            debate(server, tmp_path, tmp_path / "out", prices=PRICES, budget=budget, **FAST)
        submitted = len(server.batch_lines) - calls
    result = stopped.value.result
    assert result.exit_code == 3
    assert 0 < submitted < calls  # the requests that fit were asked, the others never sent
    assert result.ledger.total().calls - result.ledger.total().failures == submitted
    assert result.ledger.spent() <= budget


def test_a_recipe_stops_at_a_stage_whose_batches_wait_and_its_rerun_goes_on(tmp_path):
    with ScriptedServer(batch_polls=2) as server:
        data = recipe(tmp_path, server.url)
        first = {**data["stages"]["generate-base"], "batch": True, "no-wait": True}
        first["batch-poll"] = 0.01
        stages = {"first": first, "second": {**first, "model": "openai/other"}}
        path = write(tmp_path / "loop.yaml", {"stages": stages})
        result = moot.run(path, out=tmp_path / "out")
        assert result.exit_code == 0
        assert "stage first waits for its batches (2 items)" in " ".join(result.messages)
        assert {line.body["model"] for line in server.batch_lines} == {"base"}  # not the second
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["stages"]["first"]["status"] == "waiting"
        stages["first"]["no-wait"] = stages["second"]["no-wait"] = False
        write(path, {"stages": stages})
        assert moot.run(path, out=tmp_path / "out").exit_code == 0
        models = Counter(line.body["model"] for line in server.batch_lines)
    assert models == {"base": 2, "other": 2}  # the first stage's batch collected, not submitted


def test_a_later_live_run_finds_a_batch_runs_replies_in_the_request_cache(tmp_path):
    cache = tmp_path / "requests.sqlite"
    with ScriptedServer(rules=[ARGUMENTS], batch_polls=1) as server:
        debate(server, tmp_path, tmp_path / "batched", **FAST, no_cache=False, cache=cache)
        server.clear_log()
        live = debate(server, tmp_path, tmp_path / "live", no_cache=False, cache=cache)
        assert server.requests == []  # not one request: every reply is the batch's
    assert live.ledger.total().cache_hits == live.ledger.total().calls == 44
    assert outputs(tmp_path / "live") == outputs(tmp_path / "batched")
