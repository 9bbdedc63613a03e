"""`moot answer` and `moot curate` end to end: a real BM25 index over DebateQA answers, BERDS
questions, and the scripted server over HTTP.

In process (`moot.answer(...)`, `moot.curate(...)`), but Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

import moot
from moot.core.retrieval.embeddings import Embedder, unit_rows
from moot.core.retrieval.index import build_index
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import popen_moot, read_jsonl, refused_in_one_line, stderr
from tests.conftest import shared_data
from tests.fenced import unfence
from tests.tiny import tiny_bert

FINAL = "It is debated. Some argue it reduces poverty; others say it costs too much."
REACT_RULES = [
    Rule(pattern="no searches left", role="last", reply=f"Thought: done.\nFinal Answer: {FINAL}"),
    Rule(pattern=r"search 1 of 3", role="last", reply="Thought: other side?\nSearch: costs of it"),
    Rule(pattern=r"search 2 of 3", role="last", reply="Thought: evidence.\nSearch: trials"),
    # past the last search the agent still asks: the graph makes it answer
    Rule(pattern=r"search 3 of 3", role="last", reply="Thought: more!\nSearch: anything"),
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """An index over 150 DebateQA model answers, and 3 BERDS questions."""
    answers = read_jsonl(shared_data("debateqa", "demo_answers.jsonl"))[:150]
    folder = tmp_path_factory.mktemp("corpus")
    docs = folder / "docs.jsonl"
    docs.write_text(
        "".join(json.dumps({"id": f"a{r['id']}", "text": r["generation"]}) + "\n" for r in answers)
    )
    build_index(docs, folder / "index")
    berds = read_jsonl(shared_data("berds", "dev_perspective_sets.jsonl"))[:3]
    questions = folder / "questions.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in berds))
    return {"docs": docs, "index": folder / "index", "questions": questions, "berds": berds}


def answer_options(server, corpus, out, **extra):
    """The keyword arguments of `moot.answer` for `corpus`'s questions on `server`."""
    options = {"questions": corpus["questions"], "out": out, "model": "openai/scripted"}
    return options | {"api_base": server.url, "max_retries": 0, **extra}


def curate_options(server, corpus, out, docs, **extra):
    """The keyword arguments of `moot curate` (`moot.curate(...)`) for `corpus`'s
    questions on `server`, its corpus `docs` (a folder of documents or an index)."""
    options = {"questions": corpus["questions"], "docs": docs, "out": out}
    return options | {"model": "openai/scripted", "api_base": server.url, **extra}


def test_react_single_searches_three_times_then_answers_and_resumes(corpus, tmp_path):
    out = tmp_path / "react"
    with ScriptedServer(rules=REACT_RULES) as server:
        options = answer_options(server, corpus, out, mode="react-single", index=corpus["index"])
        moot.answer(**options)
        assert len(server.requests) == 3 * 4  # per question: 3 agent replies + the final
        records = read_jsonl(out / "answers.jsonl")
        assert [r["id"] for r in records] == [f"{b['dataset']}/{b['id']}" for b in corpus["berds"]]
        for record, berds in zip(records, corpus["berds"], strict=True):
            assert record["status"] == "ok" and record["answer"] == FINAL
            searches = [e for e in record["trace"] if e["kind"] == "search"]
            assert [s["query"] for s in searches] == [berds["question"], "costs of it", "trials"]
            assert all(len(s["chunk_ids"]) == 3 for s in searches)
            ids = [c["id"] for c in record["chunks"]]
            assert len(ids) == len(set(ids)) <= 9 and all(c["text"] for c in record["chunks"])
            assert [e["kind"] for e in record["trace"]].count("step") == 3
            assert record["trace"][-1]["kind"] == "final"
            assert record["ledger"]["calls"] == 4 and record["ledger"]["prompt_tokens"] > 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["answered"] == 3 and summary["mean_searches"] == 3
        server.clear_log()
        moot.answer(**options)
        assert server.requests == []
        assert read_jsonl(out / "answers.jsonl") == records


