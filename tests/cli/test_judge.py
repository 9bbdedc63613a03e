"""`moot judge` end to end on real PanelBench debates, through real HTTP to the scripted server.

In process (`moot.judge(...)`), but a run killed and resumed.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

import moot
from moot.agents.debatrix_judges import winner_schema
from moot.core.data.debates import load_debates
from moot.testing import Fault, Rule, ScriptedServer
from tests.agents.test_debatrix_judges import (
    RELEASED_FIX_PROMPT,
    RELEASED_FORMAT_INSTRUCTIONS,
    released_render,
)
from tests.cli.helpers import popen_moot, read_jsonl, run_moot, write_bp_competition
from tests.conftest import shared_data

SCORE = Rule(r'"score": <an integer from 1 to 10>', '{"comment": "solid", "score": 6}', role="last")


def real_debates(tmp_path: Path, count: int) -> tuple[Path, list[dict]]:
    lines = shared_data("panelbench", "debateart.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "debates.jsonl"
    path.write_text("\n".join(lines[:count]) + "\n", encoding="utf-8")
    return path, [json.loads(line) for line in lines[:count]]


def judge_options(server: ScriptedServer, debates: Path, out: Path, **extra: object) -> dict:
    """`judge_args` as the keyword arguments of `moot.judge`."""
    options = {"debates": debates, "out": out, "judge": "openai/scripted", "api_base": server.url}
    return options | {"max_retries": 0, **extra}


def judge_args(server: ScriptedServer, debates: Path, out: Path, *extra: object) -> list:
    return [
        "judge",
        "--debates",
        debates,
        "--out",
        out,
        "--judge",
        "openai/scripted",
        "--api-base",
        server.url,
        "--max-retries",
        0,
        *extra,
    ]


def test_judges_real_debates_and_counts_parse_failures(tmp_path):
    debates, records = real_debates(tmp_path, 3)
    # the con debater wins every dimension; winners of the panel are sometimes unparseable prose
    winner_rules = [
        Rule(
            f'Con side debaters are: {r["con"][0]}\n.*"winner"',
            json.dumps({"winner": r["con"][0]}),
        )
        for r in records
    ]
    with ScriptedServer(rules=[SCORE, *winner_rules]) as server:
        result = moot.judge(**judge_options(server, debates, tmp_path / "out", report="html"))
        rerun = moot.judge(**judge_options(server, debates, tmp_path / "out"))
    assert "3 complete" in str(result) and "0 unparsed" in str(result)
    judged = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert [j["debate"] for j in judged] == [r["id"] for r in records]
    for judgment, record in zip(judged, records, strict=True):
        assert judgment["final"]["winner"] == record["con"][0]
        speeches = judgment["dimensions"]["argument"]["speeches"]
        assert [s["speaker"] for s in speeches] == record["speech_order"]
        assert judgment["usage"]["largest_prompt"] > 0
    html = (tmp_path / "out" / "reports" / f"{records[0]['id']}.r0.html").read_text()
    assert html.startswith("<!doctype html>") and "Verdict" in html
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["complete"] == 3 and summary["parse_failures"] == 0
    assert "total: 0 calls" in rerun.summary
    # and PanelBench scores those judgments against the gold labels
    gold = shared_data("panelbench", "debateart.jsonl")
    moot.eval.panelbench(predictions=tmp_path / "out", gold=gold)
    (framework,) = json.loads((tmp_path / "out.panelbench" / "summary.json").read_text())[
        "frameworks"
    ]
    direct, score = framework["debateart"]["direct"], framework["debateart"]["score"]
    finals = [r["gold"]["final"] for r in records]
    expected = 100 * (sum((1 - g) ** 2 for g in finals) / 3) ** 0.5  # con (1) always predicted
    assert direct["final"]["rmse"] == pytest.approx(expected)
    assert direct["final"]["predicted"] == 3 and direct["final"]["unjudged"] == 97
    tie = 100 * (sum((0.5 - g) ** 2 for g in finals) / 3) ** 0.5  # equal scores are a tie
    assert score["final"]["rmse"] == pytest.approx(tie)


def test_unparseable_verdicts_are_counted_not_guessed(tmp_path):
    debates, _ = real_debates(tmp_path, 1)
    with ScriptedServer(rules=[SCORE]) as server:  # winners: random prose, never a name
        result = moot.judge(**judge_options(server, debates, tmp_path / "out", framework="direct"))
    with ScriptedServer() as server, pytest.raises(moot.RunFailed) as nothing:
        # scores too: not one reading, so nothing was measured
        moot.judge(**judge_options(server, debates, tmp_path / "none", framework="direct"))
    assert nothing.value.result.exit_code == 1
    assert "not one judge reply could be read" in "\n".join(nothing.value.result.messages)
    (judgment,) = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert judgment["final"]["winner"] is None and judgment["final"]["winner_failure"]
    assert "1 unparsed" in str(result)
    report = (tmp_path / "out" / "reports" / f"{judgment['debate']}.r0.md").read_text()
    assert "Verdict: unparsed" in report


@pytest.mark.subprocess
def test_resume_after_kill_finishes_without_duplicates(tmp_path):
    debates, records = real_debates(tmp_path, 4)
    out = tmp_path / "out"
    winner = Rule('"winner"', json.dumps({"winner": records[0]["pro"][0]}))
    with ScriptedServer(rules=[SCORE, winner], latency=0.02) as server:
        args = judge_args(server, debates, out, "--concurrency", 2, "--no-cache")
        process = popen_moot(*args)
        log = out / "judgments.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and not (log.exists() and log.read_text().count("\n") >= 1):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = {j["debate"] for j in read_jsonl(log)}
        assert 1 <= len(finished) < 4
        before = len(server.requests)
        result = run_moot(*args)
        second = server.requests[before:]
    assert result.returncode == 0, result.stderr
    judged = read_jsonl(log)
    assert sorted(j["debate"] for j in judged) == sorted(r["id"] for r in records)
    # finished debates cost nothing on the rerun
    for debate in finished:
        motion = next(r["motion"] for r in records if r["id"] == debate)
        assert not any(motion in json.dumps(r.body) for r in second)


def bad(tmp_path: Path, change) -> Path:
    record = {
        "id": "d1",
        "motion": "Zoos should be abolished",
        "pro": ["Alice"],
        "con": ["Bob"],
        "speech_order": ["Alice", "Bob"],
        "speeches": [
            {"speaker": "Alice", "content": "Zoos confine animals."},
            {"speaker": "Bob", "content": "Zoos protect species."},
        ],
    }
    change(record)
    path = tmp_path / "debates.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r["speeches"][1].update(speaker="Carol"), "speech 2: unknown speaker 'Carol'"),
        (lambda r: r["speeches"][0].update(content="  "), "speech 1 by 'Alice' is empty"),
        (lambda r: r.update(speech_order=["Bob", "Alice"]), "does not match the speeches"),
        (lambda r: r.update(con=["Alice"]), "'Alice' is on both sides"),
        (lambda r: r.pop("motion"), "missing 'motion'"),
    ],
)
def test_bad_debate_files_are_rejected_with_one_line(tmp_path, change, message):
    path = bad(tmp_path, change)
    with pytest.raises(moot.InputError) as refused:
        moot.judge(debates=path, out=tmp_path / "out", judge="openai/x")
    error = str(refused.value)
    assert "\n" not in error
    assert str(path) in error and "index 0" in error and message in error
    assert not (tmp_path / "out").exists()


def test_unknown_dimension_is_a_config_error(tmp_path):
    path = bad(tmp_path, lambda r: None)
    with pytest.raises(moot.ConfigError, match="unknown 1v1 dimension 'style'"):
        moot.judge(debates=path, out=tmp_path / "out", dimensions="argument,style")


def test_judges_the_debates_moot_debate_made(tmp_path):
    topic = {
        "topic": "Should zoos be banned?",
        "Affirmative": {"arguments": ["Cages cause stress."]},
        "Negative": {"arguments": ["Zoos save species."]},
    }
    topics = tmp_path / "topics.jsonl"
    topics.write_text(json.dumps(topic) + "\n", encoding="utf-8")
    # the Affirmative debate's conclusion fails for good: that debate is not judged
    fault = Fault(kind="500", times=2, match="watching a debate.*Cages cause stress")
    winner = Rule('Con side debaters are: Negative\n.*"winner"', json.dumps({"winner": "Negative"}))
    with ScriptedServer(rules=[SCORE, winner], faults=[fault]) as server:
        with pytest.raises(moot.RunFailed) as made:
            moot.debate(
                topics=topics, out=tmp_path / "run", model="openai/scripted", api_base=server.url,
                arguments_per_stance=1, max_retries=1,
            )  # fmt: skip
        assert made.value.result.exit_code == 1
        assert "1 of 2 debates failed" in "\n".join(made.value.result.messages)
        debates = {d["status"]: d for d in read_jsonl(tmp_path / "run" / "debates.jsonl")}
        server.clear_log()
        moot.judge(**judge_options(server, tmp_path / "run" / "debates.jsonl", tmp_path / "out"))
        asked = [m["content"] for r in server.requests if r.body for m in r.body["messages"]]
    ok = debates["ok"]
    assert ok["stance"] == "Negative" and debates["failed"]["stance"] == "Affirmative"
    (judgment,) = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert judgment["debate"] == ok["id"] and judgment["status"] == "complete"
    assert (judgment["pro"], judgment["con"]) == (["Affirmative"], ["Negative"])
    assert judgment["final"]["winner"] == "Negative"
    # debater A argued the Negative stance, so the con side gives speeches 1 and 3
    speeches = judgment["dimensions"]["argument"]["speeches"]
    assert [s["speaker"] for s in speeches] == ["Negative", "Affirmative"] * 2
    assert [s["speaker"] for s in speeches] == [t["side"] for t in ok["transcript"]]
    assert all(any(turn["text"] in text for text in asked) for turn in ok["transcript"])
    assert any("Negative argument: Zoos save species." in text for text in asked)  # info slide
    assert not any(ok["conclusion"] in text for text in asked)  # not a speech
    assert not any("Cages cause stress" in text for text in asked)  # the failed debate


def test_judges_and_scores_bp_debates_in_panelbench_released_layout(tmp_path):
    write_bp_competition(tmp_path / "bp", {3: "OG,CG", 20: "OO"})
    # every verdict names OG: right for bp_003 (OG or CG win), wrong for bp_020 (OO won)
    with ScriptedServer(rules=[SCORE, Rule('"winner"', '{"winner": "OG"}')]) as server:
        moot.judge(**judge_options(server, tmp_path / "bp", tmp_path / "out"))
        analyses = [r for r in server.requests if "Speech 8 by CO" in json.dumps(r.body)]
        last = [r.body["messages"][-1]["content"] for r in server.requests]
    # the paper's scoring: each team's comment alone, then its integer score in a second call
    comments = [p for p in last if p.rstrip().endswith("judgment for CO specifically.")]
    scores = [p for p in last if "The debater is: CO" in p and "generate a score" in p]
    assert len(comments) == len(scores) == 2 * 5  # 2 debates x (4 dimensions + the panel)
    judged = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert [j["debate"] for j in judged] == ["bp_003", "bp_020"]
    assert set(judged[0]["dimensions"]) == {"argument", "support", "clash", "language"}
    assert [j["final"]["winner"] for j in judged] == ["OG", "OG"]
    assert analyses  # the judge saw the teams by their codes
    moot.eval.panelbench(predictions=tmp_path / "out", gold=tmp_path / "bp")
    summary = json.loads((tmp_path / "out.panelbench" / "summary.json").read_text())
    assert summary["debates"] == {"1v1": 0, "bp": 2}
    (framework,) = summary["frameworks"]
    bp = framework["bp"]
    assert (bp["accuracy"], bp["completion"], bp["winners"]["OG"]) == (0.5, 1.0, 2)
    assert bp["gold_winners"] == {"OG": 0.5, "OO": 1.0, "CG": 0.5, "CO": 0.0}  # Table 7's row


def test_the_judges_window_defaults_to_the_papers_16385_tokens(tmp_path):
    path = bad(tmp_path, lambda r: r["speeches"][0].update(content="zoo " * 17000))
    with ScriptedServer(rules=[SCORE]) as server:
        moot.judge(**judge_options(server, path, tmp_path / "out", framework="direct"))
        sent = len(server.requests)
        wider = judge_options(server, path, tmp_path / "wide", framework="direct")
        widened = moot.judge(**wider, context_window=32768)
    (judgment,) = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    assert judgment["status"] == "incomplete" and "16385-token window" in judgment["reason"]
    assert sent == 0  # a prompt that does not fit is never sent
    (judgment,) = read_jsonl(tmp_path / "wide" / "judgments.jsonl")
    assert widened.ok and judgment["status"] == "complete"


def test_an_unread_reply_gets_the_released_fix_prompt_up_to_3_times_as_a_fresh_message(tmp_path):
    debates = bad(tmp_path, lambda r: None)
    fix = r"^Instructions:\n-+\n.*\nCompletion:\n-+\n"
    rules = [
        # a score reads on the second fix; the winner never does
        Rule(fix + "bad score 1\n", '{"score": 6}', role="last"),
        Rule(fix + "bad score 0\n", "bad score 1", role="last"),
        Rule(r'"score": <an integer from 1 to 10>', "bad score 0", role="last"),
        Rule(r'"winner"', "no verdict {n}", role="last"),
        Rule(r"^Your previous reply could not be read", '{"score": 6}', role="last"),  # moot's
    ]
    with ScriptedServer(rules=rules) as server:
        # no cache: the two debaters' score fixes are one request, which the cache may answer
        # once for both when the first has come back before the second is sent
        options = judge_options(server, debates, tmp_path / "out", framework="direct")
        moot.judge(**options, no_cache=True)
        released = [r.body["messages"] for r in server.requests]
        server.clear_log()
        moot.judge(
            **judge_options(server, debates, tmp_path / "moot", framework="direct", repair="moot"),
            no_cache=True,
        )
        ours = [r.body["messages"] for r in server.requests]
        again = judge_options(server, debates, tmp_path / "out", framework="direct")
        with pytest.raises(moot.ConfigError, match="other settings"):  # the repair is a setting
            moot.judge(**again, repair="moot")
    (judgment,) = read_jsonl(tmp_path / "out" / "judgments.jsonl")
    final = judgment["final"]
    assert final["debaters"]["Alice"]["score"] == final["debaters"]["Bob"]["score"] == 6
    failure = final["winner_failure"]
    assert final["winner"] is None and failure["raw"] == "no verdict 3"  # the last reply
    fixes = [m for m in released if m[-1]["content"].startswith("Instructions:")]
    assert all(len(m) == 1 and m[0]["role"] == "user" for m in fixes)  # fresh, nothing before
    assert len(fixes) == 2 + 2 + 3  # each debater's score: two; the winner: three, then no more
    winner = winner_schema(load_debates(debates)[0], allow_tie=False)  # `general`'s
    schema = json.dumps(winner.model_json_schema())
    instructions = released_render(RELEASED_FORMAT_INSTRUCTIONS, schema=schema)
    assert [m[0]["content"] for m in fixes[-3:]] == [
        released_render(
            RELEASED_FIX_PROMPT,
            instructions=instructions,
            completion=f"no verdict {n}",
            error=failure["error"],
        )
        for n in range(3)
    ]
    # --repair moot: one follow-up turn in the conversation, then the failure
    turns = [m for m in ours if len(m) == 3]
    assert len(turns) == 3 and all(m[1]["role"] == "assistant" for m in turns)
    assert all(m[2]["content"].startswith("Your previous reply could not be read") for m in turns)
    assert not any(m[-1]["content"].startswith("Instructions:") for m in ours)
    (judgment,) = read_jsonl(tmp_path / "moot" / "judgments.jsonl")
    assert judgment["final"]["debaters"]["Bob"]["score"] == 6
    assert judgment["final"]["winner_failure"]["raw"] == "no verdict 5"  # asked, then repaired
