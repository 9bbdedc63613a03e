"""`moot index` and `moot retrieve`: real data, query expansion, bad input.

In process (`moot.index(...)`, `moot.retrieve(...)`, `moot.cli.main`), but the deadline's wait.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

import moot
from moot.cli import main
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import moot_env, read_jsonl, refused_in_one_line, run_moot, stderr, stdout
from tests.conftest import shared_data

DOCS = [
    {"id": "a", "text": "Compulsory voting raises turnout.", "url": "https://x.edu/a"},
    {"id": "b", "text": "Voting should stay a free choice.", "url": "https://y.com/b"},
    {"id": "c", "text": "Turnout falls when voting is optional.", "url": None},
]


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("cli-index")
    docs = write_jsonl(tmp / "docs.jsonl", DOCS)
    result = moot.index(docs=docs, out=tmp / "index", chunk_chars=500)
    assert "indexed 3 documents as 3 chunks" in stdout(result)
    return tmp / "index"


def test_index_and_retrieve_on_debateqa_answers_and_berds_questions(tmp_path, capsys):
    answers = [json.loads(line) for line in shared_data("debateqa", "demo_answers.jsonl").open()]
    docs = write_jsonl(
        tmp_path / "docs.jsonl", [{"id": a["id"], "text": a["generation"]} for a in answers[:300]]
    )
    lines = shared_data("berds", "dev_perspective_sets.jsonl").read_text().splitlines()[:4]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["index", "--docs", str(docs), "--out", str(tmp_path / "index"), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    manifest = json.loads((tmp_path / "index" / "index.json").read_text())
    assert manifest["documents"] == 300 and manifest["chunks"] > 300
    out = tmp_path / "retrieved.jsonl"
    moot.retrieve(questions=questions, index=tmp_path / "index", out=out, k=5)
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [
        f"{json.loads(line)['dataset']}/{json.loads(line)['id']}" for line in lines
    ]
    for record in records:
        assert record["status"] == "ok" and record["retriever"] == "bm25" and record["k"] == 5
        assert len(record["chunks"]) == 5
        scores = [c["score"] for c in record["chunks"]]
        assert scores == sorted(scores, reverse=True) and scores[-1] > 0
        assert set(record["chunks"][0]) == {"id", "doc_id", "text", "title", "url", "score"}
    # "child performers" retrieves a DebateQA answer that discusses child performers
    assert "child" in records[0]["chunks"][0]["text"].lower()


def test_retrieve_with_trusted_domains_warns_when_short(index, tmp_path):
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "q1", "question": "Voting turnout?"}])
    out = tmp_path / "r.jsonl"
    result = moot.retrieve(questions=questions, index=index, out=out, k=3, trusted_domains=True)
    assert "warning: 1 of 1 question(s) got fewer than 3 chunks" in stderr(result)
    (record,) = read_jsonl(out)
    assert [c["id"] for c in record["chunks"]] == ["a#0"]
    assert record["mmr"] is None and record["trusted_domains"] is True


EXPANSION_RULES = [
    Rule(pattern='one field, "perspectives"', reply='{"perspectives": ["free choice"]}'),  # list
    Rule(
        pattern="Question: Should voting",
        reply='{"Higher Turnout": "raises turnout", "Free Choice": "free choice"}',  # Table 13's
    ),
    Rule(pattern="Question: Broken", reply="no JSON at all"),
]


def test_query_expansion_merges_round_robin_and_records_failures(index, tmp_path):
    questions = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "ok", "question": "Should voting be compulsory?"},
            {"id": "bad", "question": "Broken?"},
        ],
    )
    out = tmp_path / "r.jsonl"
    with ScriptedServer(rules=EXPANSION_RULES) as server:
        with pytest.raises(moot.RunFailed) as failed:
            moot.retrieve(
                questions=questions, index=index, out=out, k=2, query_expansion=True,
                model="openai/scripted", api_base=server.url, max_retries=0,
            )  # fmt: skip
        calls = len(server.requests)
    assert type(failed.value) is moot.RunFailed and failed.value.result.exit_code == 1
    assert "moot: 1 of 2 expansions failed; rerun" in stderr(failed.value.result)
    ok, bad = read_jsonl(out)
    assert ok["status"] == "ok" and ok["perspectives"] == ["raises turnout", "free choice"]
    assert [c["id"] for c in ok["chunks"]] == ["a#0", "b#0"]  # top of each perspective's list
    assert bad["status"] == "parse_failure" and bad["failure"]["raw"] == "no JSON at all"
    assert bad["chunks"] == [] and calls == 3  # ok, bad, bad's repair round
    listed = tmp_path / "listed.jsonl"
    with ScriptedServer(rules=EXPANSION_RULES) as server:
        moot.retrieve(
            questions=questions, index=index, out=listed, k=2, query_expansion=True,
            expansion_prompt="list", limit=1, model="openai/scripted", api_base=server.url,
        )  # fmt: skip
    assert read_jsonl(listed)[0]["perspectives"] == ["free choice"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"k": "0"}, "-k must be a positive integer"),
        ({"mmr": "1.5"}, "--mmr must be between 0 and 1"),
        ({"mmr": "nan"}, "--mmr must be between 0 and 1"),
        ({"mmr_embedder": "cls:x"}, "--mmr-embedder applies to --mmr"),
        ({"mmr_norm": "question"}, "--mmr-norm applies to --mmr"),
        ({"expansion_prompt": "list"}, "--expansion-prompt applies to --query-expansion"),
        ({"mmr": "0.9", "mmr_embedder": "cls:nowhere"}, "cannot load the encoder 'nowhere'"),
        ({"retriever": "dense"}, "has no dense vectors; rebuild it with moot index --dense"),
        ({"index": "MISSING"}, ": folder not found"),
        ({"web": True}, "give --index DIR or --web (one of them)"),
    ],
)
def test_bad_options_exit_2_with_one_line(index, tmp_path, extra, needle):
    questions = write_jsonl(tmp_path / "q.jsonl", ["Is it?"])
    out = tmp_path / "r.jsonl"
    if "MISSING" in extra.values():
        extra = {"index": tmp_path / "missing"}
    else:
        extra = {"index": index, **extra}
    with pytest.raises(moot.MootError) as refused:
        moot.retrieve(questions=questions, out=out, **extra)
    assert needle in refused_in_one_line(refused.value)
    assert not out.exists()


def test_an_out_that_is_an_input_is_refused(index, tmp_path, capsys):
    questions = write_jsonl(tmp_path / "q.jsonl", ["Is it?"])
    before = {p: p.read_bytes() for p in [questions, *index.iterdir()] if p.is_file()}
    for out, problem in [
        (tmp_path / "." / "q.jsonl", f"is the input --questions {questions}"),
        (index / "chunks.jsonl", f"lies inside the input --index {index}"),
    ]:
        args = ["retrieve", "--questions", str(questions), "--index", str(index), "--out", str(out)]
        assert main(args) == 2
        assert (
            capsys.readouterr().err == f"moot: error: --out {out} {problem}; choose another --out\n"
        )
    assert {p: p.read_bytes() for p in before} == before


def test_questions_without_text_exit_2(index, tmp_path):
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "1", "question": "Fine?"}, {"id": "2"}])
    out = tmp_path / "r.jsonl"
    with pytest.raises(moot.MootError) as refused:
        moot.retrieve(questions=questions, index=index, out=out)
    assert "q.jsonl, line 2: missing or empty 'question'" in refused_in_one_line(refused.value)
    assert not out.exists()


def test_an_index_built_with_another_embedder_exits_2(tmp_path):
    index = tmp_path / "index"
    # a manifest that claims another embedder: the names are compared before any model loads
    moot.index(docs=write_jsonl(tmp_path / "d.jsonl", DOCS), out=index)
    manifest = json.loads((index / "index.json").read_text())
    manifest["embedder"] = "other-embedder"
    (index / "index.json").write_text(json.dumps(manifest))
    np.save(index / "dense.npy", np.zeros((3, 4), dtype=np.float32))
    questions = write_jsonl(tmp_path / "q.jsonl", ["Is it?"])
    out = tmp_path / "r.jsonl"
    with pytest.raises(moot.MootError) as refused:
        moot.retrieve(
            questions=questions, index=index, out=out, retriever="dense",
            embedder="all-MiniLM-L6-v2",
        )  # fmt: skip
    assert not out.exists()
    assert "built with the embedder 'other-embedder', not 'all-MiniLM-L6-v2'" in (
        refused_in_one_line(refused.value)
    )


@pytest.mark.parametrize(
    ("docs", "needle"),
    [
        ([{"id": "a", "text": ""}], "line 1: missing or empty 'text'"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "id a: repeated document id"),
    ],
)
def test_bad_corpora_exit_2_and_write_nothing(tmp_path, docs, needle):
    path = write_jsonl(tmp_path / "d.jsonl", docs)
    with pytest.raises(moot.MootError) as refused:
        moot.index(docs=path, out=tmp_path / "index")
    assert needle in refused_in_one_line(refused.value)
    assert not (tmp_path / "index").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(moot.MootError) as refused:
        moot.index(docs=empty, out=tmp_path / "index")
    assert "no .txt, .md, .html, .htm files" in str(refused.value)


def test_web_search_through_the_cli_keeps_the_key_out_of_outputs(tmp_path, monkeypatch):
    from tests.core.retrieval.test_websearch import KEY, SearchServer

    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "q", "question": "Is UBI good?"}])
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv("MOOT_SEARCH_API_KEY", KEY)
    with SearchServer() as server:
        result = moot.retrieve(
            questions=questions, web=True, search_api_base=server.url, out=out, k=2,
            trusted_domains=True,
        )  # fmt: skip
    (record,) = read_jsonl(out)
    assert record["retriever"] == "web:brave"
    assert [c["url"] for c in record["chunks"]] == [
        "https://econ.edu/ubi",
        "https://agency.gov/report",
    ]
    assert KEY not in out.read_text() + stdout(result) + stderr(result)


# a process: its cost is the wall clock's (three tries of 1 s and their backoff), kept out of the
# fast tier as the signal tests are
@pytest.mark.subprocess
@pytest.mark.parametrize("dripped", ["body", "headers"])
def test_a_web_search_that_drips_its_reply_ends_at_the_deadline(tmp_path, dripped):
    """Issue 29, item 15: --timeout bounds each search request, first byte to last."""
    from tests.core.retrieval.test_websearch import KEY, RESULTS

    class Drip(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"web": {"results": RESULTS}}).encode()
            pad = "x" * 400  # dripped, the headers alone take 80 s: far past the deadline
            head = f"HTTP/1.1 200 OK\r\nX-Pad: {pad}\r\nContent-Length: {len(body)}\r\n\r\n"
            if dripped == "body":
                self.wfile.write(head.encode())
            with contextlib.suppress(OSError):  # the client hangs up at its deadline
                for byte in (head.encode() if dripped == "headers" else b"") + body:
                    self.wfile.write(bytes([byte]))  # each read waits 0.2 s: no read timeout
                    self.wfile.flush()
                    time.sleep(0.2)

        def log_message(self, *args: object) -> None:
            pass

    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "q", "question": "Is UBI good?"}])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/res/v1"
    try:
        result = run_moot(
            "retrieve", "--questions", questions, "--web", "--search-api-base", url, "--out",
            tmp_path / "r.jsonl", "-k", 2, "--timeout", 1, env=moot_env(MOOT_SEARCH_API_KEY=KEY),
            timeout=60,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"moot: error: web search failed after 3 tries: no reply within 1s from {url}/web/search"
    )


def test_retrieve_with_mmr_records_its_normalisation(index, tmp_path):
    # both normalisations' arithmetic: tests/graphs/test_berds_retrieve.py; here the flag
    # reaches it, in one run, as each run loads the MMR embedder (seconds of CPU)
    questions = write_jsonl(
        tmp_path / "q.jsonl",
        [{"id": "q1", "question": "compulsory voting turnout"}, {"id": "q2", "question": "free"}],
    )
    out = tmp_path / "question.jsonl"
    moot.retrieve(questions=questions, index=index, out=out, k=2, mmr=0.9, mmr_norm="question")
    records = read_jsonl(out)
    assert {(r["mmr"], r["mmr_norm"]) for r in records} == {(0.9, "question")}
    # the first pick is lambda * score / max: per question that is lambda itself
    assert [r["chunks"][0]["score"] for r in records] == pytest.approx([0.9, 0.9])


def test_a_recipe_dry_run_plans_berds_on_what_retrieve_would_write(index, tmp_path):
    """`moot retrieve`'s plan holds its stand-in hits (k distinct web results, or the index's
    longest chunks): the `eval berds` stage after it is planned, not left out. Nothing is
    searched, sent or written; the plan names web search's key."""
    lines = shared_data("berds", "dev_perspective_sets.jsonl").read_text().splitlines()[:2]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with ScriptedServer() as server:
        remote = {"api-base": server.url, "max-retries": 0}
        retrieve = {"command": "retrieve", "questions": str(questions), "k": 2, **remote}
        retrieve |= {"query-expansion": True, "model": "openai/scripted"}
        berds = {"command": "eval berds", "retrieved": "{retrieve}", "perspectives": str(questions)}
        berds |= {"k": 2, "detector": "openai/judge", **remote}
        plans = []
        for source in ({"web": True}, {"index": str(index)}):
            recipe = {"stages": {"retrieve": retrieve | source, "berds": berds}}
            path = tmp_path / "recipe.yaml"
            path.write_text(json.dumps(recipe), encoding="utf-8")  # YAML reads JSON
            plans.append(stdout(moot.run(path, out=tmp_path / "out", dry_run=True)))
        web = {"questions": questions, "web": True, "out": tmp_path / "r.jsonl"}
        alone = stdout(moot.retrieve(**web, dry_run=True))
        assert len(server.requests) == 0
    for plan in plans:
        assert re.search(r"berds: detections +8 +0 +8", plan), plan  # 2 x 2 perspectives x k
        assert re.search(r"berds/perspective_detector +perspective_detection .* 8 ", plan)
    assert "key: web:brave: MOOT_SEARCH_API_KEY" in alone
    assert "key: web:brave: MOOT_SEARCH_API_KEY" in plans[0]  # the recipe's plan says it too
    assert plans[0].count("key: openai/judge") == 1  # each model's key once
    assert sorted(p.name for p in tmp_path.iterdir()) == ["questions.jsonl", "recipe.yaml"]
