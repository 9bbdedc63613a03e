"""Answering the DEBATunE test instructions through the Python API, against the scripted server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from moot.core import ModelClient, RetryPolicy, Role, Topic, parse_spec
from moot.graphs.debatune_generate import (
    answer_instructions,
    debate_test_instructions,
)
from moot.testing import Fault, ScriptedServer

TOPIC = Topic("Zoos", {"Affirmative": ("A1 cages", "A2 stress"), "Negative": ("N1 species",)})


def answer(url: str, out: Path, items: list[dict[str, str]] | None = None):
    role = Role("generator", parse_spec("openai/m", api_base=url), 0.0)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    items = items or debate_test_instructions([TOPIC], "topics")
    return asyncio.run(answer_instructions(items, out, role, client, max_tokens=64))


def test_a_failure_is_tallied_and_only_it_is_asked_again(tmp_path):
    out = tmp_path / "responses.json"
    with ScriptedServer() as server:
        server.add_fault(Fault(kind="500", times=1, match="A2 stress"))
        first = answer(server.url, out)
        assert first.failed == 1 and not out.exists()  # written only with every answer
        server.clear_log()
        second = answer(server.url, out)
        assert len(server.requests) == 1
    assert [r["status"] for r in first.records] == ["ok", "error", "ok"]
    assert [(t.unit, t.planned, t.skipped, t.done, t.failed) for t in first.tallies] == [
        ("instructions", 3, 0, 2, 1)
    ]
    assert [(t.planned, t.skipped, t.done, t.failed) for t in second.tallies] == [(3, 2, 1, 0)]
    assert second.failed == 0
    answers = json.loads(out.read_text())
    assert [a["argument"] for a in answers] == ["A1 cages", "A2 stress", "N1 species"]
    # the hidden log is compacted to one line per instruction, in their order
    log = [json.loads(line) for line in (tmp_path / ".responses.json.progress.jsonl").open()]
    assert [r["argument"] for r in log] == ["A1 cages", "A2 stress", "N1 species"]


def test_an_instruction_given_twice_is_asked_once_and_written_twice(tmp_path):
    items = debate_test_instructions([TOPIC], "topics")[:1] * 2
    with ScriptedServer() as server:
        result = answer(server.url, tmp_path / "out.json", items)
        assert len(server.requests) == 1
    assert len(result.records) == 2 and result.tallies[0].planned == 1
    assert len(json.loads((tmp_path / "out.json").read_text())) == 2