def table_17(record):
    """The user turn of the paper's RAG prompt (Table 17) for a record's chunks."""
    documents = "".join(chunk["text"] + "\n\n" for chunk in record["chunks"])
    return f"## Document:\n{documents}## Question: {record['question']}"


ANSWERER = "It is debated; both sides have evidence."
# the answerer's request is Table 17's prompt; the agent's the ReAct transcript
PAPER_REACT_RULES = [Rule(pattern="## Question:", role="last", reply=ANSWERER), *REACT_RULES]


def test_react_agent_picks_at_most_9_chunks_for_the_answering_model_and_resumes(corpus, tmp_path):
    from moot.testing import Fault

    out = tmp_path / "react"
    with ScriptedServer(rules=PAPER_REACT_RULES) as server:
        # the first answerer call fails for good: the question is retried by the rerun
        server.add_fault(Fault(kind="500", times=1, match="## Question:"))
        agent = {"agent_model": "openai/agent", "agent_api_base": server.url}
        options = answer_options(server, corpus, out, mode="react", index=corpus["index"], **agent)
        with pytest.raises(moot.RunFailed) as first:
            moot.answer(**options)
        assert type(first.value) is moot.RunFailed and first.value.result.exit_code == 1
        by_model = [(r.body["model"], r.body["messages"]) for r in server.requests]
        agents = [m for name, m in by_model if name == "agent"]
        answerers = [m for name, m in by_model if name == "scripted"]
        assert len(agents) == 3 * 3 and len(answerers) == 3  # 3 agent steps, 1 answer each
        assert all("Thought" in m[0]["content"] for m in agents)  # the ReAct system prompt
        for messages in answerers:
            assert messages[0]["content"].startswith("Your task is to provide an answer")
            assert "## Document" in messages[0]["content"]  # Table 17's system turn
            user = messages[1]["content"]
            assert user.startswith("## Document:\n") and "Thought" not in user
        records = read_jsonl(out / "answers.jsonl")
        assert [r["status"] for r in records].count("error") == 1
        server.clear_log()
        moot.answer(**options)
        # the agent's replies come from the cache: only the failed answer is asked again
        assert [r.body["model"] for r in server.requests] == ["scripted"]
        records = read_jsonl(out / "answers.jsonl")
    for record in records:
        assert record["status"] == "ok" and record["answer"] == ANSWERER
        ids = [c["id"] for c in record["chunks"]]
        assert 3 < len(ids) == len(set(ids)) <= 9
        user = next(
            m[1]["content"] for _, m in by_model if m[1]["content"].endswith(record["question"])
        )
        assert unfence(user) == table_17(record)  # every picked chunk, no other
        steps = [e for e in record["trace"] if e["kind"] == "step"]
        assert len(steps) == 3 and steps[-1]["query"] == "anything"  # past the last: answerer
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agent_model"] == "openai/agent" and summary["model"] == "openai/scripted"


def test_rag_gives_the_top_10_chunks_and_plain_none(corpus, tmp_path):
    with ScriptedServer(rules=[Rule(pattern=".", reply="An answer.")]) as server:
        moot.answer(
            **answer_options(server, corpus, tmp_path / "rag", mode="rag", index=corpus["index"])
        )
        record = read_jsonl(tmp_path / "rag" / "answers.jsonl")[0]
        assert len(record["chunks"]) == 10 and record["answer"] == "An answer."
        scores = [c["score"] for c in record["chunks"]]
        assert scores == sorted(scores, reverse=True)
        users = [r.body["messages"][1]["content"] for r in server.requests]
        user = next(u for u in users if u.endswith(corpus["berds"][0]["question"]))
        assert unfence(user) == table_17(record)
        server.clear_log()
        moot.answer(**answer_options(server, corpus, tmp_path / "plain", prompt="detailed"))
        record = read_jsonl(tmp_path / "plain" / "answers.jsonl")[0]
        assert record["chunks"] == [] and "trace" not in record
        system = server.requests[0].body["messages"][0]["content"]
        assert "Offer your own informed opinion" in system  # the detailed prompt, Table 18


