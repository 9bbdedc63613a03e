"""`--dry-run` of `moot answer`, `curate` and `retrieve --query-expansion`, against real runs.

As in test_dry_run.py: the dry run sends nothing and writes nothing; its calls equal the real
run's ledger (ReAct: they bound it, as the plan says) and its tokens bound the real ones. In
process (`moot.answer(..., dry_run=True)`, ...).
"""

from __future__ import annotations

import json

import pytest

import moot
from moot.core.llm.tokens import count_message_tokens
from moot.testing import Rule, ScriptedServer
from tests.cli import test_answer
from tests.cli.helpers import read_jsonl, refused_in_one_line, stdout
from tests.cli.test_answer import (
    FINAL,
    PAPER_REACT_RULES,
    REACT_RULES,
    answer_options,
    curate_options,
)
from tests.cli.test_dry_run import assert_bounds, plan_tables, tree
from tests.tiny import tiny_bert

MAX_TOKENS = 60  # small budgets keep the bounds tight


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """test_answer.py's: a BM25 index over 150 DebateQA answers, and 3 BERDS questions."""
    return test_answer.corpus.__wrapped__(tmp_path_factory)


def ledger_rows(summary):
    """The real run's ledger by (role, stage)."""
    ledger = json.loads(summary.read_text())["ledger"]["by_role"]
    return {(r["role"], r["stage"]): r for r in ledger}


def dry_then_real(server, corpus, out, **options):
    """A dry run (nothing sent, nothing written), then the real run; the plan as printed."""
    dry = stdout(moot.answer(**answer_options(server, corpus, out, **options), dry_run=True))
    assert (len(server.requests), out.exists()) == (0, False)
    assert "nothing was sent or written" in dry
    moot.answer(**answer_options(server, corpus, out, **options))
    return dry


def test_plain_and_rag_plan_one_call_per_question_and_a_rerun_plans_none(corpus, tmp_path):
    with ScriptedServer(rules=[Rule(pattern=".", reply="An answer.")]) as server:
        plain = dry_then_real(server, corpus, tmp_path / "plain", max_tokens=MAX_TOKENS)
        server.clear_log()
        rag_options = {"mode": "rag", "index": corpus["index"], "max_tokens": MAX_TOKENS}
        rag = dry_then_real(server, corpus, tmp_path / "rag", **rag_options)
        before, sent = tree(tmp_path / "rag"), len(server.requests)
        options = answer_options(server, corpus, tmp_path / "rag", **rag_options)
        again = stdout(moot.answer(**options, dry_run=True))
        assert len(server.requests) == sent
        with pytest.raises(moot.MootError) as other:
            moot.answer(**options, prompt="detailed", dry_run=True)
        assert "use a new --out" in refused_in_one_line(other.value)  # as a run refuses
        assert tree(tmp_path / "rag") == before  # the folder is byte for byte as it was
    items, rows = plan_tables(plain)
    assert items == {"questions": (3, 0, 3)}
    assert_bounds(rows, tmp_path / "plain" / "summary.json")
    real = ledger_rows(tmp_path / "plain" / "summary.json")[("answerer", "plain")]
    assert rows[("answerer", "plain")][2] == real["prompt_tokens"]  # the real prompts, exactly
    assert rows[("answerer", "plain")][3] == 3 * MAX_TOKENS
    items, rows = plan_tables(rag)
    assert items == {"questions": (3, 0, 3)}
    assert_bounds(rows, tmp_path / "rag" / "summary.json")
    # the stand-ins are the index's 10 longest chunks: about as long as any 10 of ~2000 chars
    real = ledger_rows(tmp_path / "rag" / "summary.json")[("answerer", "rag")]
    assert rows[("answerer", "rag")][2] <= 2 * real["prompt_tokens"]
    items, rows = plan_tables(again)
    assert items == {"questions": (3, 3, 0)} and not rows


