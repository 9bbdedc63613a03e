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
from moot.prompts import template_source
from moot.testing import Rule, ScriptedServer
from tests.conftest import shared_data
from tests.fenced import NOTE, unfence

ARGS = ["Baseball players throw faster.", "Baseball is on TV.", "Softball is harder."]


def prompt(scenario, arguments=()):
    messages = comparison_messages(scenario, "baseball", "softball", arguments)
    assert [m["role"] for m in messages] == ["user"]
    return messages[0]["content"]


NUMBERED = "1. Baseball players throw faster.\n2. Baseball is on TV.\n3. Softball is harder."
# Figure 4 of the paper, its words in order with the slots filled (layout: one part per line)
FIGURE_4 = {
    1: "Compare baseball and softball",
    2: "You are a helpful assistant.\nCompare baseball and softball using following arguments:\n"
    + NUMBERED,
    3: "You are an analyst.\nwrite a 300-word comparison of baseball and softball.\n"
    "Task: compare and choose the better of the two.\nRequirements:\n- be concise\n"
    "- think of the most relevant arguments only.\nNeeded structure:\n- summary (100 words)\n"
    "- bullet-point list of main aspects of comparison (200 words or more)\n"
    "- the best option (1 word)",
    4: "You are an analyst.\nwrite a 300-word comparison of baseball and softball.\n"
    "Task: compare and choose the better of the two.\nRequirements:\n- be concise\n"
    "- analyse the list of arguments below\n- pick relevant ones\n"
    "- rephrase in your own words\n"
    "- cite used argument numbers in square brackets right after the usage\n"
    "- the summary needs to have 15 arguments, create some if needed (add a [generated] tag)\n"
    "Needed structure:\n- summary (100 words)\n"
    "- bullet-point list of main aspects of comparison (200 words or more)\n"
    "- the best option (1 word)\n- numbered list of used arguments\nArgument list:\n" + NUMBERED,
}


@pytest.mark.parametrize("scenario", [1, 2, 3, 4])
def test_scenarios_are_figure_4_verbatim(scenario):
    text = prompt(scenario, ARGS if scenario in (2, 4) else ())
    # the figure's words verbatim; moot fences the argument list and says what the fence means
    assert unfence(text) == FIGURE_4[scenario]
    assert (NOTE in text) == (scenario in (2, 4))
    # the paper: scenario 1 assigns no role, the other three do
    assert text.startswith("You are ") == (scenario != 1)


def test_the_paper_figure_words_match_the_templates():
    """Each template's words are the figure's, as the paper text prints them (slots filled)."""
    paper = shared_data("..", "papers", "compqa.txt").read_text(encoding="utf-8")
    rows = {
        line[:3]: line[3:].strip()
        for line in paper.splitlines()
        if line[:3] in ("1st", "2nd", "3rd", "4th")
    }
    filled = {
        n: rows[key]
        .replace("<u>", "")
        .replace("</u>", "")
        .replace("{A}", "baseball")
        .replace("{B}", "softball")
        .replace("{ARGS}", NUMBERED)
        for n, key in ((1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"))
    }
    for n, text in filled.items():
        assert " ".join(FIGURE_4[n].split()) == " ".join(text.split()), n


def test_arguments_belong_to_scenarios_2_and_4_only():
    for scenario in (2, 4):
        with pytest.raises(ValueError, match="needs arguments"):
            prompt(scenario)
    for scenario in (1, 3):
        with pytest.raises(ValueError, match="takes no arguments"):
            prompt(scenario, ARGS)
    with pytest.raises(ValueError, match="unknown scenario"):
        prompt(5)


def test_every_template_cites_the_paper_and_scenarios_cite_figure_4():
    for name in TEMPLATES:
        header = template_source(name).split("#}")[0]
        if name.startswith("compqa/"):
            assert "arXiv:2502.14476" in header, name
        if "scenario" in name:
            assert "Nikishina et al., 2025" in header and "Figure 4" in header, name
            assert "RECONSTRUCTED" not in header, name


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
        GeneratedArguments.model_validate({"object1": ["a"] * 11, "object2": []})


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
        assert "at most 10 arguments" in body["messages"][0]["content"]
