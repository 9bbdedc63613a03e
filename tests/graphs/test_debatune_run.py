"""The Python API of a DEBATunE run, against the scripted server."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moot.core import ModelClient, RetryPolicy, Role, Topic, load_topics, parse_spec
from moot.core.data.topics import STANCES
from moot.core.errors import InputError
from moot.graphs import DebateRunConfig, Shard, merge_runs, run_debatune
from moot.testing import Rule, ScriptedServer
from tests.conftest import shared_data

GIVEN = {"Affirmative": ("Zoos protect species.",), "Negative": ("Zoos confine animals.",)}


def config(url: str, rounds: int, per_stance: int = 1) -> DebateRunConfig:
    spec = parse_spec("openai/scripted", api_base=url)
    return DebateRunConfig(
        Role("debater_a", spec, 0.7),
        Role("debater_b", spec, 1.0),
        rounds=rounds,
        arguments_per_stance=per_stance,
    )


@pytest.mark.parametrize("rounds", [1, 3])
def test_rounds_alternate_speakers_and_end_with_the_conclusion(rounds, tmp_path):
    rules = [Rule(pattern="watching a debate", reply="CONCLUSION {n}")]
    with ScriptedServer(rules=rules) as server:
        client = ModelClient(retry=RetryPolicy(attempts=1))
        summary = asyncio.run(
            run_debatune([Topic("Zoos", GIVEN)], tmp_path, config(server.url, rounds), client)
        )
        bodies = [r.body for r in server.requests]
    assert summary.ok and summary.completed == 2
    assert len(bodies) == 2 * (2 * rounds + 1)
    debates = [json.loads(line) for line in (tmp_path / "debates.jsonl").read_text().splitlines()]
    for debate in debates:
        assert [t["speaker"] for t in debate["transcript"]] == ["A", "B"] * rounds
        assert [t["round"] for t in debate["transcript"]] == [
            r for r in range(rounds) for _ in "AB"
        ]
        assert debate["conclusion"].startswith("CONCLUSION")
    # B speaks at its own temperature; every call has its own seed
    temperatures = {b["temperature"] for b in bodies}
    assert temperatures == {0.7, 1.0}
    assert len({b["seed"] for b in bodies}) == len(bodies)


def test_shards_partition_the_topics():
    topics = [Topic(f"t{i}") for i in range(7)]
    parts = [Shard(i, 3).select(topics) for i in range(3)]
    assert sorted(t.topic for p in parts for t in p) == sorted(t.topic for t in topics)
    assert [len(p) for p in parts] == [3, 2, 2]


def test_the_papers_80_test_topics_debate_end_to_end(tmp_path):
    topics = load_topics(
        str(shared_data("debatune", "Debate_topic_arguments", "debate_test_v1_arg.jsonl"))
    )
    with ScriptedServer() as server:
        client = ModelClient(retry=RetryPolicy(attempts=1))
        summary = asyncio.run(
            run_debatune(topics, tmp_path, config(server.url, 1), client, concurrency=32)
        )
    assert summary.ok and summary.completed == 80 * 2 and summary.dataset_records == 160
    records = [json.loads(line) for line in (tmp_path / "dataset.jsonl").read_text().splitlines()]
    first = {(r["topic"], r["stance"]): r["argument"] for r in records}
    for topic in topics:  # the first given argument per side is the one debated
        for stance in ("Affirmative", "Negative"):
            assert first[(topic.topic, stance)] == topic.arguments[stance][0]


# --- limit, plan order, duplicates, progress ------------------------------------

TWO_ARGUMENTS = '{"arguments": ["First {n} holds.", "Second {n} holds."]}'
ONE_ARGUMENT = '{"arguments": ["Only {n} holds."]}'


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def debate_in(folder: Path, topics: list[Topic], reply: str, **options: Any) -> tuple[Any, list]:
    """Run 1-round debates with 2 arguments per stance; the summary and the requests asked."""
    rules = [Rule(pattern="list your arguments", reply=reply)]
    with ScriptedServer(rules=rules) as server:
        client = ModelClient(retry=RetryPolicy(attempts=1))
        run = run_debatune(topics, folder, config(server.url, 1, per_stance=2), client, **options)
        summary = asyncio.run(run)
        asked = [r.body["messages"][-1]["content"] for r in server.requests]
    return summary, asked


def argument_calls(asked: list[str]) -> int:
    return sum("list your arguments" in text for text in asked)


def test_a_limit_debates_the_first_n_and_pays_only_for_the_argument_lists_they_need(tmp_path):
    topics = [Topic("Zoos"), Topic("Homework"), Topic("Cars")]
    summary, asked = debate_in(tmp_path, topics, TWO_ARGUMENTS, limit=3)
    # Zoos' two lists hold 4 arguments: enough for 3 debates, so no other list is asked for
    assert argument_calls(asked) == 2 and len(asked) == 2 + 3 * 3
    debates = read_log(tmp_path / "debates.jsonl")
    assert [(d["topic"], d["stance"]) for d in debates] == [
        ("Zoos", "Affirmative"),
        ("Zoos", "Affirmative"),
        ("Zoos", "Negative"),
    ]
    assert summary.ok and (summary.planned, summary.completed) == (3, 3)
    assert [(t.unit, t.planned, t.done) for t in summary.tallies] == [
        ("argument lists", 2, 2),
        ("debates", 3, 3),
    ]
    # without the limit, the rest: 4 more lists and the 9 other debates, the 3 done not again
    summary, asked = debate_in(tmp_path, topics, TWO_ARGUMENTS)
    assert argument_calls(asked) == 4 and len(asked) == 4 + 9 * 3
    assert (summary.planned, summary.already_done, summary.completed) == (12, 3, 9)


def test_a_limit_asks_for_more_lists_only_when_lists_come_back_short(tmp_path):
    topics = [Topic("Zoos"), Topic("Homework"), Topic("Cars")]
    summary, asked = debate_in(tmp_path, topics, ONE_ARGUMENT, limit=3)
    # two lists were enough had they been full; they held one argument each: one more list
    assert argument_calls(asked) == 3
    assert [(t.unit, t.planned) for t in summary.tallies] == [
        ("argument lists", 2),
        ("argument lists", 1),
        ("debates", 3),
    ]
    pairs = [("Zoos", "Affirmative"), ("Zoos", "Negative"), ("Homework", "Affirmative")]
    assert [(d["topic"], d["stance"]) for d in read_log(tmp_path / "debates.jsonl")] == pairs
    # the log is in plan order, though each round wrote its own lists first
    assert [(a["topic"], a["stance"]) for a in read_log(tmp_path / "arguments.jsonl")] == pairs


def test_logs_end_with_this_runs_items_in_plan_order_then_earlier_ones(tmp_path):
    first, second = Topic("Zoos"), Topic("Homework")
    debate_in(tmp_path, [second], TWO_ARGUMENTS, concurrency=8)
    _, asked = debate_in(tmp_path, [first, second], TWO_ARGUMENTS, concurrency=8)
    assert argument_calls(asked) == 2  # Homework's lists came from the log
    order = [(first.topic, s) for s in STANCES] + [(second.topic, s) for s in STANCES]
    arguments = read_log(tmp_path / "arguments.jsonl")
    assert [(a["topic"], a["stance"]) for a in arguments] == order
    topics = [d["topic"] for d in read_log(tmp_path / "debates.jsonl")]
    assert topics == ["Zoos"] * 4 + ["Homework"] * 4
    dataset = read_log(tmp_path / "dataset.jsonl")
    assert [d["id"] for d in dataset] == [d["id"] for d in read_log(tmp_path / "debates.jsonl")]
    # a run of the second topic alone puts it first and keeps the first topic's after it
    summary, asked = debate_in(tmp_path, [second], TWO_ARGUMENTS)
    assert asked == [] and summary.already_done == 4
    topics = [d["topic"] for d in read_log(tmp_path / "debates.jsonl")]
    assert topics == ["Homework"] * 4 + ["Zoos"] * 4
    assert [a["topic"] for a in read_log(tmp_path / "arguments.jsonl")] == ["Homework"] * 2 + [
        "Zoos"
    ] * 2


def test_an_argument_listed_twice_is_one_debate(tmp_path):
    twice = {"Affirmative": ("Zoos protect species.",) * 2, "Negative": ("Zoos confine.", "Cages.")}
    summary, asked = debate_in(tmp_path, [Topic("Zoos", twice)], TWO_ARGUMENTS)
    assert summary.ok and (summary.planned, summary.completed) == (3, 3)
    assert len(asked) == 3 * 3  # each debate's two turns and conclusion, once
    assert len(read_log(tmp_path / "debates.jsonl")) == 3
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["counts"]["debates"] == manifest["counts"]["debates_ok"] == 3


def test_given_arguments_run_no_argument_stage_and_still_write_its_log(tmp_path):
    summary, _ = debate_in(tmp_path, [Topic("Zoos", GIVEN)], TWO_ARGUMENTS)
    assert [t.unit for t in summary.tallies] == ["debates"]
    assert (tmp_path / "arguments.jsonl").read_text() == ""  # `moot merge-shards` reads it


# --- merge checks every shard before it writes anything ------------------------

ARGUMENTS = '{"arguments": ["Homework builds habits {n}."]}'


@pytest.fixture(scope="module")
def finished_shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-shard run: 2 given and 2 generated debates, 2 argument lists."""
    folder = tmp_path_factory.mktemp("shard") / "s0"
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS)]
    topics = [Topic("Zoos", GIVEN), Topic("Homework")]
    with ScriptedServer(rules=rules) as server:
        client = ModelClient(retry=RetryPolicy(attempts=1))
        summary = asyncio.run(run_debatune(topics, folder, config(server.url, 1), client))
    assert summary.ok and summary.completed == 4
    return folder


