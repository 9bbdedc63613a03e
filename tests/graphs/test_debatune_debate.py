"""DEBATunE's debate, run as its protocol, sends what DEBATunE's own graph sent, byte for byte.

``data/debatune_requests.json`` holds the requests (messages, budget, seed, temperature) of one
topic with one given argument per stance, debated 2 rounds and 0 rounds, as recorded from
`moot debate` before its debate became a protocol (commit 655e25d).
"""

from __future__ import annotations

import json
from pathlib import Path

import moot
from moot.testing import Rule, ScriptedServer

RECORDED = Path(__file__).parent / "data" / "debatune_requests.json"
GIVEN = {
    "topic": "Should zoos be banned?",
    "Affirmative": {"arguments": ["Cages harm animals."]},
    "Negative": {"arguments": ["Zoos save species."]},
}


def test_the_protocol_sends_the_requests_debatunes_graph_sent(tmp_path):
    topics = tmp_path / "topics.jsonl"
    topics.write_text(json.dumps(GIVEN) + "\n", encoding="utf-8")
    sent = {}
    for rounds in (2, 0):
        with ScriptedServer(rules=[Rule("AI:", "Turn {n} text.", role="last")]) as server:
            moot.debate(
                topics=topics,
                out=tmp_path / f"r{rounds}",
                model="openai/scripted",
                api_base=server.url,
                rounds=rounds,
                arguments_per_stance=1,
                concurrency=1,
                no_cache=True,
                seed=3,
                temperature_b=1.0,
            )
        keys = ("messages", "max_tokens", "seed", "temperature")
        sent[str(rounds)] = [{key: r.body[key] for key in keys} for r in server.requests]
    assert sent == json.loads(RECORDED.read_text(encoding="utf-8"))
