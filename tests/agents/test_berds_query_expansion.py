"""BERDS query expansion: the perspective call and the round-robin merge."""

from __future__ import annotations

import asyncio

from moot.agents.berds_query_expansion import expand_query, expanded_search, round_robin
from moot.core.data.corpus import Chunk
from moot.core.llm.models import ModelClient, RetryPolicy
from moot.core.llm.spec import Role, parse_spec
from moot.core.retrieval.index import Hit
from moot.testing import Rule, ScriptedServer


def hit(name: str, score: float = 1.0) -> Hit:
    return Hit(Chunk(f"{name}#0", name, f"text of {name}"), score)


def test_round_robin_skips_duplicates_and_stops_at_k():
    rankings = [
        [hit("a", 3), hit("b", 2), hit("c", 1)],
        [hit("b", 9), hit("d", 8)],
        [hit("a", 5), hit("e", 4), hit("f", 3)],
    ]
    merged = round_robin(rankings, 5)
    assert [h.chunk.id for h in merged] == ["a#0", "b#0", "d#0", "e#0", "c#0"]
    assert [h.score for h in merged] == [3, 9, 8, 4, 1]  # each keeps its own list's score
    assert len(round_robin(rankings, 100)) == 6
    assert round_robin([], 3) == []


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.queries: list[tuple[str, int]] = []

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append((query, k))
        return [hit(f"{query[-1]}{i}") for i in range(k)]


def test_expanded_search_queries_question_plus_perspective():
    recorder = Recorder()
    hits = expanded_search(recorder, "Q?", ["pro X", "con Y"], 3)
    assert recorder.queries == [("Q? pro X", 3), ("Q? con Y", 3)]
    assert [h.chunk.doc_id for h in hits] == ["X0", "Y0", "X1"]


def run_expansion(server: ScriptedServer, question: str):
    role = Role("query_expander", parse_spec("openai/scripted", api_base=server.url), 0.0)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    return asyncio.run(expand_query(client, role, question))


def test_expansion_parses_perspectives_and_sends_the_berds_prompt():
    rules = [
        Rule(pattern="Question: Is UBI good", reply='{"perspectives": ["Yes, it helps.", " "]}')
    ]
    with ScriptedServer(rules=rules) as server:
        result = run_expansion(server, "Is UBI good?")
        prompt = server.requests[0].body["messages"][0]["content"]
    assert result.ok and result.value.perspectives == ["Yes, it helps."]
    assert prompt.startswith("Generate diverse perspectives that answer the given question.")


def test_an_unparsable_expansion_is_an_explicit_failure():
    with ScriptedServer(rules=[Rule(pattern=".", reply="I have no idea.")]) as server:
        result = run_expansion(server, "Is UBI good?")
        calls = len(server.requests)
    assert not result.ok and result.value is None
    assert result.failure.to_json()["parse_failure"] is True
    assert calls == 2  # the first reply and one repair round