def test_failed_calls_are_retried_on_rerun_and_exit_1(corpus, tmp_path):
    from moot.testing import Fault

    out = tmp_path / "plain"
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        server.add_fault(Fault(kind="500", times=1, match=corpus["berds"][1]["question"]))
        with pytest.raises(moot.RunFailed) as first:
            moot.answer(**answer_options(server, corpus, out))
        assert type(first.value) is moot.RunFailed and first.value.result.exit_code == 1
        assert "rerun the same command" in stderr(first.value.result)
        statuses = [r["status"] for r in read_jsonl(out / "answers.jsonl")]
        assert statuses == ["ok", "error", "ok"]
        server.clear_log()
        moot.answer(**answer_options(server, corpus, out))
        records = read_jsonl(out / "answers.jsonl")
        assert len(records) == 3 and {r["status"] for r in records} == {"ok"}
        assert len(server.requests) == 1  # only the failed question was asked again


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mode": "rag"}, "--mode rag needs --index DIR"),
        ({"mode": "rag", "index": "IDX", "web": True}, "give --index DIR or --web"),
        ({"mode": "plain", "index": "IDX"}, "--mode plain retrieves nothing"),
        ({"mode": "rag", "index": "NOPE"}, "NOPE"),
        ({"mode": "rag", "index": "IDX", "retriever": "dense"}, "dense"),
        ({"mode": "rag", "index": "IDX", "mmr": 1.5}, "--mmr must be between 0 and 1"),
        ({"mode": "rag", "index": "IDX", "agent_model": "x/y"}, "--agent-model is for"),
    ],
)
def test_bad_options_exit_2_before_any_call(corpus, tmp_path, extra, message):
    extra = {k: corpus["index"] if v == "IDX" else v for k, v in extra.items()}
    with ScriptedServer() as server:
        with pytest.raises(moot.MootError) as refused:
            moot.answer(**answer_options(server, corpus, tmp_path / "out", **extra))
        assert message in refused_in_one_line(refused.value)
        assert server.requests == []


