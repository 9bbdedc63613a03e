"""`score_answers` and the P.D. report, on a tiny random-init GPT-2 with GPT-2's tokenizer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from moot.core.data.questions import Answer, PartialAnswer, PartialAnswers
from moot.core.errors import ConfigError
from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer
from moot.graphs.debateqa_pd import score_answers, summarize, write_report
from tests.cli.helpers import read_jsonl
from tests.tiny_gpt2 import tiny_gpt2

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast

ANSWER = "Universal basic income is debated: it may cut poverty, and it may cost too much."
PARTIALS = (
    PartialAnswer("Yes, it should.", "It cuts poverty and simplifies welfare."),
    PartialAnswer("No.", "The cost would require large tax rises and could fuel inflation."),
)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), n_positions=128, initializer_range=0.1)


def pairs(key: str, answer: str = ANSWER, partials=PARTIALS):
    return [(Answer(key, answer), PartialAnswers(key, "Should UBI be adopted?", partials))]


def score(pairs, out: Path, make_scorer, claim):
    return asyncio.run(score_answers(pairs, out, make_scorer, claim))


def test_scoring_other_answers_into_the_folder_keeps_the_earlier_scores(gpt2, tmp_path):
    built: list[PerspectiveDiversityScorer] = []

    def make_scorer() -> PerspectiveDiversityScorer:
        built.append(PerspectiveDiversityScorer(str(gpt2)))
        return built[-1]

    claim = {"scorer": "tiny"}
    first = score(pairs("q1") * 2, tmp_path, make_scorer, claim)  # one answer given twice
    assert len(first.records) == 1 and first.scored == 1 and first.window == 128
    score(pairs("q2"), tmp_path, make_scorer, claim)
    again = score(pairs("q1"), tmp_path, make_scorer, claim)

    assert (again.records, again.scored, again.window, len(built)) == (first.records, 0, None, 2)
    assert [r["id"] for r in read_jsonl(tmp_path / "scores.jsonl")] == ["q1", "q2"]
    tally = again.tallies[0]
    assert (tally.unit, tally.planned, tally.skipped, tally.done) == ("answers", 1, 1, 0)

    edited = score(pairs("q1", ANSWER + " More."), tmp_path, make_scorer, claim)
    assert edited.scored == 1 and edited.records[0]["pd"] != first.records[0]["pd"]


def test_a_partial_answer_over_the_window_is_a_final_error(gpt2, tmp_path):
    too_long = (PartialAnswer("Long.", "word " * 40),)
    built: list[int] = []

    def make_scorer() -> PerspectiveDiversityScorer:
        built.append(1)
        return PerspectiveDiversityScorer(str(gpt2), max_length=32)

    items = pairs("q1") + pairs("q2", partials=too_long)
    first = score(items, tmp_path, make_scorer, {})
    assert [r["status"] for r in first.records] == ["ok", "error"]
    assert "does not fit the scorer's window of 32 tokens" in first.records[1]["error"]
    assert (first.tallies[0].done, first.tallies[0].failed) == (2, 0)  # final, not retried
    again = score(items, tmp_path, make_scorer, {})
    assert again.records == first.records and again.scored == 0 and built == [1]


def test_a_scorer_that_cannot_be_built_leaves_no_claim(gpt2, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="max length 4096"):
        score(pairs("q1"), out, lambda: PerspectiveDiversityScorer(str(gpt2), max_length=4096), {})
    assert not out.exists()
    # the folder is still free for a run that works, and then held for its settings
    run = score(pairs("q1"), out, lambda: PerspectiveDiversityScorer(str(gpt2)), {"w": 1})
    assert run.scored == 1 and run.records[0]["status"] == "ok"
    built: list[int] = []

    def make_scorer() -> PerspectiveDiversityScorer:
        built.append(1)
        return PerspectiveDiversityScorer(str(gpt2))

    with pytest.raises(ConfigError, match="another scorer or settings"):
        score(pairs("q1", ANSWER + " More."), out, make_scorer, {"w": 2})
    assert built == []  # refused before the scorer was loaded


def test_a_finished_folder_is_claimed_without_a_scorer(tmp_path):
    def make_scorer() -> PerspectiveDiversityScorer:
        raise AssertionError("nothing is pending: no scorer is built")

    run = score([], tmp_path, make_scorer, {"w": 1})
    assert (run.records, run.window) == ([], None)
    assert (tmp_path / ".moot" / "pd.json").read_text() == '{\n  "w": 1\n}\n'


def test_report(tmp_path):
    records = [
        {"id": "a", "status": "ok", "pd": 12.345678, "truncated": True},
        {"id": "b", "status": "ok", "pd": 30000.5},
        {"id": "c", "status": "error", "error": "too long"},
    ]
    summary = summarize(records, variant="mean", scorer="gpt2", window=1024)
    assert (summary["count"], summary["truncated"], summary["errors"]) == (2, 1, 1)
    assert summary["median"] == pytest.approx((12.345678 + 30000.5) / 2)
    write_report(summary, tmp_path)
    assert (tmp_path / "summary.md").read_text(encoding="utf-8") == (
        "# Perspective Diversity (mean: mean of perplexities, lower is better)\n\n"
        "scorer `gpt2`, window 1024 tokens\n\n"
        "| answers | mean P.D. | median | min | max | truncated | errors |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        "| 2 | 1.501e+04 | 1.501e+04 | 12.35 | 3e+04 | 1 | 1 |\n"
    )
    empty = summarize(records[2:], variant="released", scorer="s", window=None)
    write_report(empty, tmp_path)
    assert "mean of perplexities" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| 0 | n/a | n/a | n/a | n/a | 0 | 1 |" in (tmp_path / "summary.md").read_text()
