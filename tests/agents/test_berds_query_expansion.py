"""BERDS query expansion: the perspective call and the round-robin merge."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from moot.agents.berds_query_expansion import (
    EXPANSION_PROMPTS,
    expand_query,
    expanded_search,
    round_robin,
)
from moot.core.data.corpus import Chunk
from moot.core.llm.models import ModelClient, RetryPolicy
from moot.core.llm.spec import Role, parse_spec
from moot.core.retrieval.index import Hit
from moot.prompts import render
from moot.testing import Rule, ScriptedServer
from tests.conftest import SHARED_DATA


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


def run_expansion(server: ScriptedServer, question: str, prompt: str = "paper"):
    role = Role("query_expander", parse_spec("openai/scripted", api_base=server.url), 0.0)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    return asyncio.run(expand_query(client, role, question, prompt=prompt))


def test_the_default_prompt_is_the_papers_table_13_word_for_word():
    paper = SHARED_DATA.parent / "papers" / "berds.txt"
    if not paper.exists():
        pytest.skip(f"needs {paper}")
    printed = re.sub(r"\s+", "", paper.read_text(encoding="utf-8"))  # the PDF lost its spaces
    table_13 = printed[printed.index("Generatediverseperspectives") : printed.index("Table13:")]
    rendered = render(EXPANSION_PROMPTS["paper"].template, question="[Question]")
    assert re.sub(r"\s+", "", rendered) == table_13
    # the released query_exp/instruction.txt's words and layout (its trailing space aside)
    assert rendered.endswith("separated by whitespace.\n\nQuestion: [Question]")


def test_the_papers_answer_is_read_field_by_field():
    reply = '{"Basic Security": "It gives everyone a floor.", "Work Incentives": "It deters work."'
    reply += ', "Blank": " "}'
    rules = [Rule(pattern="Question: Is UBI good", reply=f"Here it is:\n```json\n{reply}\n```")]
    with ScriptedServer(rules=rules) as server:
        result = run_expansion(server, "Is UBI good?")
        (request,) = server.requests
    assert result.ok and result.value.perspectives == [
        "It gives everyone a floor.",
        "It deters work.",
    ]
    assert request.body["messages"] == [
        {"role": "user", "content": render("berds/query_expansion.j2", question="Is UBI good?")}
    ]


def test_the_papers_answer_may_hold_any_number_of_perspectives():
    """Table 13 sets no most: 13 fields are 13 perspectives (only constrained decoding bounds)."""
    fields = {f"View {n}": f"Perspective {n}." for n in range(13)}
    rules = [Rule(pattern="Question: Is UBI good", reply=json.dumps(fields))]
    with ScriptedServer(rules=rules) as server:
        result = run_expansion(server, "Is UBI good?")
    assert result.ok and result.value.perspectives == list(fields.values())


@pytest.mark.parametrize(
    ("reply", "calls"),
    [
        ('{"perspectives": ["Yes, it helps."]}', 2),  # list's answer: a list is not a perspective
        ('{"A": " ", "B": ""}', 1),  # read, but every perspective blank
        ("I have no idea.", 2),
    ],
)
def test_a_reply_without_perspectives_is_an_explicit_failure(reply, calls):
    with ScriptedServer(rules=[Rule(pattern=".", reply=reply)]) as server:
        result = run_expansion(server, "Is UBI good?")
        made = len(server.requests)
    assert not result.ok and result.value is None
    assert result.failure.to_json()["parse_failure"] is True
    assert made == calls  # the first reply, and one repair round for an unreadable one


def test_the_list_mode_sends_moots_earlier_prompt_and_reads_a_list():
    rules = [
        Rule(pattern="Question: Is UBI good", reply='{"perspectives": ["Yes, it helps.", " "]}')
    ]
    with ScriptedServer(rules=rules) as server:
        result = run_expansion(server, "Is UBI good?", prompt="list")
        prompt = server.requests[0].body["messages"][0]["content"]
    assert result.ok and result.value.perspectives == ["Yes, it helps."]
    assert prompt == render("berds/query_expansion_list.j2", question="Is UBI good?")
    assert 'one field, "perspectives", a list of strings' in prompt
