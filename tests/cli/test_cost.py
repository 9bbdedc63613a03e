"""Prices and ``--budget``, in process (`moot.debate(...)`), against the real scripted server.

The scripted model is priced by a price file (USD per million tokens), so every figure below is
what the ledger computes from the tokens the server reported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import moot
from moot.cli.runtime import summary_table
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.spec import parse_spec
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    read_jsonl,
    refused_in_one_line,
    stderr,
    stdout,
    write_topics,
)
from tests.cli.test_generate import dataset
from tests.cli.test_judge import SCORE, judge_options, real_debates
from tests.conftest import built_once

TOPICS = ["Should zoos be banned?"]
# a prompt token costs $0.001, a completion token $0.002, a cached prompt token $0.0001
PRICES = {"openai/scripted": {"input": 1000, "output": 2000, "cached_input": 100}}
DEBATES = 4  # 2 stances x 2 arguments
CLEAN_RUN_CALLS = 2 + DEBATES * 5  # 2 argument lists, debates of 5 calls (2 rounds, conclusion)


def chat_requests(server: ScriptedServer) -> int:
    return sum(1 for r in server.requests if r.path == "/v1/chat/completions")


def debate_options(server: ScriptedServer, folder: Path, **extra: object) -> dict[str, object]:
    """The keyword arguments of `moot.debate` for `folder`'s debates of TOPICS on `server`."""
    return {
        "topics": write_topics(folder / "topics.json", TOPICS),
        "out": folder / "out",
        "model": "openai/scripted",
        "api_base": server.url,
        "arguments_per_stance": 2,
        "turn_tokens": 64,
        "conclusion_tokens": 64,
        "cache": folder / "cache.sqlite",
        **extra,
    }


def ran(command: Any, **options: object) -> dict[str, Any]:
    """What `command(**options)` did, as the test reads it: the exception it raised (None: done),
    its exit code, and what the command line would print (a pickle, for `built_once`)."""
    try:
        result, raised = command(**options), None
    except moot.RunFailed as exc:
        result, raised = exc.result, type(exc)
    exit_code = result.exit_code
    return {
        "raised": raised,
        "exit_code": exit_code,
        "stdout": stdout(result),
        "stderr": stderr(result),
    }