def test_questions_without_text_and_a_reused_folder_exit_2(corpus, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Is UBI good?"}\n{"id": "2", "question": "  "}\n')
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        with pytest.raises(moot.MootError) as refused:
            moot.answer(
                questions=bad, out=tmp_path / "o", model="openai/scripted", api_base=server.url
            )
        assert refused_in_one_line(refused.value) == f"{bad}, line 2: missing or empty 'question'"
        assert not (tmp_path / "o").exists()
        moot.answer(**answer_options(server, corpus, tmp_path / "p"))
        with pytest.raises(moot.MootError) as other:
            moot.answer(**answer_options(server, corpus, tmp_path / "p", prompt="detailed"))
        assert "use a new --out" in refused_in_one_line(other.value)


def test_curate_extracts_explains_and_drops_near_duplicate_povs(corpus, tmp_path):
    povs = (  # the reply format Table 9's p_POV asks for
        "Point-of-View 1: Universal basic income reduces poverty. [Document [1], [2]]\n"
        "Point-of-View 2: Universal basic income reduces poverty a lot. [Document 3]\n"
        "**Point-of-View 3:** Zoos protect endangered species. [Document [99]]\n"
    )
    long_explanation = " ".join(["reason"] * 320)
    rules = [
        Rule(pattern="Task: Generate Points-of-View", reply=povs),
        Rule(pattern="Task: Provide an Answer to a Question that Reflects", reply=long_explanation),
    ]
    out = tmp_path / "curated"
    with ScriptedServer(rules=rules) as server:
        moot.curate(**curate_options(server, corpus, out, corpus["docs"], documents=5))
        assert len(server.requests) == 3 * (1 + 3)
    partials = read_jsonl(out / "partial_answers.jsonl")
    assert len(partials) == 3
    for item in partials:
        assert [p["point_of_view"] for p in item["partial_answers"]] == [
            "Universal basic income reduces poverty.",
            "Zoos protect endangered species.",
        ]
        explanation = item["partial_answers"][0]["explanation"]
        assert len(explanation.split()) == 300
        assert len(item["partial_answers"][0]["documents"]) == 2
        assert len(item["partial_answers"][1]["documents"]) == 5  # no valid number: all five
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duplicates_removed"] == 3 and summary["cut_at_300_words"] == 9
    record = read_jsonl(out / "curation.jsonl")[0]
    duplicate = record["partial_answers"][1]
    assert duplicate["duplicate_of"] == "Universal basic income reduces poverty."
    assert duplicate["similarity"] > 0.75
    assert (out / "index" / "index.json").is_file()  # the corpus was indexed once, inside OUT


def test_curate_compares_raw_encoder_vectors_by_cosine(corpus, tmp_path):
    """`cls:` vectors are not unit length: a bare dot product (norm 4 each) made every POV after
    the first a duplicate."""
    encoder = tiny_bert(tmp_path / "bert", init=1.0)
    first, other = "voting should be compulsory", "compulsory voting raises turnout"
    vectors = Embedder(f"cls:{encoder}").encode([first, other])
    assert float(vectors[0] @ vectors[1]) > 0.75  # the bug's "similarity"
    cosine = float(unit_rows(vectors)[0] @ unit_rows(vectors)[1])
    assert cosine < 0.75
    # no full stops: "." is [UNK], on which the tiny encoder's [CLS] vector mostly depends
    povs = "".join(
        f"Point-of-View {i}: {p} [Document 1]\n" for i, p in enumerate([first, first, other], 1)
    )
    rules = [
        Rule(pattern="Task: Generate Points-of-View", reply=povs),
        Rule(pattern="Task: Provide an Answer to a Question that Reflects", reply="Because."),
    ]
    out = tmp_path / "curated"
    with ScriptedServer(rules=rules) as server:
        moot.call(
            "curate",
            **curate_options(server, corpus, out, corpus["index"], embedder=f"cls:{encoder}"),
        )
    record = read_jsonl(out / "curation.jsonl")[0]
    assert [p.get("similarity") for p in record["partial_answers"]] == [None, 1.0, None]
    kept = read_jsonl(out / "partial_answers.jsonl")[0]["partial_answers"]
    assert [p["point_of_view"] for p in kept] == [first, other]


def test_curate_records_an_unreadable_pov_list_and_exits_1(corpus, tmp_path):
    out = tmp_path / "curated"
    with (
        ScriptedServer(rules=[Rule(pattern=".", reply="I cannot list them.")]) as server,
        pytest.raises(moot.RunFailed) as failed,
    ):
        moot.curate(**curate_options(server, corpus, out, corpus["index"]))
    assert type(failed.value) is moot.RunFailed and failed.value.result.exit_code == 1
    assert "no readable POV list" in stderr(failed.value.result)
    records = read_jsonl(out / "curation.jsonl")
    assert all(r["failure"]["raw"] == "I cannot list them." for r in records)
    assert read_jsonl(out / "partial_answers.jsonl") == []


@pytest.mark.subprocess
def test_ctrl_c_is_one_line_and_exit_130(corpus, tmp_path):
    with ScriptedServer(latency=1.0) as server:
        process = popen_moot(
            "answer",
            *("--questions", corpus["questions"], "--out", tmp_path / "o", "--no-cache"),
            *("--model", "openai/scripted", "--api-base", server.url, "--concurrency", 1),
        )
        deadline = time.time() + 60
        while not server.requests and time.time() < deadline:  # logged once answered
            time.sleep(0.05)  # then the second of the three questions is under way
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.splitlines() == ["moot: interrupted; rerun the same command to resume"]
