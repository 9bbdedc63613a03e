"""`compare_questions` through the Python API, against the scripted server over HTTP.

No request cache: a rerun that makes no request proves the run log, not the cache, resumed it.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.data.compqa import load_comparisons
from moot.core.data.compqa_inputs import ArgumentFile, load_compqa_questions
from moot.core.errors import ConfigError
from moot.graphs.compqa_compare import CompareContext, compare_questions, generator_name
from moot.testing import Fault, Rule, ScriptedServer
from tests.conftest import shared_data
from tests.fenced import unfence

EXTRACTED = {"object1": "Nike", "object2": "Adidas", "aspect": "comfort"}
GENERATED = {"object1": ["One holds.", "Two holds."], "object2": ["Three holds."]}
ANSWER = "Summary: close call [1] [generated].\nBest Option: {n}"
RULES = [
    Rule("Read this comparative question", json.dumps(EXTRACTED), role="last"),
    Rule("List arguments", json.dumps(GENERATED), role="last"),
    Rule("(Compare|comparison of) ", ANSWER, role="last"),
]


def questions_file(tmp_path, count=2, free=("Nike or Adidas: which is more comfortable?",)):
    """The first `count` CompQA questions, then free-text ones."""
    lines = shared_data("compqa", "derived_questions.jsonl").read_text().splitlines()[:count]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join([*lines, *(json.dumps(q) for q in free)]) + "\n")
    return path


def run(server, tmp_path, scenario, out="out", questions=None, generator=None, **options):
    spec = parse_spec("openai/scripted", api_base=server.url)
    client = ModelClient(retry=RetryPolicy(attempts=1))  # no cache
    ctx = CompareContext(Role("comparer", spec), scenario, client=client, **options)
    items = load_compqa_questions(questions or questions_file(tmp_path))
    run = compare_questions(items, tmp_path / out, ctx, generator=generator, concurrency=4)
    return asyncio.run(run)


def contents(server):
    return [r.body["messages"][-1]["content"] for r in server.requests]


def test_scenario_4_extracts_generates_answers_and_resumes_without_calls(tmp_path):
    with ScriptedServer(rules=RULES) as server:
        result = run(server, tmp_path, 4, generate_arguments=True)
        sent = contents(server)
        assert sum(s.startswith("Read this comparative question") for s in sent) == 1
        assert sum(s.startswith("List arguments") for s in sent) == 3
        answers_asked = [s for s in sent if "numbered list of used arguments" in s]
        assert len(answers_asked) == 3 and len(server.requests) == 7
        assert all(
            unfence(s).endswith("Argument list:\n1. One holds.\n2. Two holds.\n3. Three holds.")
            for s in answers_asked
        )
        # Figure 4 has no aspect slot: the extracted objects are sent, the aspect is not
        assert any("comparison of Nike and Adidas." in s for s in answers_asked)
        assert not any("comfort" in s for s in answers_asked)

        assert result.path == tmp_path / "out" / "scripted_scenario_4.json"
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert {k: summary[k] for k in ("questions", "answered", "errors", "parse_failures")} == {
            "questions": 3,
            "answered": 3,
            "errors": 0,
            "parse_failures": 0,
        }
        assert summary["no_arguments"] == 0 and summary["scenario"] == 4
        assert summary["ledger"]["total"]["calls"] == 7 and summary["arguments_sha256"] is None

        loaded = load_comparisons(result.path)  # the file `moot eval compqa` reads
        assert [(c.object1, c.object2, c.aspect) for c in loaded] == [
            ("baseball", "softball", "most played sport"),
            ("basketball", "volleyball", "number of spectators"),
            ("Nike", "Adidas", "comfort"),
        ]
        assert {(c.generator, c.scenario) for c in loaded} == {("scripted", 4)}
        first, _, free = result.answers
        assert first["question_id"] == "0" and first["question"].startswith("What is better")
        assert "extracted" not in first and first["arguments"]["source"] == "model"
        assert free["extracted"] == {**EXTRACTED, "model": "openai/scripted"}
        assert free["question"] == "Nike or Adidas: which is more comfortable?"
        assert re.fullmatch(r"Summary: .*\nBest Option: [0-2]", free["comparison"], re.S)

        server.clear_log()
        again = run(server, tmp_path, 4, generate_arguments=True)
        assert server.requests == [] and again.answers == result.answers
        assert again.records == result.records
        assert again.summary["usage"]["calls"] == 7  # the log's, earlier runs included
        assert again.summary["ledger"]["total"]["calls"] == 0  # this run's


def test_the_models_own_temperature_is_for_answers_and_moots_own_steps_run_at_0(tmp_path):
    with ScriptedServer(rules=RULES) as server:
        spec = parse_spec("openai/scripted", api_base=server.url)
        ctx = CompareContext(
            Role("comparer", spec, temperature=None),  # moot compare's default (Section 3)
            4,
            generate_arguments=True,
            client=ModelClient(retry=RetryPolicy(attempts=1)),
        )
        items = load_compqa_questions(questions_file(tmp_path))
        asyncio.run(compare_questions(items, tmp_path / "out", ctx, concurrency=4))
        sent = {
            (r.body["messages"][-1]["content"].split()[0], r.body.get("temperature"))
            for r in server.requests
        }
    assert sent == {("Read", 0.0), ("List", 0.0), ("You", None)}  # scenario 4: "You are an analyst"


def test_file_arguments_and_questions_without_them(tmp_path):
    arguments = tmp_path / "arguments.json"
    record = {
        "object1": "Baseball",
        "object2": "SOFTBALL",
        "aspect": "most played sport",
        "arguments": {"baseball": ["Baseball is everywhere."], "softball": ["Softball grows."]},
    }
    arguments.write_text(json.dumps([record]))
    with ScriptedServer(rules=RULES) as server:
        result = run(server, tmp_path, 2, arguments=ArgumentFile(arguments))
        assert [r["status"] for r in result.records] == ["ok", "no_arguments", "no_arguments"]
        assert result.count("no_arguments") == 2 and result.summary["no_arguments"] == 2
        # never answered as scenario 1: the only answer request is the one with arguments
        answered = [
            unfence(s) for s in contents(server) if s.startswith("You are a helpful assistant.")
        ]
        assert answered == [
            "You are a helpful assistant.\nCompare baseball and softball using following "
            "arguments:\n1. Baseball is everywhere.\n2. Softball grows."
        ]
        free = result.records[2]
        assert free["extracted"]["object1"] == "Nike" and "comparison" not in free
        (answer,) = result.answers
        assert answer["arguments"] == {
            "source": "file",
            "path": str(arguments),
            "where": "index 0",
            "object1": ["Baseball is everywhere."],
            "object2": ["Softball grows."],
        }
        claim = json.loads((tmp_path / "out" / ".moot" / "eval.json").read_text())
        assert claim["arguments_sha256"] == ArgumentFile(arguments).sha256


def test_unreadable_extraction_and_arguments_are_final_parse_failures(tmp_path):
    rules = [
        Rule("Read this comparative question", "Nike, I guess.", role="last"),
        Rule("List arguments", "Both are fine.", role="last"),
        Rule("could not be read", "Still no JSON.", role="last"),
    ]
    with ScriptedServer(rules=rules) as server:
        result = run(
            server,
            tmp_path,
            4,
            questions=questions_file(tmp_path, count=1),
            generate_arguments=True,
        )
        assert len(server.requests) == 4  # each reply and its repair; no answer asked
        assert result.answers == [] and result.path is None
        assert not (tmp_path / "out" / "scripted_scenario_4.json").exists()
        failures = [r["parse_failure"] for r in result.records]
        assert [f["stage"] for f in failures] == ["arguments", "extract"]
        assert all(f["repaired"] and f["raw"] == "Still no JSON." for f in failures)
        assert result.summary["parse_failures"] == 2 and result.summary["answered"] == 0
        server.clear_log()
        run(
            server,
            tmp_path,
            4,
            questions=questions_file(tmp_path, count=1),
            generate_arguments=True,
        )
        assert server.requests == []  # a parse failure is final, not asked again


def test_failed_calls_and_empty_replies_are_errors_retried_on_rerun(tmp_path):
    questions = questions_file(tmp_path, count=3, free=())
    rules = [Rule("basketball", "", role="last"), *RULES]
    with ScriptedServer(rules=rules) as server:
        server.add_fault(Fault("500", match="baseball"))
        result = run(server, tmp_path, 1, questions=questions)
        assert [r["status"] for r in result.records] == ["error", "error", "ok"]
        assert "empty reply" in result.records[1]["error"]
        assert result.summary["errors"] == 2 and len(result.answers) == 1
    with ScriptedServer(rules=RULES) as server:
        again = run(server, tmp_path, 1, questions=questions)
        assert len(server.requests) == 2 and again.count("error") == 0
        assert [a["question_id"] for a in again.answers] == ["0", "1", "2"]
        assert again.answers[2] == result.answers[0]  # the finished answer was not redone


def test_a_folder_holds_one_scenario_and_generator(tmp_path):
    questions = questions_file(tmp_path, count=1, free=())
    with ScriptedServer(rules=RULES) as server:
        run(server, tmp_path, 1, questions=questions)
        with pytest.raises(ConfigError, match="use a new --out"):
            run(server, tmp_path, 3, questions=questions)
        with pytest.raises(ConfigError, match="use a new --out"):  # a second answer file
            run(server, tmp_path, 1, questions=questions, generator="other")


def test_run_settings_are_checked():
    spec = parse_spec("openai/scripted", api_base="http://127.0.0.1:9/v1")
    role = Role("comparer", spec)
    for scenario, options in [(2, {}), (1, {"generate_arguments": True}), (5, {})]:
        with pytest.raises(ValueError):
            CompareContext(role, scenario, client=ModelClient(), **options)


def test_generator_names_are_file_safe():
    assert generator_name("local/smollm2") == "smollm2"
    assert generator_name("openai/gpt-4o-mini") == "gpt-4o-mini"
    assert generator_name("hf//data/models/my model v2/") == "my-model-v2"
