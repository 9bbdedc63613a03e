"""The run engine: skip, run, fail apart, log, bound, compact, tally."""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest

from moot.core.data.records import ResultLog
from moot.core.errors import BudgetReached, ConfigError, ModelCallError
from moot.core.runs import STOPPED, Progress, run_claimed, run_items


def items(*ids: str) -> list[dict]:
    return [{"id": i, "n": n} for n, i in enumerate(ids)]


def lines(log: ResultLog) -> list[dict]:
    return [json.loads(line) for line in log.path.read_text().splitlines()]


def run(*args, **kwargs):
    return asyncio.run(run_items(*args, **kwargs))


def test_finished_items_are_skipped_and_the_rest_run_once(tmp_path):
    log, ran = ResultLog(tmp_path / "log.jsonl"), []

    async def task(item):
        ran.append(item["id"])
        return {**item, "status": "ok"}

    first = run(items("a", "b"), task, log, unit="things")
    second = run(items("a", "b", "c"), task, log, unit="things")
    assert ran == ["a", "b", "c"]
    assert (first.tally.planned, first.tally.skipped, first.tally.done) == (2, 0, 2)
    assert (second.tally.planned, second.tally.skipped, second.tally.done) == (3, 2, 1)
    assert [r["id"] for r in second.records] == ["a", "b", "c"]


def test_a_failed_call_is_a_failure_record_retried_next_time(tmp_path):
    log, calls = ResultLog(tmp_path / "log.jsonl"), []

    async def task(item):
        calls.append(item["id"])
        if item["id"] == "b" and calls.count("b") == 1:
            raise ModelCallError("scripted: HTTP 500")
        return {**item, "status": "ok"}

    first = run(items("a", "b", "c"), task, log, unit="things")
    assert first.tally.failed == 1 and first.tally.done == 2
    bad = next(r for r in first.records if r["id"] == "b")
    assert bad == {"id": "b", "n": 1, "status": "error", "error": "scripted: HTTP 500"}
    second = run(items("a", "b", "c"), task, log, unit="things")
    assert calls == ["a", "b", "c", "b"] and second.tally.failed == 0
    assert [r["status"] for r in lines(log)] == ["ok", "ok", "ok"]  # compacted, one per id


def test_a_budget_stop_hands_out_no_more_items_and_records_no_failure(tmp_path):
    log, ran = ResultLog(tmp_path / "log.jsonl"), []

    async def task(item):
        ran.append(item["id"])
        if item["id"] == "c" and "resume" not in ran:
            raise BudgetReached(1.0, 1.0)
        return {**item, "status": "ok"}

    first = run(items("a", "b", "c", "d", "e"), task, log, unit="things")
    assert ran == ["a", "b", "c"]  # d and e never started
    tally = first.tally
    assert (tally.done, tally.failed, tally.stopped) == (2, 0, 3)
    assert [r["status"] for r in first.records] == ["ok", "ok", STOPPED, STOPPED, STOPPED]
    assert [r["id"] for r in lines(log)] == ["a", "b"]  # stopped items are never logged
    ran.append("resume")
    second = run(items("a", "b", "c", "d", "e"), task, log, unit="things")
    assert ran[-3:] == ["c", "d", "e"] and second.tally.skipped == 2
    assert (second.tally.done, second.tally.stopped) == (3, 0)


def test_any_other_error_stops_the_run_as_itself_and_keeps_what_was_logged(tmp_path):
    log = ResultLog(tmp_path / "log.jsonl")

    async def task(item):
        if item["id"] == "b":
            raise ConfigError("authentication failed")
        return {**item, "status": "ok"}

    with pytest.raises(ConfigError, match="authentication failed"):
        run(items("a", "b", "c"), task, log, unit="things", concurrency=1)
    assert [r["id"] for r in lines(log)] == ["a"]


def test_an_id_given_twice_is_one_item_and_concurrency_is_a_bound(tmp_path):
    log, flight, most = ResultLog(tmp_path / "log.jsonl"), [0], [0]

    async def task(item):
        flight[0] += 1
        most[0] = max(most[0], flight[0])
        await asyncio.sleep(0.01)
        flight[0] -= 1
        return {**item, "status": "ok"}

    result = run(
        [*items("a", "b", "c", "d", "e"), {"id": "a", "n": 99}], task, log, unit="things",
        concurrency=2,
    )  # fmt: skip
    assert result.tally.planned == 5 and len(result.records) == 5
    assert result.records[0]["n"] == 0  # the first of the two
    assert most[0] == 2


def test_compaction_puts_this_runs_items_first_or_keeps_only_them(tmp_path):
    async def task(item):
        return {**item, "status": "ok"}

    kept, only = ResultLog(tmp_path / "kept.jsonl"), ResultLog(tmp_path / "only.jsonl")
    for log, keep in ((kept, True), (only, False)):
        run(items("a", "b"), task, log, unit="things")
        run(items("c", "a"), task, log, unit="things", keep_others=keep)
    assert [r["id"] for r in lines(kept)] == ["c", "a", "b"]
    assert [r["id"] for r in lines(only)] == ["c", "a"]


