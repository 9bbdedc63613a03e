"""The CompQA rubric judge: the paper's prompt, validated scores, one repair, explicit failures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from moot.agents.compqa_rubric_judge import judge_comparison, rubric_messages, score_schema
from moot.core import ModelClient, Role, parse_spec
from moot.core.data.compqa import MAXIMA, Comparison
from moot.core.errors import ModelCallError
from moot.core.llm.models import RetryPolicy
from moot.testing import Fault, Rule, ScriptedServer
from tests.fenced import NOTE, fences, unfence

SCORES = {n: MAXIMA[n] - (n % 2 == 0) for n in MAXIMA}  # 12 points
VALID = json.dumps({str(n): p for n, p in SCORES.items()})
OUT_OF_RANGE = VALID.replace('"5": 1', '"5": 2')
REPAIR = "could not be used as a judgment"


def answer(aspect: str | None = "comfort") -> Comparison:
    text = "Nike fits narrow feet.\nAdidas cushions better.\nBest option: Adidas"
    return Comparison("Nike", "Adidas", aspect, text, "gen", 1, Path("x.json"), "index 0", {})


def judge(server: ScriptedServer, **options) -> object:
    role = Role("judge", parse_spec("openai/judge", api_base=server.url), temperature=0.0)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    return asyncio.run(judge_comparison(client, role, answer(), **options))


def test_prompt_is_the_papers_with_0_1_or_3_examples_before_the_question():
    system, user = rubric_messages(answer(), 0)
    assert system == {"role": "system", "content": "You are an expert summary reviewer."}
    # the paper's prompt verbatim apart from the fence around the answer and the sentence after it
    assert user["content"].endswith(NOTE) and len(fences(user["content"])) == 2
    lines = unfence(user["content"]).split("\n")
    assert lines[:5] == [
        "You are a helpful assistant.",
        "Task:",
        "- analyze the comparison given",
        "- for each criterion, assign points in the range given",
        "Criteria:",
    ]
    assert lines[5:8] == [
        "1. a short introduction is present: 0-1",
        "   - the introduction is missing or is too long - 0 points",
        "   - the introduction is short and concise - 1 point",
    ]
    tail = [
        'Output a python dictionary with the structure: {"n": score, "n+1": score}',
        "Write only the dictionary, do not write anything else",
        "Question: What is better when comparing regarding comfort: Nike or Adidas?",
        "Comparative answer:",
        *answer().text.split("\n"),
    ]
    assert lines[-len(tail) :] == tail
    assert "takes the main aspect (if there is one) into consideration" in user["content"]

    no_aspect = rubric_messages(answer(None), 0)[1]["content"]
    assert "\nQuestion: What is better: Nike or Adidas?\n" in no_aspect
    one = rubric_messages(answer(), 1)[1]["content"]
    three = rubric_messages(answer(), 3)[1]["content"]
    assert "Example" not in user["content"]
    assert "Example 1:" in one and "Example 2:" not in one
    assert "Write only the dictionary, do not write anything else\nExample 1:\nSummary:\n" in one
    assert "Scoring 1:\n{1: 1,\t2: 1, 3: 1," in one
    assert three.index("Example 3:") < three.index("Scoring 3:") < three.index("Question:")
    assert "{1: 1,\t2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 0, 9: 1, 10: 2, 11: 2" in three
    with pytest.raises(ValueError, match="shots"):
        rubric_messages(answer(), 2)


def test_valid_reply_is_one_call():
    with ScriptedServer(rules=[Rule(pattern="Comparative answer", reply=VALID)]) as server:
        judged = judge(server, shots=1, seed=7)
        (request,) = server.requests
    assert judged.ok and judged.scores == SCORES and not judged.repaired
    assert judged.replies == (VALID,)
    assert request.body["seed"] == 7 and "response_format" not in request.body
    record = judged.to_json()
    assert record["score"] == 12 and record["problem"] is None
    assert record["score_dict"] == {str(n): p for n, p in SCORES.items()}
    assert record["categories"] == {"structure": 4, "relevance": 3, "quality": 5}


def test_invalid_reply_then_repaired():
    rules = [
        Rule(pattern=REPAIR, reply=f"Sorry, here it is:\n```\n{VALID}\n```", role="last"),
        Rule(pattern="Comparative answer", reply=OUT_OF_RANGE),
    ]
    with ScriptedServer(rules=rules) as server:
        judged = judge(server)
        first, second = (r.body["messages"] for r in server.requests)
    assert judged.ok and judged.scores == SCORES and judged.repaired
    assert judged.replies[0] == OUT_OF_RANGE and len(judged.replies) == 2
    assert second[:2] == first
    assert second[2] == {"role": "assistant", "content": OUT_OF_RANGE}
    assert second[3]["content"].startswith(f"Your reply {REPAIR}: C5 = 2 is outside 0-1.\n")


def test_invalid_twice_is_an_explicit_invalid_judgment():
    rules = [
        Rule(pattern=REPAIR, reply="1. a short introduction is present: 0-1", role="last"),
        Rule(pattern="Comparative answer", reply=VALID[:50]),  # truncated
    ]
    with ScriptedServer(rules=rules) as server:
        judged = judge(server)
        assert len(server.requests) == 2
    assert not judged.ok and judged.scores is None and judged.repaired
    assert judged.problem == "no score dict or 'n: points' lines in the reply"
    assert judged.replies == (VALID[:50], "1. a short introduction is present: 0-1")
    record = judged.to_json()
    assert (record["score_dict"], record["score"], record["categories"]) == (None, None, None)


def test_constrained_sends_the_score_schema():
    with ScriptedServer(rules=[Rule(pattern="Comparative answer", reply=VALID)]) as server:
        assert judge(server, constrained=True).ok
        (request,) = server.requests
    assert request.body["response_format"] == score_schema()
    schema = score_schema()["json_schema"]["schema"]
    assert schema["required"] == [str(n) for n in MAXIMA]
    assert schema["properties"]["9"]["enum"] == [0, 1, 2]
    assert schema["properties"]["15"]["enum"] == [0, 1]


def test_a_failed_call_raises_for_the_caller_to_record():
    with ScriptedServer(faults=[Fault("500", times=5)]) as server, pytest.raises(ModelCallError):
        judge(server)
