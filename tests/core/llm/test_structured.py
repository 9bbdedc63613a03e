"""Tolerant parsing of model replies into values and pydantic models."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from moot.core.llm.structured import (
    OutputParseError,
    ParseFailure,
    Structured,
    extract_value,
    json_schema_format,
    parse_structured,
    repaired_values,
)


class Verdict(BaseModel):
    winner: str
    score: int


EXPECTED = Verdict(winner="A", score=7)


@pytest.mark.parametrize(
    "text",
    [
        '{"winner": "A", "score": 7}',
        '  \n{"winner": "A", "score": 7}\n',
        '```json\n{"winner": "A", "score": 7}\n```',
        '```\n{"winner": "A", "score": 7}\n```',
        'Here is my verdict:\n```json\n{"winner": "A", "score": 7}\n```\nThanks!',
        'After weighing both sides, {"winner": "A", "score": 7} is my call.',
        'The {weird} aside first, then {"winner": "A", "score": 7}.',
        "{'winner': 'A', 'score': 7}",
        "Verdict: {'winner': 'A', 'score': 7, 'unanimous': True, 'notes': None}",
        'It\'s close: {"winner": "A", "score": 7}',
    ],
)
def test_parse_structured_accepts(text: str) -> None:
    assert parse_structured(text, Verdict) == EXPECTED


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('```json\n{"a": [1, {"b": 2}]}\n```', {"a": [1, {"b": 2}]}),
        ('Result: {"a": 1} and then {"b": 2}', {"a": 1}),
        ("{'flag': True, 'none': None, 'x': 'y'}", {"flag": True, "none": None, "x": "y"}),
        (
            'Prose {"note": "a } and { inside", "n": 1} more prose',
            {"note": "a } and { inside", "n": 1},
        ),
        ('He said "use { here" then {"k": "v"}', {"k": "v"}),
        ('{"s": "escaped \\" quote }"}', {"s": 'escaped " quote }'}),
    ],
)
def test_extract_value(text: str, value: object) -> None:
    assert extract_value(text) == value


def test_braces_inside_json_strings_in_prose() -> None:
    text = 'I pick {"winner": "A {the proposer}", "score": 7} overall.'
    assert parse_structured(text, Verdict) == Verdict(winner="A {the proposer}", score=7)
    text = 'I pick {"winner": "A }", "score": 7} overall.'
    assert parse_structured(text, Verdict).winner == "A }"


def test_python_repr_with_brace_in_string_inside_prose() -> None:
    text = "My verdict: {'winner': 'A }', 'score': 7} final."
    assert parse_structured(text, Verdict) == Verdict(winner="A }", score=7)


def test_later_candidate_matching_schema_wins() -> None:
    text = 'Scores were {"a": 1}; verdict {"winner": "A", "score": 7}'
    assert parse_structured(text, Verdict) == EXPECTED


@pytest.mark.parametrize(
    "text",
    [
        '{"winner": "A", "score": 7',  # cut off: the 7 may have been 70
        '{"winner": "A", "score": 7, "note": "a cl',  # cut inside a string
        '```json\n{"winner": "A", "score":\n```',
        "[1, 2",
        "",
    ],
)
def test_truncated_or_missing_json_fails(text: str) -> None:
    with pytest.raises(OutputParseError, match="no JSON"):
        parse_structured(text, Verdict)
    with pytest.raises(OutputParseError):
        extract_value(text)
    assert list(repaired_values(text)) == []


def test_a_key_cut_off_is_dropped_not_invented() -> None:
    # json_repair drops the half-written key; the rest holds only what the model finished
    with pytest.raises(OutputParseError, match="score: Field required"):
        parse_structured('{"winner": "A", "sco', Verdict)


@pytest.mark.parametrize(
    "text",
    [
        # a trailing comma or single quotes alone are Python literals (read before json_repair)
        '{"winner": "A", "score": 7, "close": false,}',  # trailing comma beside a JSON literal
        "Verdict: {'winner': 'A', 'score': 7, 'notes': null} final",  # single quotes and null
        '{winner: "A", score: 7}',  # unquoted keys
        '{"winner": "A" "score": 7}',  # a missing comma
        '// my verdict\n{"winner": "A", /* narrow */ "score": 7}',  # comments
        '{"winner": "A", "score": 7\n',  # unclosed brace, the reply not cut inside the 7
        '```json\n{"winner": "A", "score": 7\n```',
        '{"winner": "A", "score": 7\n\nA argued from evidence; B did not.',
    ],
)
def test_json_slips_are_repaired(text: str) -> None:
    assert parse_structured(text, Verdict) == EXPECTED
    assert {k: v for k, v in extract_value(text).items() if k in ("winner", "score")} == {
        "winner": "A",
        "score": 7,
    }


@pytest.mark.parametrize(
    "text",
    [
        "Debater A was more convincing overall.",
        "The {weird} aside, then A wins with 7.",
        "1. [Reason] because it is so\n2. [Evidence] none",
        '{"winner": A, "score": 7}',  # an unquoted value is prose, not a string the model wrote
        "As shown in [1\\] and [\\[2\\]], it is [never] 'never' enough.",  # PanelBench markdown
    ],
)
def test_prose_is_not_repaired_into_a_value(text: str) -> None:
    with pytest.raises(OutputParseError):
        parse_structured(text, Verdict)
    with pytest.raises(OutputParseError, match="no JSON"):
        extract_value(text)
    assert list(repaired_values(text)) == []


def test_strict_readings_come_before_repaired_ones() -> None:
    # the balanced Python literal is read as such: json_repair would keep only 'it'
    assert extract_value("{'w': 'it''s'}") == {"w": "its"}
    assert extract_value('{"a": 1} then {"b": 2,}') == {"a": 1}
    assert parse_structured('{"a": 1} then {"winner": "A", "score": 7,}', Verdict) == EXPECTED


def test_prose_only_fails() -> None:
    with pytest.raises(OutputParseError):
        parse_structured("Debater A was more convincing overall.", Verdict)


def test_schema_mismatch_names_the_field() -> None:
    with pytest.raises(OutputParseError) as info:
        parse_structured('{"winner": "A", "score": "high"}', Verdict)
    assert "score" in str(info.value) and "schema" in str(info.value)

    with pytest.raises(OutputParseError) as missing:
        parse_structured('{"winner": "A"}', Verdict)
    assert "score" in str(missing.value)


def test_schema_mismatch_is_not_replaced_by_a_default() -> None:
    with pytest.raises(OutputParseError):
        parse_structured("[]", Verdict)
    assert extract_value("[]") == []


def test_parse_failure_and_structured_records() -> None:
    failure = ParseFailure(raw="nope", error="no JSON object found", repaired=True)
    assert failure.to_json() == {
        "parse_failure": True,
        "raw": "nope",
        "error": "no JSON object found",
        "repaired": True,
    }
    assert not Structured(None, failure, "nope").ok
    assert Structured(EXPECTED, None, "{}").ok


def test_json_schema_format() -> None:
    fmt = json_schema_format(Verdict)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Verdict"
    schema = fmt["json_schema"]["schema"]
    assert set(schema["properties"]) == {"winner", "score"}
    assert set(schema["required"]) == {"winner", "score"}
    # the schema is built once, but each format is the caller's own: litellm may edit it
    schema["properties"].clear()
    assert json_schema_format(Verdict)["json_schema"]["schema"] == Verdict.model_json_schema()


def test_deep_nesting_is_read_not_a_crash() -> None:
    # json.loads raises RecursionError here (main let it escape and crash the run)
    assert isinstance(extract_value("[" * 1200 + "]" * 1200), list)
