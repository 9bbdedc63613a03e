"""BERDS and the perspective detector through the Python API, against the scripted server.

No request cache: a rerun that makes no request proves the judgment log, not the cache, resumed it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.graphs.berds_eval import BerdsInstance, DetectorPair, evaluate_berds, evaluate_detector
from moot.graphs.judging import Judging
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import read_jsonl

RULES = [Rule(r"Document: <<<document \w+>>>\nSUPPORTS", "Yes"), Rule("Document: ", "No")]


def detector(server: ScriptedServer, out: Path) -> Judging:
    role = Role("perspective_detector", parse_spec("openai/detector", api_base=server.url))
    return Judging(out, role, ModelClient(retry=RetryPolicy(attempts=1)))


def test_a_pair_given_twice_is_judged_once_and_counted_twice(tmp_path):
    pairs = [
        DetectorPair("1", "Q?", "SUPPORTS it.", "P", 1),
        DetectorPair("2", "Q?", "Off topic.", "P", 0),
        DetectorPair("3", "Q?", "SUPPORTS it.", "P", 1),  # the same document and perspective
    ]
    with ScriptedServer(rules=RULES) as server:
        result = asyncio.run(evaluate_detector(pairs, detector(server, tmp_path)))
        assert len(server.requests) == 2
        server.clear_log()
        again = asyncio.run(evaluate_detector(pairs, detector(server, tmp_path)))
        assert server.requests == []
    assert [r["pair_id"] for r in result.records] == ["1", "2"]  # the first of a repeated id
    assert [r["pair_id"] for r in read_jsonl(tmp_path / "judgments.jsonl")] == ["1", "2"]
    assert (result.summary["pairs"], result.summary["scored"], result.summary["tp"]) == (3, 3, 2)
    assert result.summary["accuracy"] == 1.0 and again.summary == {
        **result.summary,
        "ledger": again.summary["ledger"],
    }
    tally = result.tallies[0]
    assert (tally.planned, tally.done, tally.failed) == (2, 2, 0)
    assert (again.tallies[0].planned, again.tallies[0].skipped) == (2, 2)
    claim = json.loads((tmp_path / ".moot" / "eval.json").read_text())
    assert list(claim) == ["evaluation", "judge", "temperature", "seed", "prompts"]


def test_a_document_retrieved_twice_is_judged_once_per_perspective(tmp_path):
    question = BerdsInstance(
        "q1",
        "Should it?",
        ("SUPPORTS it.", "Off topic.", "SUPPORTS it."),
        ("c0", "c1", "c2"),
        ("P0", "P1"),
    )
    with ScriptedServer(rules=RULES) as server:
        result = asyncio.run(evaluate_berds([question], detector(server, tmp_path), k=3))
        assert len(server.requests) == 2 * 2  # two distinct documents, two perspectives
    assert [(r["chunk_id"], r["perspective_index"]) for r in result.records] == [
        ("c0", 0),
        ("c1", 0),
        ("c0", 1),
        ("c1", 1),
    ]
    (scores,) = read_jsonl(tmp_path / "scores.jsonl")
    assert scores["mrecall"] == 1 and scores["precision"] == 2 / 3  # ranks 0 and 2 support both
    assert result.summary["detections"] == 4 and result.tallies[0].done == 4