def price_file(folder: Path, prices: Any = None) -> Path:
    path = folder / "prices.json"
    path.write_text(json.dumps(PRICES if prices is None else prices), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A debate run stopped by --budget, then its rerun with a larger budget."""
    return built_once(tmp_path_factory, "budget", budget_runs)


def budget_runs(folder: Path) -> dict[str, Any]:
    prices = price_file(folder)
    with ScriptedServer(rules=[Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]) as s:
        options = debate_options(s, folder, prices=prices, concurrency=1)
        first = ran(moot.debate, **options, budget=3)
        first_requests = chat_requests(s)
        manifest = json.loads((folder / "out" / "manifest.json").read_text())
        debates = read_jsonl(folder / "out" / "debates.jsonl")
        dataset = read_jsonl(folder / "out" / "dataset.jsonl")
        second = ran(moot.debate, **options, budget=100)
        return {
            "first": first,
            "first_requests": first_requests,
            "manifest": manifest,
            "debates": debates,
            "dataset": dataset,
            "second": second,
            "requests": chat_requests(s),
            "out": folder / "out",
        }


def test_budget_stops_the_run_before_the_ledger_passes_it(budgeted: dict[str, Any]) -> None:
    first, manifest = budgeted["first"], budgeted["manifest"]
    assert first["raised"] is moot.RunStopped and first["exit_code"] == 3, first["stderr"]
    spent = manifest["ledger"]["total"]["cost_usd"]
    assert 0 < spent <= 3.0
    assert budgeted["first_requests"] == manifest["ledger"]["total"]["calls"] < CLEAN_RUN_CALLS
    stopped = manifest["counts"]["stopped"]
    assert stopped > 0 and manifest["counts"]["failures"] == 0
    lines = [line for line in first["stderr"].splitlines() if "budget reached" in line]
    assert lines == [
        f"moot: budget reached: spent ${spent:.4f} of $3.0000; not done: {stopped} of "
        f"{manifest['counts']['debates']} debates; what finished is written; rerun with a larger "
        "--budget to go on"
    ]
    assert "Traceback" not in first["stderr"]


def test_budget_writes_what_finished_and_records_no_failure(budgeted: dict[str, Any]) -> None:
    debates, manifest = budgeted["debates"], budgeted["manifest"]
    assert debates and {d["status"] for d in debates} == {"ok"}  # a stopped debate is not failed
    assert len(debates) == manifest["counts"]["debates_ok"] == len(budgeted["dataset"])
    assert manifest["counts"]["debates_ok"] + manifest["counts"]["stopped"] == DEBATES
    assert "stopped" in budgeted["first"]["stdout"]  # the summary table's column


def test_rerun_with_a_larger_budget_finishes_without_paying_twice(
    budgeted: dict[str, Any],
) -> None:
    second = budgeted["second"]
    assert second["raised"] is None and second["exit_code"] == 0, second["stderr"]
    debates = read_jsonl(budgeted["out"] / "debates.jsonl")
    assert len(debates) == DEBATES and {d["status"] for d in debates} == {"ok"}
    # stopped debates resumed from their checkpoints: every request was sent once in all
    assert budgeted["requests"] == CLEAN_RUN_CALLS
    manifest = json.loads((budgeted["out"] / "manifest.json").read_text())
    total = manifest["ledger_total"]["total"]
    # checkpoints are per round: a debate stopped in B's turn asks A's turn of that round again,
    # answered by the request cache (a call in the ledger, a cache hit, nothing paid)
    assert total["calls"] - total["cache_hits"] == CLEAN_RUN_CALLS
    assert total["cache_hits"] <= DEBATES
    before = budgeted["manifest"]["ledger"]["total"]["cost_usd"]
    assert total["cost_usd"] == pytest.approx(before + manifest["ledger"]["total"]["cost_usd"])


def test_a_judge_stops_at_its_budget_and_goes_on(tmp_path: Path) -> None:
    """`moot judge`: many calls per debate (speeches, dimensions, the panel's verdict)."""
    debates, _ = real_debates(tmp_path, 3)
    prices = price_file(tmp_path)
    with ScriptedServer(rules=[SCORE]) as server:
        full = tmp_path / "full"
        moot.judge(**judge_options(server, debates, full, prices=prices, cache=full / "c.sqlite"))
        cost = json.loads((full / "summary.json").read_text())["ledger"]["total"]["cost_usd"]
        calls = chat_requests(server)
        server.clear_log()
        out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
        options = judge_options(server, debates, out, prices=prices, cache=cache)
        with pytest.raises(moot.RunStopped) as stopped:
            moot.judge(**options, budget=f"{cost / 2:.6f}")
        summary = json.loads((out / "summary.json").read_text())
        moot.judge(**options, budget=f"{cost * 10:.6f}")
        assert stopped.value.result.exit_code == 3
        assert 0 < summary["ledger"]["total"]["cost_usd"] <= cost / 2
        assert "judgments; what finished is written" in stderr(stopped.value.result)
        assert chat_requests(server) == calls  # nothing paid twice


def test_an_unpriced_model_with_a_budget_is_refused_before_any_call(tmp_path: Path) -> None:
    with ScriptedServer() as server, pytest.raises(moot.MootError) as refused:
        moot.debate(**debate_options(server, tmp_path, budget=5))
    assert chat_requests(server) == 0
    assert refused_in_one_line(refused.value) == (
        "--budget needs the price of openai/scripted, which is unknown: give it "
        "with --prices FILE (or prices: in --config)"
    )
    assert not (tmp_path / "out" / "debates.jsonl").exists()


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ({"openai/scripted": {"input": "cheap", "output": 1}}, "input: must be a valid number"),
        (
            {"openai/scripted": {"input": 1, "outptu": 1}},
            "outptu: unknown key (did you mean 'output'?)",
        ),
    ],
)
def test_a_bad_price_file_is_one_line_exit_2_before_any_call(
    tmp_path: Path, prices: dict[str, Any], problem: str
) -> None:
    file = price_file(tmp_path, prices)
    with ScriptedServer() as server, pytest.raises(moot.MootError) as refused:
        moot.debate(**debate_options(server, tmp_path, prices=file))
    assert chat_requests(server) == 0
    assert refused_in_one_line(refused.value).startswith(f"{file}, openai/scripted: {problem}")
    assert not (tmp_path / "out" / "debates.jsonl").exists()