def shard_copy(finished_shard: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_shard, tmp_path / "s0"))


def edit_line(path: Path, number: int, edit: Callable[[dict[str, Any]], Any]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[number - 1])
    edit(record)
    lines[number - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def merge_error(shard: Path, out: Path) -> str:
    with pytest.raises(InputError) as info:
        merge_runs([shard], out)
    assert not out.exists()  # nothing written
    return str(info.value)


def test_merge_of_a_finished_shard_keeps_every_debate(finished_shard, tmp_path):
    counts = merge_runs([finished_shard], tmp_path / "m")
    assert counts == {"debates": 4, "debates_ok": 4, "failures": 0, "dataset_records": 4}


def test_merge_refuses_a_corrupt_line_inside_a_shard_log(finished_shard, tmp_path):
    shard = shard_copy(finished_shard, tmp_path)
    log = shard / "debates.jsonl"
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join([lines[0][:40], *lines[1:]]))  # the first debate cut short
    message = merge_error(shard, tmp_path / "m")
    assert message.startswith(f"{log}, line 1: invalid JSON: ")
    assert "rerun this shard's `moot debate` command" in message


def test_merge_refuses_bytes_that_are_not_utf8_inside_a_shard_log(finished_shard, tmp_path):
    shard = shard_copy(finished_shard, tmp_path)
    log = shard / "arguments.jsonl"
    log.write_bytes(log.read_bytes().replace(b"Homework", b"Hom\xe9work", 1))
    assert merge_error(shard, tmp_path / "m").startswith(f"{log}, line 1: not UTF-8")


