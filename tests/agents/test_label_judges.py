"""D.A. and perspective-detection label judges: parsing, prompts, repair, explicit failures."""

from __future__ import annotations

import asyncio
import re

import pytest

from moot.agents.label_judges import (
    DETECTION_EXAMPLE,
    DETECTION_PROMPT,
    DETECTION_PROMPTS,
    DETECTION_SYSTEM,
    detect_perspective,
    judge_dispute_awareness,
    parse_dispute_label,
    parse_yes_no,
)
from moot.core import ModelClient, Role, parse_spec
from moot.core.llm.structured import OutputParseError
from moot.prompts import render
from moot.testing import Rule, ScriptedServer
from tests.conftest import SHARED_DATA
from tests.fenced import NOTE, unfence


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("1", 1),
        ("0", 0),
        ("0\n", 0),
        ("Output: 1", 1),
        ("Response: 0", 0),
        ("**1**", 1),
        ("**Answer:** 1", 1),
        ('"1"', 1),
        ("1. The answer says the topic is debated.", 1),
        ("0 (no debate is mentioned)", 0),
    ],
)
def test_dispute_labels(reply, label):
    assert parse_dispute_label(reply) == label


@pytest.mark.parametrize(
    "reply",
    ["Yes", "The answer is 1", "0 or 1", "1/0", "10", "1.5", "", "two", "Response: maybe"],
)
def test_unreadable_dispute_labels_raise(reply):
    # the prompt asks for one digit: no Yes/No, no digit buried in prose, no both
    with pytest.raises(OutputParseError):
        parse_dispute_label(reply)


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Yes", 1),
        ("yes", 1),
        ("Yes.", 1),
        ("No", 0),
        ("**No**", 0),
        ("Answer: Yes", 1),
        ("answer: no.", 0),
        ('"Yes"', 1),
        ("No, the document opposes the statement.", 0),
        ("YES - it does.", 1),
        ("Based on the document, the answer is No.", 0),
        ("**Answer:** Yes", 1),
    ],
)
def test_yes_no_labels(reply, label):
    assert parse_yes_no(reply) == label


@pytest.mark.parametrize(
    "reply",
    [
        "Yes/No",
        "Yes or No",
        "No, yes",
        "Maybe.",
        "",
        "Nope",
        "None of the above",
        "The document supports it.",
        "The answer is yes. Actually the answer is no.",
    ],
)
def test_ambiguous_or_missing_yes_no_raises(reply):
    with pytest.raises(OutputParseError):
        parse_yes_no(reply)


def role(server: ScriptedServer) -> Role:
    return Role("judge", parse_spec("openai/judge", api_base=server.url), temperature=0.0)


def test_dispute_prompt_is_the_papers_few_shot_prompt_and_only_the_reply_is_parsed():
    with ScriptedServer(rules=[Rule(pattern="Response: 1", reply="0")]) as s:
        judged = asyncio.run(
            judge_dispute_awareness(ModelClient(), role(s), "Is tea better?", "Tea is hot.")
        )
        (message,) = s.requests[0].body["messages"]
    # the prompt's own examples hold "Response: 1"; the released script read that digit
    assert judged.ok and judged.label == 0 and judged.replies == ("0",)
    assert message["role"] == "user"
    assert message["content"].startswith("Here is a question paired with an answer.")
    # the released prompt verbatim apart from the fence around the answer and the sentence on it
    text = unfence(message["content"])
    assert "Question: Is tea better?\nAnswer: Tea is hot.\n\nImportant:" in text
    assert (
        "Answer: <<<answer " in message["content"] and NOTE + "\nImportant:" in message["content"]
    )


def test_detection_prompt_repair_round_then_explicit_failure():
    rules = [Rule(pattern="could not be read", reply="Yes"), Rule(pattern="Statement", reply="?")]
    with ScriptedServer(rules=rules) as s:
        judged = asyncio.run(detect_perspective(ModelClient(), role(s), "Doc text.", "A claim."))
        system, user = s.requests[0].body["messages"]
    assert judged.ok and judged.label == 1 and judged.replies == ("?", "Yes")
    assert system["content"].startswith(
        'You are a helpful assistant that can only answer with "Yes"'
    )
    assert unfence(user["content"]).startswith(
        "Document: Doc text.\nStatement: A claim.\nInstruction:"
    )
    assert user["content"].startswith("Document: <<<document ")
    assert user["content"].endswith(NOTE + "\nAnswer:")

    with ScriptedServer(rules=[Rule(pattern="Statement", reply="Perhaps.")]) as s:
        failed = asyncio.run(detect_perspective(ModelClient(), role(s), "Doc.", "Claim."))
        assert len(s.requests) == 2
    assert not failed.ok and failed.label is None
    record = failed.to_json()
    assert record["label"] is None and record["parse_failure"]["raw"] == "Perhaps."
    assert record["replies"] == ["Perhaps.", "Perhaps."]


def _flat(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_detection_prompts_are_the_papers_table_15_word_for_word():
    paper = SHARED_DATA.parent / "papers" / "berds.txt"
    if not paper.exists():
        pytest.skip(f"needs {paper}")
    printed = _flat(paper.read_text(encoding="utf-8"))  # the PDF text lost its spaces
    table_15 = printed[printed.index("Prompt<|im_start|>system") : printed.index("Table15:")]
    # the table's row label "One-Shot Example" is interleaved with the example's first line
    table_15 = table_15.replace("One-ShotEx-", "").replace("userampleDocument", "userDocument")
    system = render(DETECTION_SYSTEM)
    # Table 15 word for word apart from the fence around the document and the sentence on it
    user = unfence(render(DETECTION_PROMPT, document="[Document]", perspective="[Statement]"))
    example, answer = (render(name) for name in DETECTION_EXAMPLE)
    shown = f"<|im_start|>system{system}<|im_end|>[Optional1-shotexample]<|im_start|>user{user}"
    assert _flat(shown) in table_15
    assert _flat(f"<|im_start|>user{example}<|im_end|><|im_start|>assistant{answer}") in table_15
    released = render(DETECTION_PROMPTS["one-shot-released"][0])
    assert _flat(released) not in table_15 and released.startswith(system)  # one more sentence


def test_one_shot_detection_sends_the_example_turns_before_the_document():
    with ScriptedServer(rules=[Rule(pattern="Statement: A claim.", reply="No")]) as s:
        for prompt in ("one-shot", "one-shot-released"):
            judged = asyncio.run(
                detect_perspective(ModelClient(), role(s), "Doc.", "A claim.", prompt=prompt)
            )
            assert judged.ok and judged.label == 0
        one_shot, released = (r.body["messages"] for r in s.requests)
    assert [m["role"] for m in one_shot] == ["system", "user", "assistant", "user"]
    assert one_shot[0]["content"] == render(DETECTION_SYSTEM)
    assert one_shot[1]["content"].startswith("Document for Example 1: Why Prop. 19")
    assert one_shot[1]["content"].endswith("Answer for Example 1:")
    assert one_shot[2]["content"] == "No"
    assert unfence(one_shot[3]["content"]).startswith("Document: Doc.\nStatement: A claim.\n")
    assert released[1:] == one_shot[1:] and released[0]["content"].endswith(
        "You should output the answer that best follows an instruction and an input pair."
    )