def test_inline_prices_in_config_price_cached_input_and_unpriced_is_never_zero(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "prices:\n  openai/scripted: {input: 1000, output: 2000, cached_input: 100}\n"
    )
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    (tmp_path / "other").mkdir()
    with ScriptedServer(rules=rules, cached_prompt_tokens=10) as server:
        moot.debate(**debate_options(server, tmp_path, config=config, limit=1))
        unpriced = stdout(moot.debate(**debate_options(server, tmp_path / "other", limit=1)))
    total = json.loads((tmp_path / "out" / "manifest.json").read_text())["ledger"]["total"]
    assert total["cached_prompt_tokens"] == 10 * total["calls"]
    cached = total["cached_prompt_tokens"]
    expected = (total["prompt_tokens"] - cached) * 1000 + cached * 100
    expected += total["completion_tokens"] * 2000
    assert total["cost_usd"] == pytest.approx(expected / 1e6)

    ledger = json.loads((tmp_path / "other" / "out" / "manifest.json").read_text())["ledger"]
    assert ledger["total"]["cost_usd"] is None and ledger["unpriced"] == ["openai/scripted"]
    assert {row["cost_usd"] for row in ledger["by_role"]} == {None}
    assert "cost unpriced ($0.0000 priced; no price for openai/scripted)" in unpriced
    assert "$0.0000\n" not in unpriced and " 0.0000\n" not in unpriced


def test_the_dry_run_prices_the_plan_live_and_in_batches(tmp_path: Path) -> None:
    """The batch figure: the same token estimates at the price file's batch rates, each rate
    not given at half the live one; no batch line when no call is priced."""
    given = {"input": 1000, "output": 2000, "batch_input": 100, "batch_output": 1500}
    plain = {"input": 1000, "output": 2000}
    with ScriptedServer() as server:
        for rates, batch in [(given, (100, 1500)), (plain, (500, 1000))]:
            file = price_file(tmp_path, {"openai/scripted": rates})
            plan = stdout(
                moot.debate(**debate_options(server, tmp_path, prices=file, dry_run=True))
            )
            found = re.search(r"about (\d+) input tokens, at most (\d+) output tokens", plan)
            assert found is not None, plan
            inputs, outputs = int(found[1]), int(found[2])
            live = (inputs * 1000 + outputs * 2000) / 1e6
            batched = (inputs * batch[0] + outputs * batch[1]) / 1e6
            line = f"cost: ${live:.4f} live, ${batched:.4f} in batches (--batch)"
            assert line in plan.splitlines(), plan
            assert f"cost about ${live:.4f}\n" in plan  # the estimate line as before
        unpriced = stdout(moot.debate(**debate_options(server, tmp_path, dry_run=True)))
        file = price_file(tmp_path, {"openai/scripted": given})
        mixed = stdout(
            moot.debate(
                **debate_options(server, tmp_path, prices=file, dry_run=True),
                model_b="openai/other",
            )
        )
        assert chat_requests(server) == 0
    assert "cost unpriced (openai/scripted)" in unpriced and "in batches" not in unpriced
    assert "in batches (--batch) (priced calls; unpriced: openai/other)" in mixed


def test_the_summary_table_has_a_batch_column_only_when_some_call_was_batched() -> None:
    spec = parse_spec("openai/gpt-4o-mini")
    ledger = UsageLedger()
    ledger.record(spec, "judge", "verdict", prompt_tokens=10, completion_tokens=5)
    live = summary_table([], ledger)
    assert "batch" not in live and "total: 1 calls (0 cached), 0 retries" in live
    ledger.record(spec, "judge", "verdict", prompt_tokens=10, completion_tokens=5, batch=True)
    ledger.record(spec, "judge", "opening", prompt_tokens=10, completion_tokens=5)
    table = summary_table([], ledger).splitlines()
    assert table[0].split() == [
        *("role", "stage", "model", "calls", "cached", "retries", "prompt", "completion"),
        *("batch", "cost", "$"),
    ]
    assert table[1].split()[3:9] == ["1", "0", "0", "10", "5", "0"]  # opening: none batched
    assert table[2].split()[3:9] == ["2", "0", "0", "20", "10", "1"]
    assert "total: 3 calls (0 cached, 1 in batches), 0 retries" in table[-1]


