"""ReAct replies and the DebateQA answering requests."""

from __future__ import annotations

import pytest

from moot.agents.debateqa_answerers import (
    PROMPTS,
    parse_react_step,
    plain_messages,
    rag_messages,
    react_messages,
)
from tests.fenced import NOTE, fences, unfence


@pytest.mark.parametrize(
    ("reply", "thought", "query", "answer"),
    [
        ("Thought: other side\nSearch: UBI costs", "other side", "UBI costs", None),
        ("Thought: more\nAction: Search[basic income trials]", "more", "basic income trials", None),
        ('**Search:** "zoo welfare"', "", "zoo welfare", None),
        ("Thought: done. Final Answer: It is debated.", "done.", None, "It is debated."),
        ("**Final Answer:** Yes and no.", "", None, "Yes and no."),
        # a final answer wins over a search line in the same reply
        ("Search: x\nFinal Answer: Both sides.", "Search: x", None, "Both sides."),
        # neither marker: the whole reply is the answer, as an agent without a tool call ends
        ("Some say yes; others no.", "", None, "Some say yes; others no."),
    ],
)
def test_react_replies(reply, thought, query, answer):
    step = parse_react_step(reply)
    assert (step.thought, step.query, step.answer) == (thought, query, answer)


def test_the_three_system_prompts_differ_and_the_question_is_the_user_turn():
    systems = {plain_messages("Q?", p)[0]["content"] for p in PROMPTS}
    assert len(systems) == 3
    assert plain_messages("Is UBI good?", "basic")[1] == {"role": "user", "content": "Is UBI good?"}


def test_the_prompts_are_the_papers_tables_16_to_18():
    assert plain_messages("Q?", "basic")[0]["content"] == (
        "Your task is to provide an answer to the question."  # Tables 16 and 18
    )
    detailed = plain_messages("Q?", "detailed")[0]["content"]
    assert detailed.startswith("You need to answer a debatable question. Your task is to provide")
    assert detailed.endswith(
        "Offer your own informed opinion, clearly stating why you favor a particular viewpoint "
        "while acknowledging the validity of other perspectives."
    )
    hits = [{"text": "First doc.", "title": "T1"}, {"text": "Second doc.", "title": None}]
    system, user = (m["content"] for m in rag_messages("Is UBI good?", hits, "basic"))
    assert system == (
        "Your task is to provide an answer to the question. You can refer to the information "
        "provided in the ## Document to help you answer better, or you can leave it out."
    )  # Table 17
    # Table 17 verbatim apart from the fence around each chunk and the sentence saying what it means
    assert unfence(user) == "## Document:\nFirst doc.\n\nSecond doc.\n\n## Question: Is UBI good?"
    assert [label for label, _ in fences(user)] == ["document"] * 4
    assert NOTE + "\n\n## Question:" in user
    assert rag_messages("Q?", hits, "detailed")[0]["content"] == detailed


def test_react_transcript_alternates_replies_and_observations():
    trace = [
        {"kind": "search", "observation": "OBS1"},
        {"kind": "step", "reply": "Search: b"},
        {"kind": "search", "observation": "OBS2"},
    ]
    messages = react_messages("Q?", trace, "basic", max_searches=3, search_k=3)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "Question: Q?" in messages[1]["content"] and "OBS1" in messages[1]["content"]
    assert "3 searches in total" in messages[0]["content"]
    assert messages[3]["content"] == "OBS2"


@pytest.mark.parametrize(
    ("reply", "povs"),
    [
        ("Point-of-View 1: It helps. [Document [1], [3]]", [("It helps.", [1, 3])]),
        ("**Point-of-View 2:** No. (Documents 2 and 4)\n", [("No.", [2, 4])]),
        ("Point-of-View [3]: Maybe, by 2030.", [("Maybe, by 2030.", [])]),  # no document list
        ("Point-of-View 1:\nSome say yes.", []),  # content not on its line: not a POV
        ("Here are the views: yes, no.", []),
    ],
)
def test_p_pov_replies(reply, povs):
    from moot.graphs.debateqa_curate import parse_povs

    assert parse_povs(reply) == povs
