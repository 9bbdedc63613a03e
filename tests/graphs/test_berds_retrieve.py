"""`retrieve_questions` through the Python API: a local index and the scripted server over HTTP.

No request cache: a rerun that makes no request proves the progress log, not the cache, resumed it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.data.questions import Question
from moot.core.retrieval.index import Index, LocalRetriever, build_index
from moot.graphs.berds_retrieve import (
    ExpansionSettings,
    QueryExpansion,
    _expansion_items,
    retrieve_questions,
)
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import read_jsonl

DOCS = [
    {"id": "a", "text": "Compulsory voting raises turnout.", "url": "https://x.edu/a"},
    {"id": "b", "text": "Voting should stay a free choice.", "url": "https://y.com/b"},
    {"id": "c", "text": "Turnout falls when voting is optional.", "url": None},
]
RULES = [
    Rule(
        "Question: Should voting", '{"Higher Turnout": "raises turnout", "Liberty": "free choice"}'
    ),
    Rule("Question: Broken", '{"Liberty": "free choice"}'),
    Rule("Question: Garbled", "no JSON at all"),
]
QUESTIONS = [
    Question("ok", "Should voting be compulsory?"),
    Question("broken", "Broken?"),
    Question("garbled", "Garbled?"),
    Question("ok-again", "Should voting be compulsory?"),  # the same text: one expansion
]


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> LocalRetriever:
    folder = tmp_path_factory.mktemp("index")
    docs = folder / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    build_index(docs, folder / "index", chunk_chars=500)
    return LocalRetriever(Index.load(folder / "index"))


def retrieve(server: ScriptedServer, retriever: LocalRetriever, out: Path):
    role = Role("query_expander", parse_spec("openai/scripted", api_base=server.url))
    expansion = QueryExpansion(role, client=ModelClient(retry=RetryPolicy(attempts=1)))  # no cache
    run = retrieve_questions(QUESTIONS, retriever, out, k=2, query_expansion=expansion)
    return asyncio.run(run)


def asked(server: ScriptedServer) -> list[str]:
    return [r.body["messages"][0]["content"].split("Question: ")[1][:6] for r in server.requests]


def test_expansions_are_paid_once_and_failures_recorded_then_retried(retriever, tmp_path):
    out = tmp_path / "retrieved.jsonl"
    log = tmp_path / ".retrieved.jsonl.progress.jsonl"
    with ScriptedServer(rules=RULES, faults=[Fault("500", match="Broken")]) as server:
        first = retrieve(server, retriever, out)
        assert sorted(asked(server)) == ["Broken", "Garble", "Garble", "Should"]  # one repair
        records = read_jsonl(out)
        assert [r["id"] for r in records] == ["ok", "broken", "garbled", "ok-again"]
        ok, broken, garbled, again = records
        assert list(ok) == [
            "id", "question", "retriever", "k", "mmr", "mmr_norm", "query_expansion",
            "trusted_domains",
            "perspectives", "status", "chunks",
        ]  # fmt: skip
        assert ok["perspectives"] == ["raises turnout", "free choice"]
        assert [c["id"] for c in ok["chunks"]] == ["a#0", "b#0"]  # each perspective's top hit
        assert {**again, "id": "ok"} == ok
        assert (broken["status"], broken["chunks"]) == ("error", []) and "500" in broken["error"]
        assert garbled["status"] == "parse_failure" and garbled["chunks"] == []
        assert garbled["failure"]["raw"] == "no JSON at all"
        assert list(broken)[-3:] == ["status", "error", "chunks"]
        assert (first.failed, first.short) == (2, 0)
        tally = first.tallies[0]
        assert (tally.planned, tally.skipped, tally.done, tally.failed) == (3, 0, 1, 2)
        assert len(read_jsonl(log)) == 3

        server.clear_log()
        second = retrieve(server, retriever, out)
        assert sorted(asked(server)) == ["Broken", "Garble", "Garble"]  # the failed ones again
        assert read_jsonl(out)[1]["perspectives"] == ["free choice"]
        assert read_jsonl(out)[:1] == records[:1] and second.failed == 1
        tally = second.tallies[0]
        assert (tally.skipped, tally.done, tally.failed) == (1, 1, 1)


def test_the_list_prompt_keeps_its_ids_and_the_papers_has_its_own():
    role = Role("query_expander", parse_spec("openai/scripted"))
    ids = {
        prompt: _expansion_items(QUESTIONS[:1], ExpansionSettings(role, prompt=prompt))[0]["ok"]
        for prompt in ("paper", "list")
    }
    # list's: the id every expansion had before the paper's prompt became the default
    assert ids == {"paper": "a67b42eba9a0533f", "list": "f4b8a6ab8bff7164"}


def test_without_query_expansion_nothing_is_logged(retriever, tmp_path):
    out = tmp_path / "retrieved.jsonl"
    run = asyncio.run(retrieve_questions(QUESTIONS[:1], retriever, out, k=5))
    (record,) = read_jsonl(out)
    assert record["status"] == "ok" and record["query_expansion"] is False
    assert "perspectives" not in record and len(record["chunks"]) == 3
    assert (run.tallies, run.failed, run.short) == ([], 0, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["retrieved.jsonl"]


def test_mmr_divides_by_the_datasets_maximum_score_by_default(retriever, tmp_path):
    mmr = LocalRetriever(retriever.index, mmr=0.9)
    questions = [Question("strong", "compulsory voting raises turnout"), Question("weak", "free")]
    best = {q.id: mmr.candidates(q.text, 2)[0].score for q in questions}
    top = max(best.values())
    assert best["weak"] < top
    for norm, divisor in (("dataset", {"strong": top, "weak": top}), ("question", best)):
        out = tmp_path / f"{norm}.jsonl"
        asyncio.run(retrieve_questions(questions, mmr, out, k=2, mmr_norm=norm))
        records = read_jsonl(out)
        # nothing selected yet: the first pick's MMR value is lambda * score / divisor
        for record in records:
            qid = record["id"]
            assert record["mmr_norm"] == norm
            assert record["chunks"][0]["score"] == pytest.approx(0.9 * best[qid] / divisor[qid])
