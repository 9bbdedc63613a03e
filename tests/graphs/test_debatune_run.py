"""The Python API of a DEBATunE run, against the scripted server."""

from __future__ import annotations

import asyncio
import json

import pytest

from moot.core import ModelClient, RetryPolicy, Role, Topic, load_topics, parse_spec
from moot.core.scripted_server import Rule, ScriptedServer
from moot.graphs import DebateRunConfig, Shard, run_debatune
from tests.conftest import shared_data

GIVEN = {"Affirmative": ("Zoos protect species.",), "Negative": ("Zoos confine animals.",)}


def config(url: str, rounds: int) -> DebateRunConfig:
    spec = parse_spec("openai/scripted", api_base=url)
    return DebateRunConfig(
        Role("debater_a", spec, 0.7),
        Role("debater_b", spec, 1.0),
        rounds=rounds,
        arguments_per_stance=1,
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
