"""CompQA's scenario prompts, the extraction and argument schemas, and their structured calls."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from moot.agents.compqa_comparers import (
    TEMPLATES,
    ExtractedObjects,
    GeneratedArguments,
    comparison_messages,
    extract_objects,
    generate_arguments,
)
from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.testing.scripted_server import Rule, ScriptedServer
from moot.prompts import template_source

ARGS = ["Baseball players throw faster.", "Baseball is on TV.", "Softball is harder."]


def prompt(scenario, aspect=None, arguments=()):
    messages = comparison_messages(scenario, "baseball", "softball", aspect, arguments)
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


def test_scenario_1_is_the_bare_request():
    assert prompt(1) == "Compare baseball and softball."
    assert prompt(1, "most played sport") == (
        "Compare baseball and softball with respect to most played sport."
    )


def test_scenario_2_numbers_the_arguments():
    text = prompt(2, None, ARGS)
    assert text.startswith("Compare baseball and softball, using the following arguments:")
    assert text.endswith(
        "1. Baseball players throw faster.\n2. Baseball is on TV.\n3. Softball is harder."
    )


def test_scenario_3_asks_for_the_analysts_three_parts():
    text = prompt(3, "price")
    assert "analyst" in text and "about 300 words" in text and "with respect to price" in text
    parts = ["Summary:", "Main Aspects of Comparison:", "Best Option:"]
    assert [text.index(p) for p in parts] == sorted(text.index(p) for p in parts)
    assert "bullet-point list" in text and "one word (baseball or softball)" in text
    assert "[generated]" not in text and "Used Arguments" not in text


def test_scenario_4_adds_numbered_citations_generated_tags_and_used_arguments():
    text = prompt(4, None, ARGS)
    assert (
        "1. Baseball players throw faster.\n2. Baseball is on TV.\n3. Softball is harder." in text
    )
    parts = ["Summary:", "Main Aspects of Comparison:", "Best Option:", "Used Arguments:"]
    assert [text.index(p) for p in parts] == sorted(text.index(p) for p in parts)
    assert text.index("Softball is harder.") < text.index("Summary:")
    assert "square brackets, e.g. [2]" in text and "[generated]" in text
    assert "about 300 words" in text and "one word" in text


def test_arguments_belong_to_scenarios_2_and_4_only():
    for scenario in (2, 4):
        with pytest.raises(ValueError, match="needs arguments"):
            prompt(scenario)
    for scenario in (1, 3):
        with pytest.raises(ValueError, match="takes no arguments"):
            prompt(scenario, None, ARGS)
    with pytest.raises(ValueError, match="unknown scenario"):
        prompt(5)


def test_every_template_cites_the_paper_and_scenarios_say_they_are_reconstructed():
    for name in TEMPLATES:
        header = template_source(name).split("#}")[0]
        if name.startswith("compqa/"):
            assert "arXiv:2502.14476" in header, name
        if "scenario" in name:
            assert "Nikishina et al., 2025" in header and "RECONSTRUCTED" in header, name


def test_schemas_reject_what_is_not_a_reading():
    found = ExtractedObjects.model_validate({"object1": " Nike ", "object2": "Adidas"})
    assert (found.object1, found.aspect) == ("Nike", "")
    with pytest.raises(ValidationError, match="the same"):
        ExtractedObjects.model_validate({"object1": "Nike", "object2": "nike", "aspect": ""})
    with pytest.raises(ValidationError):
        ExtractedObjects.model_validate({"object1": "", "object2": "Adidas"})
    assert GeneratedArguments.model_validate({"object1": ["a"], "object2": []}).object2 == []
    with pytest.raises(ValidationError, match="no arguments"):
        GeneratedArguments.model_validate({"object1": [], "object2": []})
    with pytest.raises(ValidationError):
        GeneratedArguments.model_validate({"object1": ["a"] * 6, "object2": []})


def run_call(server, call, *args, **kwargs):
    spec = parse_spec("openai/scripted", api_base=server.url)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    return asyncio.run(call(client, Role("comparer", spec), *args, **kwargs))


def test_extraction_gets_one_repair_round_then_a_recorded_failure():
    good = json.dumps({"object1": "Nike", "object2": "Adidas", "aspect": "comfort"})
    rules = [
        Rule("could not be read", good, role="last"),
        Rule("Read this comparative question", "Nike vs Adidas, I think.", role="last"),
    ]
    with ScriptedServer(rules=rules) as server:
        result = run_call(server, extract_objects, "Nike or Adidas for comfort?", constrained=True)
        assert result.ok and result.value.aspect == "comfort" and len(result.completions) == 2
        first = server.requests[0].body
        assert first["response_format"]["json_schema"]["name"] == "ExtractedObjects"
        assert "Question: Nike or Adidas for comfort?" in first["messages"][0]["content"]
    same = json.dumps({"object1": "Nike", "object2": "NIKE", "aspect": ""})
    with ScriptedServer(rules=[Rule(".", same)]) as server:
        result = run_call(server, extract_objects, "Nike or Nike?")
        assert not result.ok and result.value is None
        assert "the same" in result.failure.error and result.failure.raw == same
        assert "response_format" not in server.requests[0].body  # not constrained by default


def test_argument_generation_reads_per_object_lists():
    reply = json.dumps({"object1": ["Tea calms."], "object2": ["Coffee wakes.", "Coffee sells."]})
    with ScriptedServer(rules=[Rule("List arguments", reply)]) as server:
        result = run_call(server, generate_arguments, "tea", "coffee", "health", seed=3)
        assert result.value.object2 == ["Coffee wakes.", "Coffee sells."]
        body = server.requests[0].body
        assert body["seed"] == 3
        assert "tea and coffee with respect to health" in body["messages"][0]["content"]
        assert "at most 5 arguments" in body["messages"][0]["content"]
