"""Debatrix judging through the Python API, against the scripted server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import pytest

from moot.agents.debatrix_judges import FRAMEWORKS
from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.data.debates import Debate, Speech, load_debates
from moot.core.llm.tokens import count_message_tokens, count_tokens
from moot.graphs.debatrix_run import JudgeSettings, judge_debates
from moot.testing import Fault, Rule, ScriptedServer, ServerConfig
from tests.conftest import shared_data

SCORE = '{"comment": "clear case", "score": 7}'
WORDS = "the motion holds because evidence shows a clear mechanism for every claim made here "


def analysis_text(tokens: int) -> str:
    """About `tokens` tokens of analysis prose."""
    text = WORDS * (tokens // count_tokens(WORDS) + 1)
    return text


def rules(winner: str, analysis: str = "ANALYSIS of this speech.") -> list[Rule]:
    return [
        Rule(r'"score": <an integer from 1 to 10>', SCORE, role="last"),
        Rule(r"specifically\.\s*$", "clear case", role="last"),  # a debater's comment
        Rule(r'"winner"', json.dumps({"winner": winner}), role="last"),
        Rule(r"gives Speech", analysis, role="system"),
        Rule(r"Condense the analyses", "SUMMARY of earlier analyses.", role="system"),
    ]


def debate(words_per_speech: int = 40, speeches: int = 4, fmt: str = "1v1") -> Debate:
    if fmt == "bp":
        order = ["OG", "OO", "OG", "OO", "CG", "CO", "CG", "CO"]
        pro, con = ("OG", "CG"), ("OO", "CO")
    else:
        order = ["Alice", "Bob"] * (speeches // 2)
        pro, con = ("Alice",), ("Bob",)
    body = " ".join(f"point{i}" for i in range(words_per_speech))
    return Debate(
        id=f"{fmt}-{words_per_speech}",
        motion="Zoos should be abolished",
        pro=pro,
        con=con,
        speeches=tuple(Speech(s, f"RAW{i} by {s}: {body}") for i, s in enumerate(order)),
        format=fmt,
    )


def run(server_url: str, debates, out: Path, framework: str = "debatrix", **options):
    window = options.pop("window", None)
    spec = parse_spec("openai/scripted", api_base=server_url, context_window=window)
    settings = JudgeSettings(Role("judge", spec, 0.0), FRAMEWORKS[framework], **options)
    client = ModelClient(retry=RetryPolicy(attempts=1))
    return asyncio.run(judge_debates(debates, out, settings, client, concurrency=4))


def test_debatrix_analyses_each_speech_with_the_earlier_analyses_per_dimension(tmp_path):
    with ScriptedServer(rules=rules("Bob")) as server:
        summary = run(server.url, [debate()], tmp_path)
        systems = [r.body["messages"] for r in server.requests]
    (record,) = summary.records
    assert record["status"] == "complete"
    assert set(record["dimensions"]) == {"argument", "source", "language"}
    for verdict in record["dimensions"].values():
        assert [s["index"] for s in verdict["speeches"]] == [0, 1, 2, 3]
        assert all(s["score"] == 7 and "comment" not in s for s in verdict["speeches"])
        assert verdict["debaters"] == {
            "Alice": {"comment": "clear case", "score": 7},
            "Bob": {"comment": "clear case", "score": 7},
        }
        assert verdict["winner"] == "Bob"
    assert record["final"]["winner"] == "Bob"
    # speech 3's analysis sees the analyses of speeches 1-2, never their text
    third = [m for m in systems if "gives Speech 3" in m[0]["content"]]
    assert len(third) == 3  # one per dimension
    user = third[0][1]["content"]
    assert "Analysis of Speech 1 by Alice" in user and "Analysis of Speech 2 by Bob" in user
    assert "RAW0" not in user and "RAW2 by Alice" in user  # the new speech only
    # the panel weighs the three dimensions
    panel = [m for m in systems if "main judge" in m[0]["content"]]
    assert len(panel) == 1 and "Weight: 3" in panel[0][1]["content"]
    assert summary.parse_failures == 0


def test_non_iterative_analyses_see_the_raw_earlier_speeches(tmp_path):
    with ScriptedServer(rules=rules("Alice")) as server:
        run(server.url, [debate()], tmp_path, "non-iterative")
        third = [r.body["messages"] for r in server.requests]
    third = [m for m in third if "gives Speech 3" in m[0]["content"]]
    assert "RAW0 by Alice" in third[0][1]["content"] and "Analysis of" not in third[0][1]["content"]


@pytest.mark.parametrize(
    ("framework", "analyses", "dimensions"),
    [
        ("chronological", 4, {"general"}),
        ("dimensional", 0, {"argument", "source", "language"}),
        ("direct", 0, {"general"}),
    ],
)
def test_baselines(framework, analyses, dimensions, tmp_path):
    with ScriptedServer(rules=rules("Alice")) as server:
        summary = run(server.url, [debate()], tmp_path, framework)
        requests = [r.body["messages"] for r in server.requests]
    (record,) = summary.records
    assert set(record["dimensions"]) == dimensions
    assert record["final"]["winner"] == "Alice"
    speech_calls = [m for m in requests if "gives Speech" in m[0]["content"]]
    assert len(speech_calls) == analyses * len(dimensions)
    assert any("main judge" in m[0]["content"] for m in requests) == (len(dimensions) > 1)


def test_a_winner_who_is_not_a_debater_is_a_parse_failure_not_a_verdict(tmp_path):
    with ScriptedServer(rules=rules("Carol")) as server:
        summary = run(server.url, [debate()], tmp_path, "direct")
    (record,) = summary.records
    assert record["status"] == "complete"
    assert record["final"]["winner"] is None
    assert "Carol" in record["final"]["winner_failure"]["raw"]
    assert summary.parse_failures == 1


def test_a_one_dimension_panel_counts_its_own_parse_failure(tmp_path):
    with ScriptedServer(rules=rules("Carol")) as server:
        summary = run(server.url, [debate()], tmp_path, "dimensional", dimensions=("argument",))
    (record,) = summary.records
    assert record["dimensions"]["argument"]["winner"] is None and record["final"]["winner"] is None
    assert summary.parse_failures == 2  # the dimension's winner and the panel's, asked apart


def test_a_tie_is_a_parse_failure_where_ties_are_not_allowed(tmp_path):
    with ScriptedServer(rules=rules("tie")) as server:
        summary = run(server.url, [debate()], tmp_path, "dimensional")
    (record,) = summary.records
    dims = record["dimensions"]
    assert dims["source"]["winner"] == "tie" and dims["language"]["winner"] == "tie"
    assert dims["argument"]["winner"] is None  # argument allows no tie (DebateArt)
    assert record["final"]["winner"] is None  # the panel must name one winner


def test_british_parliamentary_debates_predict_one_team_with_the_role_guidance(tmp_path):
    with ScriptedServer(rules=rules("CG")) as server:
        summary = run(server.url, [debate(fmt="bp")], tmp_path)
        systems = [r.body["messages"][0]["content"] for r in server.requests]
    (record,) = summary.records
    assert set(record["dimensions"]) == {"argument", "support", "clash", "language"}
    assert record["final"]["winner"] == "CG"
    assert set(record["final"]["debaters"]) == {"OG", "CG", "OO", "CO"}
    assert all("Point of Information" in s for s in systems if "judge on a panel" in s)


def long_debates() -> list[Debate]:
    """Debates of 15-17k tokens: real DebateArt speeches, repeated into longer debates."""
    source = load_debates(shared_data("panelbench", "debateart.jsonl"))
    made = []
    for base in sorted(source, key=lambda d: -sum(len(s.content) for s in d.speeches))[:3]:
        target = 15_000 + 1_000 * len(made)
        speeches = list(base.speeches)
        while sum(count_tokens(s.content) for s in speeches) < target:
            speeches += base.speeches[: 2 if len(speeches) % 2 == 0 else 1]
        while sum(count_tokens(s.content) for s in speeches) > target + 900:
            speeches.pop()
        if len(speeches) % 2:
            speeches.pop()
        made.append(
            Debate(base.id, base.motion, base.pro, base.con, tuple(speeches), base.info_slide)
        )
    return made


@pytest.mark.slow  # 9 judgings of 15-17k-token debates (70 s on an idle machine): started first
def test_debatrix_fits_a_16k_window_that_transcript_judges_cannot(tmp_path):
    debates = long_debates()
    sizes = [sum(count_tokens(s.content) for s in d.speeches) for d in debates]
    assert all(14_000 <= size <= 17_000 for size in sizes), sizes
    winner_rules = [
        Rule(f'debaters are: {re.escape(d.pro[0])}\n.*"winner"', json.dumps({"winner": d.pro[0]}))
        for d in debates
    ]
    score, _, *others = rules("x", analysis_text(700))
    config = ServerConfig(rules=[score, *winner_rules, *others], context_window=16_385)
    results = {}
    for framework in ("debatrix", "non-iterative", "direct"):
        with ScriptedServer(config) as server:
            summary = run(
                server.url,
                debates,
                tmp_path / framework,
                framework,
                window=16_385,
                analysis_tokens=800,
                judgment_tokens=1000,
            )
            rejected = [r for r in server.requests if r.outcome == "context_length_exceeded"]
            sizes = [count_message_tokens(r.body["messages"]) for r in server.requests]
        assert rejected == []  # a prompt that would not fit is never sent
        assert max(sizes, default=0) <= 16_385
        results[framework] = summary
    assert results["debatrix"].count("complete") == len(debates)
    assert all(r["final"]["winner"] for r in results["debatrix"].records)
    assert results["non-iterative"].count("incomplete") == len(debates)
    assert results["direct"].count("incomplete") == len(debates)
    condensed = [
        v["summaries"] for r in results["debatrix"].records for v in r["dimensions"].values()
    ]
    assert any(condensed)  # the analyses outgrew the window and were summarised


def test_a_failed_call_is_recorded_and_retried_on_rerun_without_repaying(tmp_path):
    with ScriptedServer(rules=rules("Alice")) as server:
        server.add_fault(Fault("500", times=1, match="gives Speech 3"))
        first = run(server.url, [debate()], tmp_path)
        assert [r["status"] for r in first.records] == ["error"]
        calls_before = len(server.requests)
        second = run(server.url, [debate()], tmp_path)
        repaid = [r for r in server.requests[calls_before:] if "gives Speech 1" in str(r.body)]
    assert [r["status"] for r in second.records] == ["complete"]
    assert repaid == []  # resumed from the checkpoint (and the cache)
    lines = (tmp_path / "judgments.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "complete"


def test_judging_other_debates_into_the_folder_costs_no_call_to_judge_the_first_again(tmp_path):
    first, other = debate(), debate(words_per_speech=41)
    with ScriptedServer(rules=rules("Alice")) as server:
        run(server.url, [first], tmp_path, "direct")
        run(server.url, [other], tmp_path, "direct")
        calls = len(server.requests)
        again = run(server.url, [first], tmp_path, "direct")
        assert len(server.requests) == calls  # judged before: the checkpoint has it
    assert [r["debate"] for r in again.records] == [first.id]
    logged = [json.loads(line)["debate"] for line in (tmp_path / "judgments.jsonl").open()]
    assert logged == [first.id]  # the log is the latest run's, as eval panelbench reads it


def test_a_report_stays_in_reports_whatever_the_debate_id(tmp_path):
    tricky = dataclasses.replace(debate(), id="../../escaped")
    with ScriptedServer(rules=rules("Alice")) as server:
        run(server.url, [tricky], tmp_path / "out", "direct")
    assert [p.name for p in (tmp_path / "out" / "reports").iterdir()] == ["..%2F..%2Fescaped.r0.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_other_settings_in_the_same_folder_are_refused(tmp_path):
    from moot.core.errors import ConfigError

    with ScriptedServer(rules=rules("Alice")) as server:
        run(server.url, [debate()], tmp_path, "direct")
        with pytest.raises(ConfigError, match="other settings"):
            run(server.url, [debate()], tmp_path, "debatrix")


def test_a_debate_given_twice_is_judged_once(tmp_path):
    with ScriptedServer(rules=rules("Alice")) as server:
        once = run(server.url, [debate()], tmp_path / "once", "direct")
        calls = len(server.requests)
        twice = run(server.url, [debate(), debate()], tmp_path / "twice", "direct")
        assert len(server.requests) == 2 * calls  # the cache is off: the same calls once more
    assert len(once.records) == len(twice.records) == 1 and twice.planned == 1
    assert len((tmp_path / "twice" / "judgments.jsonl").read_text().splitlines()) == 1


def test_the_tally_counts_what_ran(tmp_path):
    debates = [debate(), debate(words_per_speech=41)]
    with ScriptedServer(rules=rules("Alice")) as server:
        spec = parse_spec("openai/scripted", api_base=server.url)
        settings = JudgeSettings(Role("judge", spec, 0.0), FRAMEWORKS["direct"])
        client = ModelClient(retry=RetryPolicy(attempts=1))
        first = asyncio.run(judge_debates(debates[:1], tmp_path, settings, client))
        summary = asyncio.run(judge_debates(debates, tmp_path, settings, client))
    assert [(t.unit, t.planned, t.skipped, t.done, t.failed) for t in first.tallies] == [
        ("judgments", 1, 0, 1, 0)
    ]
    assert [(t.unit, t.planned, t.skipped, t.done, t.failed) for t in summary.tallies] == [
        ("judgments", 2, 1, 1, 0)
    ]
    assert (summary.planned, summary.already_done) == (2, 1)


def test_scores_are_asked_for_after_the_comments_as_the_paper_does(tmp_path):
    with ScriptedServer(rules=rules("Bob")) as server:
        run(server.url, [debate(speeches=2)], tmp_path, "direct")
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    comments = [i for i, p in enumerate(prompts) if p.rstrip().endswith("specifically.")]
    scores = [i for i, p in enumerate(prompts) if "generate a score for" in p]
    assert len(comments) == 2  # one comment call per debater, with no score asked for
    assert all('"score"' not in prompts[i] for i in comments)
    # each debater's score call reads that debater's comment: a second call, after the first
    for name in ("Alice", "Bob"):
        (comment,) = [i for i in comments if f"judgment for {name} specifically" in prompts[i]]
        (score,) = [i for i in scores if f"The debater is: {name}" in prompts[i]]
        assert comment < score and "clear case" in prompts[score]
    assert len(scores) == 2  # `direct` analyses no speech: the debaters' scores only


@pytest.mark.parametrize("reply", ['{"score": 7.5}', '{"score": 11}', '{"score": "seven"}'])
def test_a_score_that_is_not_an_integer_from_1_to_10_is_a_parse_failure(reply, tmp_path):
    bad = [Rule(r'"score": <an integer from 1 to 10>', reply, role="last"), *rules("Bob")[1:]]
    with ScriptedServer(rules=bad) as server:
        summary = run(server.url, [debate(speeches=2)], tmp_path, "chronological")
    (record,) = summary.records
    (general,) = record["dimensions"].values()
    for entry in [*general["speeches"], *general["debaters"].values()]:
        assert "score" not in entry and entry["parse_failure"]["raw"]  # never substituted
    assert summary.parse_failures == 4  # two speeches, two debaters; the winner was read


def test_the_released_scoring_asks_comment_and_score_in_one_call(tmp_path):
    with ScriptedServer(rules=rules("Bob")) as server:
        summary = run(server.url, [debate(speeches=2)], tmp_path, "direct", scoring="released")
        prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    (record,) = summary.records
    assert record["final"]["debaters"]["Bob"] == {"comment": "clear case", "score": 7}
    assert not any(p.rstrip().endswith("specifically.") for p in prompts)
    both = [p for p in prompts if "specifically, and generate a score" in p]
    assert len(both) == 2 and all('"comment": "..."' in p for p in both)