def test_react_plans_its_bound_and_a_run_stays_within_it(corpus, tmp_path):
    """The paper's ReAct: an agent that searches to the end meets the bound; one that answers
    at once stays under it."""
    react = {"mode": "react", "index": corpus["index"], "max_tokens": MAX_TOKENS}
    react["agent_model"] = "openai/agent"
    full = tmp_path / "full"
    with ScriptedServer(rules=PAPER_REACT_RULES) as server:
        dry = dry_then_real(server, corpus, full, **react, agent_api_base=server.url)
    items, rows = plan_tables(dry)
    assert items == {"questions": (3, 0, 3)}
    assert rows[("react_agent", "react:agent")][:2] == ["openai/agent", 9]
    assert rows[("answerer", "react")][:2] == ["openai/scripted", 3]
    assert_bounds(rows, full / "summary.json")  # every agent searched 3 times: the bound
    assert "estimate: at most 12 calls" in dry
    assert "counted at its most calls, 3 agent steps (--max-searches)" in dry

    early = tmp_path / "early"
    at_once = [Rule(pattern="## Question:", role="last", reply="Both sides.")]
    at_once.append(Rule(pattern="search 1 of 3", reply=f"Thought: enough.\nFinal Answer: {FINAL}"))
    with ScriptedServer(rules=at_once) as server:
        dry = dry_then_real(server, corpus, early, **react, agent_api_base=server.url)
    _, rows = plan_tables(dry)
    real = ledger_rows(early / "summary.json")
    assert real[("react_agent", "react:agent")]["calls"] == 3 < 9  # one step each
    for key, found in real.items():
        _, calls, inputs, outputs, _ = rows[key]
        assert found["calls"] <= calls and found["prompt_tokens"] <= inputs, key
        assert found["completion_tokens"] <= outputs, key


def test_react_single_plans_its_steps_and_the_final_call(corpus, tmp_path):
    out = tmp_path / "single"
    with ScriptedServer(rules=REACT_RULES) as server:
        single = {"mode": "react-single", "index": corpus["index"], "max_tokens": MAX_TOKENS}
        dry = dry_then_real(server, corpus, out, **single)
    _, rows = plan_tables(dry)
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
        options = curate_options(server, corpus, out, corpus["docs"], embedder=f"cls:{encoder}")
        options |= {"documents": 5, "max_tokens": 100}
        dry = stdout(moot.curate(**options, dry_run=True))
        assert (len(server.requests), out.exists()) == (0, False)
        moot.curate(**options)
        before = tree(out)
        # now from the index the run built in OUT
        again = stdout(moot.curate(**options, dry_run=True))
        assert (tree(out), len(server.requests)) == (before, 3 * 5)
    items, rows = plan_tables(dry)
    assert items == {"questions": (3, 0, 3)}
    assert rows[("curator", "curate:explain")][1] == 3 * 4  # 4 POVs a question, as scripted
    assert_bounds(rows, out / "summary.json")
    assert "counted at 4 POVs per question" in dry
    items, rows = plan_tables(again)
    assert items == {"questions": (3, 3, 0)} and not rows


def test_retrieve_plans_one_expansion_per_question_text(corpus, tmp_path):
    reply = '{"Benefit": "it helps", "Cost": "it costs"}'
    out = tmp_path / "retrieved.jsonl"
    with ScriptedServer(rules=[Rule(pattern="Generate diverse perspectives", reply=reply)]) as s:
        base = {"questions": corpus["questions"], "index": corpus["index"], "out": out}
        base |= {"model": "openai/scripted", "api_base": s.url}
        expanded = {**base, "query_expansion": True, "limit": 2}
        dry = stdout(moot.retrieve(**expanded, dry_run=True))
        assert len(s.requests) == 0
        assert list(tmp_path.iterdir()) == []
        moot.retrieve(**expanded)
        prompts = [count_message_tokens(r.body["messages"]) for r in s.requests]
        # no expansion: no model call, all 3 questions
        plain = stdout(moot.retrieve(**base, dry_run=True))
    items, rows = plan_tables(dry)
    assert items == {"expansions": (2, 0, 2)}
    _, calls, inputs, outputs, _ = rows[("query_expander", "query_expansion")]
    assert (calls, inputs, outputs) == (len(prompts), sum(prompts), 2 * 1024)
    assert len(read_jsonl(out)) == 2
    items, rows = plan_tables(plain)
    assert items == {"questions": (3, 0, 3)} and not rows


