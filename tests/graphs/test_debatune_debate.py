"""DEBATunE's debate, run as its protocol, sends what DEBATunE's own graph sent, byte for byte.

``data/debatune_requests.json`` holds the requests (messages, budget, seed, temperature) of one
topic with one given argument per stance, debated 2 rounds and 0 rounds, as recorded from
`moot debate` before its debate became a protocol (commit 655e25d). Every prompt of a debate is
also compared with the released code's strings, word for word.
"""

from __future__ import annotations

import json
from pathlib import Path

import moot
from moot.testing import Rule, ScriptedServer

RECORDED = Path(__file__).parent / "data" / "debatune_requests.json"
GIVEN = {
    "topic": "Should zoos be banned?",
    "Affirmative": {"arguments": ["Cages harm animals."]},
    "Negative": {"arguments": ["Zoos save species."]},
}


def test_the_protocol_sends_the_requests_debatunes_graph_sent(tmp_path):
    topics = tmp_path / "topics.jsonl"
    topics.write_text(json.dumps(GIVEN) + "\n", encoding="utf-8")
    sent = {}
    for rounds in (2, 0):
        with ScriptedServer(rules=[Rule("AI:", "Turn {n} text.", role="last")]) as server:
            moot.debate(
                topics=topics,
                out=tmp_path / f"r{rounds}",
                model="openai/scripted",
                api_base=server.url,
                rounds=rounds,
                arguments_per_stance=1,
                concurrency=1,
                no_cache=True,
                seed=3,
                temperature_b=1.0,
            )
        keys = ("messages", "max_tokens", "seed", "temperature")
        sent[str(rounds)] = [{key: r.body[key] for key in keys} for r in server.requests]
    assert sent == json.loads(RECORDED.read_text(encoding="utf-8"))


# DEBATunE's debate prompts, word for word as released (tianyi-lab/DEBATunE@433444d,
# code_debate/debate_main_try_chat_single_arg.py, lines 34-83: Agent1_sys, Agent2_sys, Agent1_00,
# Agent1_0, Agent2_0, Agent1_1, Agent2_1, Agent1_sys_new, Agent1_2_new; the paper prints none).
# Trailing spaces are theirs ("statistics. \n").
RELEASED = {
    "agent1_sys": 'You are attending a debate on the topic of "{topic}". You are {side1} to this '
    "topic and your opponent is {side2} to this topic.",
    "agent2_sys": 'You are attending a debate on the topic of "{topic}". You are {side2} to this '
    "topic and your opponent is {side1} to this topic.",
    "agent1_00": 'You are attending a debate on the topic of "{topic}". You are {side1} to this '
    "topic.\nPlease provide your arguments on your {side1} side, you don't need to make "
    "detailed explanations right now, just list your arguments each in one line with a serial "
    "digit.\n",
    "agent1_0": "You are currently debating for one specific argument proposed by you: "
    '"{argument}".\nPlease provide your detailed explanations, and supporting evidence for this '
    "argument. If possible, please include real-world examples and statistics. \nAI:\n",
    "agent2_0": "You are currently debating for one specific argument proposed by your opponent: "
    '"{argument}".\nOpponent: {argument_1_0} \nPlease contradict your opponent\'s argument by '
    "raising critical questions, explanations, and supporting evidence. If possible, please "
    "include real-world examples and statistics. \nAI:\n",
    "agent1_1": "You are currently debating for one specific argument proposed by you: "
    '"{argument}".\nAI: {argument_1_0}\nOpponent: {argument_2_0}\nPlease first answer your '
    "opponent's questions if any. Then contradict your opponent's argument by raising critical "
    "questions, explanations, and supporting evidence. If possible, please include real-world "
    "examples and statistics. \nAI:\n",
    "agent2_1": "You are currently debating for one specific argument proposed by your opponent: "
    '"{argument}".\nOpponent: {argument_1_0}\nAI: {argument_2_0}\nOpponent: {argument_1_1}\n'
    "Please first answer your opponent's questions if any. Then contradict your opponent's "
    "argument by raising critical questions, explanations, and supporting evidence. If "
    "possible, please include real-world examples and statistics.\nAI:\n",
    "agent1_sys_new": 'You are watching a debate on the topic of "{topic}". You are {side1} to '
    "this topic.",
    "agent1_2_new": 'You are watching a debating for one specific argument "{argument}" for the '
    'topic of "{topic}":\n{side1}: {argument_1_0}\n{side2}: {argument_2_0}\n{side1}: '
    "{argument_1_1}\n{side2}: {argument_2_1}\nYou are {side1} to this topic, based on the above "
    "debate, propose your argument, explanations, and supporting evidence, as detailed as "
    "possible. \nYou do not need to mention or respond to the debate, just make your arguments "
    "as good as possible. \n",
}


def released(name: str, **slots: str) -> str:
    """A released prompt, filled as the release fills it (``format_map``), less what moot strips:
    each line's trailing spaces and the last newline (docs/faithfulness.md, "Debate prompts")."""
    text = RELEASED[name].format_map(slots)
    return "\n".join(line.rstrip() for line in text.splitlines())


def test_every_debate_prompt_is_the_released_one_word_for_word(tmp_path):
    topic = "Should zoos be banned?"
    (tmp_path / "topics.json").write_text(json.dumps([topic]), encoding="utf-8")
    rules = [
        Rule("serial digit", "1. Cages harm animals.", role="last"),
        Rule("AI:", "Turn {n} text.", role="last"),
    ]
    with ScriptedServer(rules=rules) as server:
        moot.debate(
            topics=tmp_path / "topics.json",
            out=tmp_path / "out",
            model="openai/scripted",
            api_base=server.url,
            arguments_per_stance=1,
            no_cache=True,
        )
    sent = sorted(tuple(m["content"] for m in r.body["messages"]) for r in server.requests)
    expected = []
    for debate in map(json.loads, (tmp_path / "out" / "debates.jsonl").open(encoding="utf-8")):
        side1, side2 = (turn["side"] for turn in debate["transcript"][:2])
        a0, b0, a1, b1 = (turn["text"] for turn in debate["transcript"])
        slots = {"topic": topic, "side1": side1, "side2": side2, "argument": debate["argument"]}
        said = {"argument_1_0": a0, "argument_2_0": b0, "argument_1_1": a1, "argument_2_1": b1}
        a, b = released("agent1_sys", **slots), released("agent2_sys", **slots)
        expected += [
            (a, released("agent1_00", **slots)),
            (a, released("agent1_0", **slots)),
            (b, released("agent2_0", **slots, **said)),
            (a, released("agent1_1", **slots, **said)),
            (b, released("agent2_1", **slots, **said)),
            # the system prompt filled: the release sends it unformatted (line 199), a bug
            (released("agent1_sys_new", **slots), released("agent1_2_new", **slots, **said)),
        ]
    assert sent == sorted(expected) and len(sent) == 12
