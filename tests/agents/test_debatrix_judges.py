"""Debatrix pieces: frameworks, dimensions, prompts and winner validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from moot.agents.debatrix_judges import (
    FRAMEWORKS,
    analysis_messages,
    choose_dimensions,
    judgment_messages,
    winner_schema,
)
from moot.cli.debatrix import FRAMEWORK_NAMES
from moot.core.data.debates import Debate, Speech
from moot.core.errors import ConfigError

DEBATE = Debate(
    "d1",
    "Zoos should be abolished",
    ("Alice",),
    ("Bob",),
    (Speech("Alice", "Zoos confine animals."), Speech("Bob", "Zoos protect species.")),
    info_slide="Background.",
)


def test_the_cli_offers_every_framework():
    assert set(FRAMEWORK_NAMES) == set(FRAMEWORKS)


def test_dimensions_default_to_the_papers_with_its_weights_and_ties():
    dims = choose_dimensions(FRAMEWORKS["debatrix"], "1v1")
    assert [(d.name, d.weight, d.allow_tie) for d in dims] == [
        ("argument", 3, False),
        ("source", 2, True),
        ("language", 2, True),
    ]
    bp = choose_dimensions(FRAMEWORKS["debatrix"], "bp")
    assert [d.name for d in bp] == ["argument", "support", "clash", "language"]
    assert [d.name for d in choose_dimensions(FRAMEWORKS["direct"], "1v1")] == ["general"]


def test_weights_override_and_bad_dimensions_fail():
    dims = choose_dimensions(FRAMEWORKS["dimensional"], "1v1", ["argument", "clash"], {"clash": 2})
    assert [(d.name, d.weight) for d in dims] == [("argument", 3), ("clash", 2)]
    with pytest.raises(ConfigError, match="unknown 1v1 dimension 'support'"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["support"])
    with pytest.raises(ConfigError, match="not among --dimensions"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"], {"source": 1})
    with pytest.raises(ConfigError, match="positive weight"):
        choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"], {"argument": 0})


def test_only_debaters_and_allowed_ties_are_winners():
    with_tie, without = winner_schema(DEBATE, True), winner_schema(DEBATE, False)
    assert with_tie.model_validate({"winner": " bob."}).winner == "Bob"
    assert with_tie.model_validate({"winner": "It's a tie!"}).winner == "tie"
    for schema, value in ((without, "tie"), (with_tie, "Carol"), (with_tie, "pro")):
        with pytest.raises(ValidationError):
            schema.model_validate({"winner": value})
    assert without.model_json_schema()["properties"]["winner"]["enum"] == ["Alice", "Bob"]


def test_prompts_carry_memory_sections_and_the_tie_rule():
    (argument,) = choose_dimensions(FRAMEWORKS["debatrix"], "1v1", ["argument"])
    first = analysis_messages(DEBATE, argument, 0, [], analyses=True)
    assert "Also, you" not in first[0]["content"]  # no earlier speeches yet
    second = analysis_messages(DEBATE, argument, 1, [("Analysis of Speech 1", "A1")], True)
    assert "you have analyzed all previous speeches" in second[0]["content"]
    assert second[1]["content"].index("# Analysis of Speech 1") < second[1]["content"].index(
        "# New Speech by Bob"
    )
    judged = judgment_messages(DEBATE, argument, [("Analysis of Speech 1", "A1")], True)
    assert "Ties are not allowed" in judged[0]["content"]
    assert "Info Slide" not in judged[1]["content"]  # analyses replace the transcript
    assert "\n\n\n" not in judged[0]["content"]