def test_bad_input_exits_2_writing_nothing(corpus, tmp_path):
    """Checked as a run checks them, though a plan never builds the retriever or the index."""
    with ScriptedServer() as server, pytest.raises(moot.MootError) as bad:
        options = answer_options(server, corpus, tmp_path / "a", mode="rag", index=corpus["index"])
        moot.answer(**options, mmr=1.5, dry_run=True)
    assert "--mmr must be between 0 and 1" in str(bad.value)
    words = tmp_path / "stopwords.jsonl"
    words.write_text('{"id": "s", "text": "the and of"}\n', encoding="utf-8")
    with pytest.raises(moot.MootError) as curate:
        moot.call(
            "curate", questions=corpus["questions"], docs=words, out=tmp_path / "c", dry_run=True
        )
    assert "no word to index" in refused_in_one_line(curate.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stopwords.jsonl"]


def test_models_check_plans_its_one_call(tmp_path):
    with ScriptedServer() as server:
        dry = stdout(moot.models.check("openai/scripted", api_base=server.url, dry_run=True))
        assert len(server.requests) == 0
        real = stdout(moot.models.check("openai/scripted", api_base=server.url))
    _, rows = plan_tables(dry)
    _, calls, inputs, outputs, _ = rows[("check", "check")]
    assert (calls, outputs) == (1, 32)
    assert f"{inputs} prompt + " in real  # the real request's prompt tokens, exactly
    assert "MOOT_API_KEY (not set), if the server wants a key" in dry


def test_web_react_searches_nothing_and_a_recipe_plans_eval_da_from_its_answers(
    corpus, tmp_path, monkeypatch
):
    """A dry run never searches the web nor reads its key (the plan names it); `moot run
    --dry-run` plans `eval da` from the answers its `answer` stage would write."""
    import yaml

    from tests.core.retrieval.test_websearch import KEY, SearchServer

    monkeypatch.setenv("MOOT_SEARCH_API_KEY", KEY)
    out = tmp_path / "out"
    with SearchServer() as search, ScriptedServer() as server:
        answer = {"questions": str(corpus["questions"]), "mode": "react", "web": True}
        answer |= {"search_api_base": search.url, "max_tokens": MAX_TOKENS}
        answer |= {"model": "openai/scripted", "api_base": server.url}
        alone = stdout(moot.answer(**answer, out=out / "answer", dry_run=True))
        stages = {"answer": {"command": "answer", **answer}}
        stages["da"] = {"command": "eval da", "answers": "{answer}/answers.jsonl"}
        stages["da"] |= {"judge": "openai/judge", "api_base": server.url}
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(yaml.safe_dump({"stages": stages}))
        plan = stdout(moot.run(recipe, out=out, dry_run=True))
        assert (search.requests, server.requests, out.exists()) == ([], [], False)
    assert "key: web:brave: MOOT_SEARCH_API_KEY (set)" in alone and KEY not in alone
    items, rows = plan_tables(plan)
    assert items == {"answer: questions": (3, 0, 3), "da: judgments": (3, 0, 3)}
    assert rows[("answer/react_agent", "react:agent")][1] == 9
    assert rows[("answer/answerer", "react")][1] == 3
    assert rows[("da/da_judge", "dispute_awareness")][1:4:2] == [3, 3 * 32]