def test_merge_skips_only_a_torn_last_line_as_unfinished(finished_shard, tmp_path):
    shard = shard_copy(finished_shard, tmp_path)
    with (shard / "debates.jsonl").open("ab") as f:  # a crash in the middle of an append
        f.write('{"id": "zzz", "topic": "Café – x'.encode()[:-3])
    counts = merge_runs([shard], tmp_path / "m")
    assert counts == {"debates": 4, "debates_ok": 4, "failures": 0, "dataset_records": 4}


def test_merge_reads_argument_lists_written_before_attempts_were_recorded(finished_shard, tmp_path):
    shard = shard_copy(finished_shard, tmp_path)
    log = shard / "arguments.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for record in records:
        del record["attempt"]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    counts = merge_runs([shard], tmp_path / "m")
    assert counts == {"debates": 4, "debates_ok": 4, "failures": 0, "dataset_records": 4}


def drop_status(record: dict[str, Any]) -> None:
    del record["status"]


@pytest.mark.parametrize(
    ("name", "edit", "problem"),
    [
        ("debates.jsonl", drop_status, "missing 'status'"),
        ("debates.jsonl", lambda r: r.update(transcript="oops"), "'transcript' must be a list"),
        (
            "debates.jsonl",
            lambda r: r.update(conclusion=5),
            "'conclusion' must be text or null, got a number",
        ),
        ("debates.jsonl", lambda r: r.update(conclusion=None), "an ok debate needs a 'conclusion'"),
        ("debates.jsonl", lambda r: r.update(status="done"), "'status' must be \"ok\" or"),
        ("debates.jsonl", lambda r: r.update(rounds=True), "'rounds' must be an integer, got a b"),
        (
            "debates.jsonl",
            lambda r: r.update(transcript=[1]),
            "'transcript' must be a list of turn objects",
        ),
        ("arguments.jsonl", lambda r: r.update(arguments="x"), "'arguments' must be a list"),
        ("arguments.jsonl", lambda r: r.update(stance="Pro"), "'stance' must be 'Affirmative' or"),
    ],
)
def test_merge_refuses_a_malformed_shard_record(finished_shard, tmp_path, name, edit, problem):
    shard = shard_copy(finished_shard, tmp_path)
    edit_line(shard / name, 2, edit)
    message = merge_error(shard, tmp_path / "m")
    assert message.startswith(f"{shard / name}, line 2: {problem}"), message


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda m: m.pop("identity"), "missing 'identity'"),
        (lambda m: m.update(runs={}), "'runs' must be a list, got an object"),
        (lambda m: m["identity"].pop("seed"), "'identity' has no integer 'seed'"),
        (lambda m: m.update(shard="first"), "'shard' must be 'I/N' or 'partial', got 'first'"),
        (
            lambda m: m.update(ledger_total={"by_role": [{"x": 1}]}),
            "'ledger_total' is not a usage ledger",
        ),
    ],
)
def test_merge_refuses_a_malformed_shard_manifest(finished_shard, tmp_path, edit, problem):
    shard = shard_copy(finished_shard, tmp_path)
    path = shard / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    assert merge_error(shard, tmp_path / "m") == f"{path}: {problem}"


def test_an_unreadable_shard_manifest_is_not_called_the_output(finished_shard, tmp_path):
    shard = shard_copy(finished_shard, tmp_path)
    (shard / "manifest.json").write_text("{")
    message = merge_error(shard, tmp_path / "m")
    assert "rerun this shard's `moot debate` command" in message and "--out" not in message
