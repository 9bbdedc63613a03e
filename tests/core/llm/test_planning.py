"""The planning client: the real client's path, a transport that never sends, the ledger as plan."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from moot.core.llm.planning import UNBOUNDED_TOKENS, PlanningClient, StandInRefused
from moot.core.llm.spec import Role, parse_spec
from moot.core.llm.stand_in import StandIn, json_stand_in, schema_stand_in
from moot.core.llm.structured import OutputParseError
from moot.core.llm.tokens import count_message_tokens, count_tokens
from moot.core.plan import Plan
from moot.core.runs import Tally

ASK = [{"role": "user", "content": "Say something about zoos."}]


def role(spec: str = "local/smollm2", name: str = "debater_a") -> Role:
    return Role(name, parse_spec(spec), 0.0)


def test_the_ledger_is_the_plan_and_nothing_is_started_or_sent():
    """The embedded model's spec: no server starts (nothing listens), the reply is a stand-in
    at the call's budget, and the plan's rows are the ledger's: prompt counted, budget out."""
    client = PlanningClient()
    note = StandIn(note="{calls} replies are unknown", at_most=True)

    async def calls() -> list[str]:
        first = await client.complete(role(), ASK, stage="opening", max_tokens=30)
        second = await client.complete(role(), ASK, stage="opening", max_tokens=30, stand_in=note)
        third = await client.complete(role(), ASK, stage="opening", max_tokens=30, stand_in=note)
        return [first.text, second.text, third.text]

    texts = asyncio.run(calls())
    assert [count_tokens(text) for text in texts] == [30, 30, 30]
    plan = Plan.of_run(client, [Tally("debates", planned=5, skipped=2)])
    (row,) = plan.rows
    assert (row.role, row.stage, row.spec.name, row.calls) == (
        "debater_a",
        "opening",
        row.spec.name,
        3,
    )
    assert (row.input_tokens, row.output_tokens) == (3 * count_message_tokens(ASK), 90)
    assert [(i.unit, i.planned, i.done, i.to_run) for i in plan.items] == [("debates", 5, 2, 3)]
    assert plan.notes == ["2 replies are unknown"] and plan.calls_at_most


def test_a_call_without_a_budget_is_counted_at_a_stated_bound():
    client = PlanningClient()
    asyncio.run(client.complete(role("openai/gpt-4o-mini"), ASK, stage="answer"))
    (row,) = Plan.of_run(client).rows
    assert row.output_tokens == UNBOUNDED_TOKENS
    assert Plan.of_run(client).notes == [
        f"calls without a token budget: 1, each counted at {UNBOUNDED_TOKENS}"
    ]
    assert Plan.of_run(client).cost_usd() > 0  # priced from the cost map: a dry run's estimate


class Verdict(BaseModel):
    winner: Literal["Alice", "Bob"]
    score: int = Field(ge=3, le=10)
    margin: float = Field(gt=0.5)
    reasons: list[str] = Field(min_length=2)
    summary: str = Field(max_length=12)


def test_a_structured_call_s_stand_in_is_a_value_of_its_schema():
    client = PlanningClient()
    result = asyncio.run(
        client.complete_structured(role(), ASK, Verdict, stage="verdict", max_tokens=50)
    )
    assert result.ok and result.value.winner == "Alice" and result.value.score == 3
    assert len(result.value.reasons) == 2 and len(result.value.summary) <= 12
    assert schema_stand_in(Verdict.model_json_schema())["margin"] > 0.5


def test_a_stand_in_its_parser_refuses_is_moot_s_bug_not_a_repair_round():
    def parse(text: str) -> str:
        raise OutputParseError("expected [[A]] or [[B]]")

    client = PlanningClient()
    with pytest.raises(StandInRefused, match="^verdict: its stand-in reply does not parse"):
        asyncio.run(client.complete_parsed(role(), ASK, parse, str, stage="verdict", max_tokens=9))
    assert Plan.of_run(client).calls == 1  # no ``verdict:repair`` call


def test_json_stand_in_reads_as_the_schema_it_was_made_from():
    text = json_stand_in(Verdict).reply(100)
    assert Verdict.model_validate_json(text).winner == "Alice"
