"""`--dry-run` of `moot answer`, `curate` and `retrieve --query-expansion`, against real runs.

As in test_dry_run.py: the dry run sends nothing and writes nothing; its calls equal the real
run's ledger (ReAct: they bound it, as the plan says) and its tokens bound the real ones.
"""

from __future__ import annotations

import json

import pytest

from moot.core.llm.tokens import count_message_tokens
from moot.testing import Rule, ScriptedServer
from tests.cli import test_answer
from tests.cli.helpers import read_jsonl, run_moot
from tests.cli.test_answer import FINAL, PAPER_REACT_RULES, REACT_RULES, answer
from tests.cli.test_dry_run import assert_bounds, plan_tables, tree
from tests.tiny import tiny_bert

pytestmark = pytest.mark.subprocess

MAX_TOKENS = 60  # small budgets keep the bounds tight


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """test_answer.py's: a BM25 index over 150 DebateQA answers, and 3 BERDS questions."""
    return test_answer.corpus.__wrapped__(tmp_path_factory)


def ledger_rows(summary):
    """The real run's ledger by (role, stage)."""
    ledger = json.loads(summary.read_text())["ledger"]["by_role"]
    return {(r["role"], r["stage"]): r for r in ledger}


def dry_then_real(server, corpus, out, *args):
    """A dry run (nothing sent, nothing written), then the real run; both outputs."""
    dry = answer(server, corpus, out, *args, "--dry-run")
    assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
    assert "nothing was sent or written" in dry.stdout
    real = answer(server, corpus, out, *args)
    assert real.returncode == 0, real.stderr
    return dry, real


def test_plain_and_rag_plan_one_call_per_question_and_a_rerun_plans_none(corpus, tmp_path):
    budget = ("--max-tokens", MAX_TOKENS)
    with ScriptedServer(rules=[Rule(pattern=".", reply="An answer.")]) as server:
        plain, _ = dry_then_real(server, corpus, tmp_path / "plain", *budget)
        server.clear_log()
        rag_args = ("--mode", "rag", "--index", corpus["index"], *budget)
        rag, _ = dry_then_real(server, corpus, tmp_path / "rag", *rag_args)
        before, sent = tree(tmp_path / "rag"), len(server.requests)
        again = answer(server, corpus, tmp_path / "rag", *rag_args, "--dry-run")
        assert (again.returncode, len(server.requests)) == (0, sent), again.stderr
        other = answer(server, corpus, tmp_path / "rag", *rag_args, "--prompt", "detailed",
                       "--dry-run")  # fmt: skip
        assert other.returncode == 2 and "use a new --out" in other.stderr  # as a run refuses
        assert "Traceback" not in other.stderr and len(other.stderr.splitlines()) == 1
        assert tree(tmp_path / "rag") == before  # the folder is byte for byte as it was
    items, rows = plan_tables(plain.stdout)
    assert items == {"questions": (3, 0, 3)}
    assert_bounds(rows, tmp_path / "plain" / "summary.json")
    real = ledger_rows(tmp_path / "plain" / "summary.json")[("answerer", "plain")]
    assert rows[("answerer", "plain")][2] == real["prompt_tokens"]  # the real prompts, exactly
    assert rows[("answerer", "plain")][3] == 3 * MAX_TOKENS
    items, rows = plan_tables(rag.stdout)
    assert items == {"questions": (3, 0, 3)}
    assert_bounds(rows, tmp_path / "rag" / "summary.json")
    # the stand-ins are the index's 10 longest chunks: about as long as any 10 of ~2000 chars
    real = ledger_rows(tmp_path / "rag" / "summary.json")[("answerer", "rag")]
    assert rows[("answerer", "rag")][2] <= 2 * real["prompt_tokens"]
    items, rows = plan_tables(again.stdout)
    assert items == {"questions": (3, 3, 0)} and not rows


def test_react_plans_its_bound_and_a_run_stays_within_it(corpus, tmp_path):
    """The paper's ReAct: an agent that searches to the end meets the bound; one that answers
    at once stays under it."""
    agent = ("--agent-model", "openai/agent")
    index = ("--index", corpus["index"], "--max-tokens", MAX_TOKENS)
    full = tmp_path / "full"
    with ScriptedServer(rules=PAPER_REACT_RULES) as server:
        args = ("--mode", "react", *index, *agent, "--agent-api-base", server.url)
        dry, _ = dry_then_real(server, corpus, full, *args)
    items, rows = plan_tables(dry.stdout)
    assert items == {"questions": (3, 0, 3)}
    assert rows[("react_agent", "react:agent")][:2] == ["openai/agent", 9]
    assert rows[("answerer", "react")][:2] == ["openai/scripted", 3]
    assert_bounds(rows, full / "summary.json")  # every agent searched 3 times: the bound
    assert "estimate: at most 12 calls" in dry.stdout
    assert "counted at its most calls, 3 agent steps (--max-searches)" in dry.stdout

    early = tmp_path / "early"
    at_once = [Rule(pattern="## Question:", role="last", reply="Both sides.")]
    at_once.append(Rule(pattern="search 1 of 3", reply=f"Thought: enough.\nFinal Answer: {FINAL}"))
    with ScriptedServer(rules=at_once) as server:
        args = ("--mode", "react", *index, *agent, "--agent-api-base", server.url)
        dry, _ = dry_then_real(server, corpus, early, *args)
    _, rows = plan_tables(dry.stdout)
    real = ledger_rows(early / "summary.json")
    assert real[("react_agent", "react:agent")]["calls"] == 3 < 9  # one step each
    for key, found in real.items():
        _, calls, inputs, outputs, _ = rows[key]
        assert found["calls"] <= calls and found["prompt_tokens"] <= inputs, key
        assert found["completion_tokens"] <= outputs, key


