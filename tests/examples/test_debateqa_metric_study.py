"""DebateQA's metric study as data: Table 10's baseline judges (`examples/judges/debateqa/`) and
Table 12's P.D. prompts (`examples/pd_prompts/`), each compared with the paper's text, and one
judge run through `moot eval judge` against the scripted server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import moot
from moot.agents.judge_spec import load_judge
from moot.cli.prompts import read_overrides
from moot.core.llm.structured import OutputParseError
from moot.prompts import overriding, render
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import read_jsonl
from tests.conftest import SHARED_DATA
from tests.fenced import unfence

ROOT = Path(__file__).resolve().parents[2]
JUDGES = ROOT / "examples" / "judges" / "debateqa"
PD_PROMPTS = ROOT / "examples" / "pd_prompts"
PAPER = SHARED_DATA.parent / "papers" / "debateqa.txt"


def paper_rows() -> dict[str, str]:
    """Tables 10 and 12 of the paper's text: each prompt's name (``DS``, ``P.D. 2``) and text."""
    if not PAPER.exists():
        pytest.skip(f"needs {PAPER}")
    rows = re.findall(r"^<i>p_\{([^}]+)\}</i>\t(.*)$", PAPER.read_text(encoding="utf-8"), re.M)
    return {name: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).strip() for name, text in rows}


@pytest.mark.parametrize(
    ("spec", "row"), [("direct_score", "DS"), ("g_eval", "G-Eval"), ("num_of_povs", "NoP")]
)
def test_each_baseline_judge_is_table_10_word_for_word(spec, row):
    judge = load_judge(JUDGES / f"{spec}.yaml")
    (message,) = judge.messages({"question": "{question}", "answer": "{answer}"})
    assert message["role"] == "user" and "<<<answer " in message["content"]  # fenced
    assert re.sub(r"\s+", " ", unfence(message["content"])) == paper_rows()[row]


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_each_pd_prompt_is_table_12_word_for_word(number):
    folder = PD_PROMPTS / f"pd-{number}"
    overrides = read_overrides(folder) if folder.exists() else None  # p_P.D.1: the built-in
    with overriding(overrides):
        turn = render("debateqa/perspective_diversity.j2", answer="{response}")
    assert turn == paper_rows()[f"P.D. {number}"]
    if overrides is not None:
        assert list(overrides.texts) == ["debateqa/perspective_diversity.j2"]


@pytest.mark.parametrize(
    ("reply", "quality"),
    [("4", 4), ("**4**", 4), ("- Quality: 4", 4), ("- 3", 3), ("Quality = 2.", 2)]
    + [("-3", None), ("1. Clearly identify the question.", None), ("6", None), ("none", None)],
)
def test_a_bare_number_reply_is_read_as_the_papers_forms_ask_and_never_guessed(reply, quality):
    """A list dash is markup, a minus sign the number's own: -3 is out of G-Eval's 1-5, unread."""
    judge = load_judge(JUDGES / "g_eval.yaml")
    if quality is None:
        with pytest.raises(OutputParseError):
            judge.read(reply)
    else:
        assert judge.read(reply).quality == quality


def test_g_eval_reads_the_number_its_form_asks_for_and_repairs_an_echo(tmp_path):
    rules = [
        Rule(pattern="could not be read", reply='{"quality": 2}'),  # the repair round: JSON
        Rule(pattern="school uniforms", reply="- Quality: 4"),
        Rule(pattern="zoos", reply="1. Clearly identify if the question is contentious."),
    ]
    out = tmp_path / "g-eval"
    options = {"spec": JUDGES / "g_eval.yaml", "items": JUDGES / "answers.jsonl", "out": out}
    with ScriptedServer(rules=rules) as server:
        options |= {"judge": "openai/judge", "api_base": server.url, "max_retries": 0}
        moot.eval.judge(**options, dry_run=True)  # the plan reads its stand-in replies
        assert server.requests == []
        moot.eval.judge(**options, constrained=True)
        sent = [r.body["messages"] for r in server.requests]
        # the paper's forms ask for a number alone: no JSON schema constrains the reply
        assert not any("response_format" in r.body for r in server.requests)
    assert len(sent) == 3  # one repair round, for the echoed criterion
    items = [json.loads(line) for line in (JUDGES / "answers.jsonl").read_text().splitlines()]
    (uniforms,) = (m for m in sent if "uniforms" in m[0]["content"])
    assert uniforms == load_judge(JUDGES / "g_eval.yaml").messages(items[0])
    records = {r["input"]["id"]: r for r in read_jsonl(out / "judgments.jsonl")}
    assert (records["uniforms"]["verdict"], records["zoos"]["verdict"]) == (4, 2)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["items"], summary["parse_failures"], summary["mean"]) == (2, 0, 3.0)