def test_a_claimed_folder_refuses_other_settings_before_any_work(tmp_path):
    ran = []

    async def task(item):
        ran.append(item["id"])
        return {**item, "status": "ok"}

    asyncio.run(run_claimed(items("a"), task, tmp_path, {"judge": "x"}))
    with pytest.raises(ConfigError, match="use a new --out"):
        asyncio.run(run_claimed(items("b"), task, tmp_path, {"judge": "y"}))
    assert ran == ["a"] and (tmp_path / "judgments.jsonl").exists()


def test_without_read_back_a_run_returns_its_failures_alone_each_logged_first(tmp_path):
    log, seen = ResultLog(tmp_path / "log.jsonl"), []

    async def task(item):
        if item["id"] == "b":
            raise ModelCallError("down")
        return {**item, "status": "ok"}

    async def logged(record):  # called once the record is in the log
        seen.append((record["id"], record["id"] in log.load()))

    result = run(items("a", "b"), task, log, unit="things", read_back=False, logged=logged)
    assert [(r["id"], r["status"]) for r in result.records] == [("b", "error")]
    assert (result.tally.done, result.tally.failed) == (1, 1)
    assert sorted(seen) == [("a", True), ("b", True)]
    assert [r["id"] for r in lines(log)] == ["a", "b"]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def slow_task(seconds: float):
    async def task(item):
        await asyncio.sleep(seconds)
        return {**item, "status": "error" if item["id"] == "b" else "ok"}

    return task


def test_progress_is_a_bar_on_a_terminal_and_plain_timed_lines_elsewhere(tmp_path):
    shown = {}
    for name, stream in (("terminal", Terminal()), ("log", io.StringIO())):
        progress = Progress(stream=stream, every=0.03)
        log = ResultLog(tmp_path / f"{name}.jsonl")
        run(items("a", "b", "c", "d"), slow_task(0.02), log, unit="things", progress=progress)
        shown[name] = stream.getvalue()
    assert "4/4" in shown["terminal"] and "failed 1" in shown["terminal"]
    assert "moot:" not in shown["terminal"]
    plain = shown["log"]
    assert "\r" not in plain and "\x1b" not in plain and "4/4" not in plain
    *running, end = plain.splitlines()
    assert running and all(
        re.fullmatch(r"moot: things: [0-3] of 4 finished \([01] failed\); [\d.]+/s, "
                     r"elapsed [\d.]+s, ETA ([\d.]+s|\?)", line)
        for line in running
    ), plain  # fmt: skip
    assert re.fullmatch(r"moot: things: 4 of 4 finished \(1 failed\); [\d.]+/s, took [\d.]+s", end)


def test_progress_lines_only_when_counts_move_and_each_stage_ends_with_one(tmp_path):
    stream = io.StringIO()
    waiting = Progress(stream=stream, every=0.01)  # ~20 intervals in which nothing moves
    run(items("a"), slow_task(0.2), ResultLog(tmp_path / "slow.jsonl"), unit="things",
        progress=waiting)  # fmt: skip
    assert [line.split(";")[0] for line in stream.getvalue().splitlines()] == [
        "moot: things: 0 of 1 finished (0 failed)",
        "moot: things: 1 of 1 finished (0 failed)",
    ]
    stream = io.StringIO()
    ends_only = Progress(stream=stream, every=0)
    for stage in ("one", "two"):
        log = ResultLog(tmp_path / f"{stage}.jsonl")
        run(items("a", "b"), slow_task(0.01), log, unit=stage, progress=ends_only)
    assert [line.split(";")[0] for line in stream.getvalue().splitlines()] == [
        "moot: one: 2 of 2 finished (1 failed)",
        "moot: two: 2 of 2 finished (1 failed)",
    ]
    stream = io.StringIO()
    quiet = Progress(enabled=False, stream=stream, every=0.01)
    run(items("a"), slow_task(0.05), ResultLog(tmp_path / "quiet.jsonl"), unit="x", progress=quiet)
    assert stream.getvalue() == ""


def test_a_run_folder_gets_its_progress_file_from_the_first_item_to_the_end(tmp_path):
    (tmp_path / ".moot").mkdir()
    progress, seen = tmp_path / ".moot" / "progress.json", []

    async def task(item):
        seen.append(json.loads(progress.read_text()))
        return {**item, "status": "error" if item["id"] == "b" else "ok"}

    log = ResultLog(tmp_path / "log.jsonl")
    run(items("a"), task, log, unit="things", progress=Progress(enabled=False))
    run(items("a", "b", "c"), task, log, unit="things", progress=Progress(enabled=False))
    counts = ("stage", "state", "planned", "skipped", "done", "failed")
    assert [tuple(s[k] for k in counts) for s in seen] == [
        ("things", "running", 1, 0, 0, 0),
        ("things", "running", 3, 1, 0, 0),
        ("things", "running", 3, 1, 0, 0),  # rewritten once a second, not per item
    ]
    end = json.loads(progress.read_text())
    assert tuple(end[k] for k in counts) == ("things", "ended", 3, 1, 1, 1)
    assert end["started"] <= end["updated"] and end["updated"].endswith("+00:00")

    async def crash(item):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run(items("d"), crash, log, unit="things", progress=Progress(enabled=False))
    assert json.loads(progress.read_text())["state"] == "stopped"
    elsewhere = ResultLog(tmp_path / "out" / "log.jsonl")  # no .moot/: not a run folder
    run(items("a"), task, elsewhere, unit="things", progress=Progress(enabled=False))
    assert not (tmp_path / "out" / ".moot").exists()