def test_react_single_plans_its_steps_and_the_final_call(corpus, tmp_path):
    out = tmp_path / "single"
    with ScriptedServer(rules=REACT_RULES) as server:
        args = ("--mode", "react-single", "--index", corpus["index"], "--max-tokens", MAX_TOKENS)
        dry, _ = dry_then_real(server, corpus, out, *args)
    _, rows = plan_tables(dry.stdout)
    assert rows[("answerer", "react")][1] == 9 and rows[("answerer", "react:final")][1] == 3
    assert_bounds(rows, out / "summary.json")  # the scripted agent searches past its last


def test_curate_plans_extraction_and_explanations_without_indexing_the_corpus(corpus, tmp_path):
    povs = "".join(f"Point-of-View {i}: Side {i} holds. [Document [{i}]]\n" for i in range(1, 5))
    rules = [
        Rule(pattern="Task: Generate Points-of-View", reply=povs),
        Rule(pattern="Task: Provide an Answer to a Question", reply="Because it does."),
    ]
    encoder = tiny_bert(tmp_path / "bert")  # a real run embeds the POVs: the tiny one is fast
    out = tmp_path / "curated"
    with ScriptedServer(rules=rules) as server:
        args = ["curate", "--questions", corpus["questions"], "--docs", corpus["docs"]]
        args += ["--out", out, "--model", "openai/scripted", "--api-base", server.url]
        args += ["--embedder", f"cls:{encoder}", "--documents", 5, "--max-tokens", 100]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
        before = tree(out)
        again = run_moot(*args, "--dry-run")  # now from the index the run built in OUT
        assert again.returncode == 0, again.stderr
        assert (tree(out), len(server.requests)) == (before, 3 * 5)
    items, rows = plan_tables(dry.stdout)
    assert items == {"questions": (3, 0, 3)}
    assert rows[("curator", "curate:explain")][1] == 3 * 4  # 4 POVs a question, as scripted
    assert_bounds(rows, out / "summary.json")
    assert "counted at 4 POVs per question" in dry.stdout
    items, rows = plan_tables(again.stdout)
    assert items == {"questions": (3, 3, 0)} and not rows


def test_retrieve_plans_one_expansion_per_question_text(corpus, tmp_path):
    reply = '{"perspectives": ["it helps", "it costs"]}'
    out = tmp_path / "retrieved.jsonl"
    with ScriptedServer(rules=[Rule(pattern="Generate diverse perspectives", reply=reply)]) as s:
        base = ["retrieve", "--questions", corpus["questions"], "--index", corpus["index"]]
        base += ["--out", out, "--model", "openai/scripted", "--api-base", s.url]
        args = [*base, "--query-expansion", "--limit", 2]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(s.requests)) == (0, 0), dry.stderr
        assert list(tmp_path.iterdir()) == []
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
        prompts = [count_message_tokens(r.body["messages"]) for r in s.requests]
        plain = run_moot(*base, "--dry-run")  # no expansion: no model call, all 3 questions
    items, rows = plan_tables(dry.stdout)
    assert items == {"expansions": (2, 0, 2)}
    _, calls, inputs, outputs, _ = rows[("query_expander", "query_expansion")]
    assert (calls, inputs, outputs) == (len(prompts), sum(prompts), 2 * 1024)
    assert len(read_jsonl(out)) == 2
    items, rows = plan_tables(plain.stdout)
    assert items == {"questions": (3, 0, 3)} and not rows


def test_bad_input_exits_2_writing_nothing(corpus, tmp_path):
    """Checked as a run checks them, though a plan never builds the retriever or the index."""
    with ScriptedServer() as server:
        bad = answer(server, corpus, tmp_path / "a", "--mode", "rag", "--index", corpus["index"],
                     "--mmr", "1.5", "--dry-run")  # fmt: skip
        assert bad.returncode == 2 and "--mmr must be between 0 and 1" in bad.stderr
    words = tmp_path / "stopwords.jsonl"
    words.write_text('{"id": "s", "text": "the and of"}\n', encoding="utf-8")
    curate = run_moot("curate", "--questions", corpus["questions"], "--docs", words,
                      "--out", tmp_path / "c", "--dry-run")  # fmt: skip
    assert curate.returncode == 2 and "no word to index" in curate.stderr
    assert "Traceback" not in curate.stderr and len(curate.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stopwords.jsonl"]


def test_models_check_plans_its_one_call(tmp_path):
    with ScriptedServer() as server:
        args = ["models", "check", "openai/scripted", "--api-base", server.url]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests)) == (0, 0), dry.stderr
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
    _, rows = plan_tables(dry.stdout)
    _, calls, inputs, outputs, _ = rows[("check", "check")]
    assert (calls, outputs) == (1, 32)
    assert f"{inputs} prompt + " in real.stdout  # the real request's prompt tokens, exactly
    assert "MOOT_API_KEY (not set), if the server wants a key" in dry.stdout