def test_a_budget_spent_on_the_first_stage_stops_both_and_the_rerun_does_both(
    tmp_path: Path,
) -> None:
    """`moot debate`'s two stages: argument lists, then the debates they give."""
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    with ScriptedServer(rules=rules) as server:
        options = debate_options(server, tmp_path, prices=price_file(tmp_path))
        # an argument list reserves about $1.13 (its prompt, and 512 tokens at $0.002)
        with pytest.raises(moot.RunStopped) as stopped:
            moot.debate(**options, budget=1.5)
        debates = read_jsonl(tmp_path / "out" / "debates.jsonl")
        moot.debate(**options, budget=100)
        assert chat_requests(server) == CLEAN_RUN_CALLS
    assert stopped.value.result.exit_code == 3
    assert "not done: 1 of 2 argument lists, 2 of 2 debates;" in stderr(stopped.value.result)
    assert debates == []  # the debates of the list made would pay: none started
    assert len(read_jsonl(tmp_path / "out" / "debates.jsonl")) == DEBATES


# --- servers whose usage cannot be taken as reported (issue 29) ------------------------------

LONG_REPLY = Rule(pattern=".", reply=" ".join(["evidence"] * 3000))  # max_tokens or not


def generate_options(server: ScriptedServer, folder: Path, **extra: object) -> dict[str, object]:
    """`moot.generate` of the 6 instructions of one topic, priced, one request at a time."""
    prices = price_file(folder, {"openai/m": {"input": 1000, "output": 2000}})
    return {
        "dataset": dataset(folder), "model": "openai/m", "api_base": server.url,
        "out": folder / "responses.json", "max_tokens": 64, "prices": prices, "no_cache": True,
        "concurrency": 1, **extra,
    }  # fmt: skip


def total_line(stdout: str) -> tuple[int, float]:
    """Tokens and USD of the summary's total line."""
    found = re.search(r"^total: .* (-?\d+) tokens, cost \$(-?[\d.]+)$", stdout, re.M)
    assert found, stdout
    return int(found[1]), float(found[2])


def test_a_server_that_reports_no_usage_is_counted_and_the_budget_holds(tmp_path: Path) -> None:
    with ScriptedServer(report_usage=False) as server, pytest.raises(moot.RunStopped) as stopped:
        # a call costs about $0.09 and reserves $0.165: the second would pass $0.20
        moot.generate(**generate_options(server, tmp_path, budget=0.20))
    assert stopped.value.result.exit_code == 3
    assert chat_requests(server) == 1
    tokens, spent = total_line(stdout(stopped.value.result))
    assert tokens > 0 and 0 < spent <= 0.20
    assert (
        "note: moot counted the tokens of 1 reply from openai/m with its tokenizer: the server "
        "reported no usage, or usage that cannot be true"
    ) in stdout(stopped.value.result)


def test_usage_that_cannot_be_true_is_a_failed_call_and_never_lowers_the_ledger(
    tmp_path: Path,
) -> None:
    faults = [
        Fault(kind="negative_usage", times=2, match="A1 cages"),  # both attempts: a failure
        Fault(kind="inflated_usage", times=1, match="A2 stress"),  # retried, then fine
    ]
    with ScriptedServer(faults=faults) as server, pytest.raises(moot.RunFailed) as failed:
        moot.generate(**generate_options(server, tmp_path, max_retries=1))
    assert chat_requests(server) == 6 + 2
    result = failed.value.result
    assert type(failed.value) is moot.RunFailed and result.exit_code == 1
    assert "1 of 6 instructions failed" in stderr(result)
    tokens, spent = total_line(stdout(result))
    # the 3 refused replies are billed as moot counts them: more than the 5 good ones alone
    assert tokens > 0 and spent > 0
    assert "moot counted the tokens of 3 replies from openai/m" in stdout(result)
    progress = read_jsonl(tmp_path / ".responses.json.progress.jsonl")
    (failed,) = [record for record in progress if record["status"] == "error"]
    assert failed["argument"] == "A1 cages"
    assert "impossible usage: prompt_tokens -400000000" in failed["error"]


def test_a_server_that_ignores_max_tokens_is_held_to_the_budget(tmp_path: Path) -> None:
    with ScriptedServer(rules=[LONG_REPLY]) as server, pytest.raises(moot.RunStopped) as stopped:
        # each reply costs about $6.04 against the $0.165 its max_tokens reserves
        moot.generate(**generate_options(server, tmp_path, budget=10))
    assert stopped.value.result.exit_code == 3
    # the second request reserves the first reply's length: it would pass $10
    assert chat_requests(server) == 1
    assert total_line(stdout(stopped.value.result))[1] <= 10
    assert "note: openai/m answered longer than the max_tokens asked (1 reply)" in stdout(
        stopped.value.result
    )
