"""Parsing argument lists out of debater replies, and the argument-list schema."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from moot.agents.debatune_debaters import argument_schema, opposite, parse_argument_list
from moot.core.llm.structured import OutputParseError, parse_structured

THREE = ["Uniforms reduce bullying.", "Uniforms save money.", "Uniforms build identity."]


@pytest.mark.parametrize(
    "text",
    [
        "1. Uniforms reduce bullying.\n2. Uniforms save money.\n3. Uniforms build identity.",
        "1) Uniforms reduce bullying.\n2) Uniforms save money.\n3) Uniforms build identity.",
        "(1) Uniforms reduce bullying.\n(2) Uniforms save money.\n(3) Uniforms build identity.",
        "- Uniforms reduce bullying.\n- Uniforms save money.\n- Uniforms build identity.",
        "* Uniforms reduce bullying.\n* Uniforms save money.\n* Uniforms build identity.",
        "• Uniforms reduce bullying.\n• Uniforms save money.\n• Uniforms build identity.",
        "Argument 1: Uniforms reduce bullying.\nArgument 2: Uniforms save money.\n"
        "Argument 3: Uniforms build identity.",
        "argument 1 - Uniforms reduce bullying.\nargument 2 - Uniforms save money.\n"
        "argument 3 - Uniforms build identity.",
        "Here are my arguments:\n\n1. Uniforms reduce bullying.\n2. Uniforms save money.\n"
        "3. Uniforms build identity.\n",
        "1. **Uniforms reduce bullying.**\n2. **Uniforms save money.**\n"
        "3. __Uniforms build identity.__",
        '1. "Uniforms reduce bullying."\n2. "Uniforms save money."\n3. "Uniforms build identity."',
        "  1.  Uniforms reduce bullying.  \n  2.  Uniforms save money.\n"
        "  3. Uniforms build identity.",
    ],
)
def test_line_lists(text: str) -> None:
    assert parse_argument_list(text) == THREE


def test_bold_heading_inside_item_is_kept_as_text() -> None:
    text = "1. **Safety**: Uniforms reduce bullying.\n2. **Cost**: Uniforms save money."
    assert parse_argument_list(text) == [
        "Safety: Uniforms reduce bullying.",
        "Cost: Uniforms save money.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "**1.** Uniforms reduce bullying.\n**2.** Uniforms save money.\n"
        "**3.** Uniforms build identity.",
        "**Argument 1:** Uniforms reduce bullying.\n**Argument 2:** Uniforms save money.\n"
        "**Argument 3:** Uniforms build identity.",
    ],
)
def test_bold_list_markers(text: str) -> None:
    assert parse_argument_list(text) == THREE


def test_one_line_list_does_not_split_inside_decimals() -> None:
    text = (
        "1. Uniforms cut costs by 3.5 percent. 2. Attendance rose 2.0% in trials. "
        "3. Parents spend 1.5 times less on clothes."
    )
    assert parse_argument_list(text) == [
        "Uniforms cut costs by 3.5 percent.",
        "Attendance rose 2.0% in trials.",
        "Parents spend 1.5 times less on clothes.",
    ]


def test_one_line_list_only_splits_at_the_next_number() -> None:
    text = "1. Schools in 3. districts agree. 2. Costs fall. 3. Pride grows."
    # "3." inside item 1 is not the next expected number, so it cannot start an item.
    assert parse_argument_list(text) == [
        "Schools in 3. districts agree.",
        "Costs fall.",
        "Pride grows.",
    ]


def test_one_line_list_with_parentheses() -> None:
    text = "1) Uniforms reduce bullying. 2) Uniforms save money. 3) Uniforms build identity."
    assert parse_argument_list(text) == THREE


@pytest.mark.parametrize(
    "text",
    [
        "I think uniforms are a good idea overall and schools should adopt them.",
        "In 2020, 3.5 million pupils wore uniforms, about 2.0% more than before.",
        "",
        "   \n  ",
    ],
)
def test_prose_without_a_list_yields_nothing(text: str) -> None:
    assert parse_argument_list(text) == []


def test_duplicates_and_blank_items_are_removed() -> None:
    text = (
        "1. Uniforms reduce bullying.\n2. **Uniforms reduce bullying.**\n3. Uniforms save money.\n"
        '4. "Uniforms save money."\n5. Uniforms build identity.'
    )
    assert parse_argument_list(text) == THREE


def test_argument_schema_accepts_one_to_count_items() -> None:
    schema = argument_schema(3)
    for n in (1, 2, 3):
        value = schema.model_validate({"arguments": THREE[:n]})
        assert value.arguments == THREE[:n]  # type: ignore[attr-defined]
    padded = schema.model_validate({"arguments": ["  Uniforms save money.  "]})
    assert padded.arguments == ["Uniforms save money."]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "arguments",
    [
        [*THREE, "A fourth argument."],
        [],
        ["Uniforms reduce bullying.", ""],
        ["   "],
        ["ok"],
        ["x" * 301],
    ],
)
def test_argument_schema_rejects(arguments: list[str]) -> None:
    with pytest.raises(ValidationError):
        argument_schema(3).model_validate({"arguments": arguments})


def test_argument_schema_json_schema_and_cache() -> None:
    schema = argument_schema(3)
    assert argument_schema(3) is schema
    items = schema.model_json_schema()["properties"]["arguments"]
    assert (items["minItems"], items["maxItems"]) == (1, 3)
    assert argument_schema(5).model_json_schema()["properties"]["arguments"]["maxItems"] == 5


def test_argument_schema_with_tolerant_parse() -> None:
    reply = 'Sure! {"arguments": ["Uniforms reduce bullying.", "Uniforms save money."]}'
    assert parse_structured(reply, argument_schema(3)).arguments == THREE[:2]  # type: ignore[attr-defined]
    with pytest.raises(OutputParseError, match="arguments"):
        parse_structured('{"arguments": []}', argument_schema(3))


def test_opposite() -> None:
    assert opposite("Affirmative") == "Negative"
    assert opposite("Negative") == "Affirmative"
