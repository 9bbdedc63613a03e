"""`--dry-run`: the plan of a run, in process (`moot.<command>(dry_run=True)`), against what the
same run really does; the command line's own dry run (a fresh interpreter) in one test.

The plan's calls must equal the real run's ledger; its tokens must bound it as docs/cli.md says.
A dry run sends nothing to the scripted server, starts no embedded model, and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

import moot
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    moot_env,
    read_jsonl,
    run_fresh_moot,
    run_moot,
    stdout,
    write_topics,
)
from tests.cli.test_berds import berds_fixture, demo_answers, write_jsonl
from tests.cli.test_compare import questions as compare_questions
from tests.cli.test_debate import debate_options as shared_debate_options
from tests.cli.test_eval import responses_file
from tests.conftest import shared_data

TURN_TOKENS = 40  # small budgets keep the bounds tight
CONCLUSION_TOKENS = 60
GIVEN = {
    "topic": "Should zoos be banned?",
    "Affirmative": {"arguments": ["Cages harm animals.", "Zoos cost too much."]},
    "Negative": {"arguments": ["Zoos save species.", "Zoos teach children."]},
}


def plan_tables(stdout: str) -> tuple[dict[str, tuple[int, int, int]], dict[tuple, list]]:
    """The printed plan: items by unit (planned, done, to run); calls rows by (role, stage)."""
    items: dict[str, tuple[int, int, int]] = {}
    rows: dict[tuple, list] = {}
    section = None
    for line in stdout.splitlines():
        if line.startswith("items "):
            section = "items"
        elif line.startswith("role "):
            section = "rows"
        elif not line.strip():
            section = None
        elif section == "items":
            *unit, planned, done, to_run = line.split()
            items[" ".join(unit)] = (int(planned), int(done), int(to_run))
        elif section == "rows":
            role, stage, model, calls, inputs, outputs, cost = line.split()
            rows[(role, stage)] = [model, int(calls), int(inputs), int(outputs), cost]
    return items, rows


def assert_bounds(rows: dict[tuple, list], summary: Path) -> None:
    """The plan's calls equal the run's ledger per role and stage; its tokens bound them."""
    ledger = json.loads(summary.read_text())["ledger"]["by_role"]
    real_rows = {(r["role"], r["stage"]): r for r in ledger}
    assert set(real_rows) == set(rows)
    for key, (_, calls, inputs, outputs, _) in rows.items():
        found = real_rows[key]
        assert calls == found["calls"], key
        assert found["prompt_tokens"] <= inputs and found["completion_tokens"] <= outputs, key


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` by relative path, with its content's hash."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def debate_options(server: ScriptedServer, topics: Path, out: Path, cache: Path) -> dict:
    """`moot.debate`'s options of tests/cli/test_debate.py, with small budgets."""
    budgets = {"turn_tokens": TURN_TOKENS, "conclusion_tokens": CONCLUSION_TOKENS}
    return shared_debate_options(server, topics, out, **budgets, cache=cache)


def test_the_plan_calls_equal_a_real_runs_its_tokens_bound_them_and_a_rerun_skips(tmp_path):
    """One topic with given arguments, one without; a dry run, the real run, a dry rerun."""
    topics = tmp_path / "topics.jsonl"
    lines = [GIVEN, {"topic": "Is remote work better?"}]
    topics.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    with ScriptedServer(rules=[Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]) as s:
        options = debate_options(s, topics, out, cache)
        dry = moot.debate(**options, limit=5, dry_run=True)
        assert (len(s.requests), out.exists(), cache.exists()) == (0, False, False)
        assert "nothing was sent or written" in stdout(dry)
        moot.debate(**options, limit=5)
        before, sent = tree(out), len(s.requests)
        rerun = moot.debate(**options, dry_run=True)  # all 8, 5 done
        assert (tree(out), len(s.requests)) == (before, sent)

    items, rows = plan_tables(stdout(dry))
    assert items == {"argument lists": (1, 0, 1), "debates": (5, 0, 5)}
    ledger = json.loads((out / "manifest.json").read_text())["ledger"]["by_role"]
    real_rows = {(r["role"], r["stage"]): r for r in ledger}
    assert set(real_rows) == set(rows)
    turns_before = {"opening": 0, "critique": 1, "conclusion": 4}
    turns_before |= {("debater_a", "rebuttal"): 2, ("debater_b", "rebuttal"): 3}
    for key, (model, calls, inputs, outputs, cost) in rows.items():
        found = real_rows[key]
        assert (model, cost) == ("openai/scripted", "unpriced")
        assert calls == found["calls"], key
        assert found["completion_tokens"] <= outputs, key
        assert found["prompt_tokens"] <= inputs, key
        # the bound is the real prompts with every earlier turn at its full budget, and the
        # one generated argument's 300-character stand-in (about 60 tokens) in its debate's
        history = turns_before.get(key, turns_before.get(key[1], 0)) * TURN_TOKENS * calls
        assert inputs - history - 70 <= found["prompt_tokens"], key

    items, rows = plan_tables(stdout(rerun))
    assert items == {"argument lists": (2, 1, 1), "debates": (8, 5, 3)}
    assert rows[("debater_a", "arguments")][1] == 1
    assert sum(row[1] for row in rows.values()) == 1 + 3 * (2 * 2 + 1)


def test_bad_input_still_is_refused_and_writes_nothing(tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"not": "a list"}', encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(moot.InputError, match=f"^{re.escape(str(topics))}"):
        moot.debate(topics=topics, out=out, dry_run=True)
    assert not out.exists()
    theirs = tmp_path / "theirs"  # another command's folder is refused, as a real run does
    (theirs / ".moot").mkdir(parents=True)
    (theirs / ".moot" / "owner.json").write_text('{"command": "moot judge"}', encoding="utf-8")
    before = tree(theirs)
    write_topics(topics, ["A topic"])
    with pytest.raises(moot.ConfigError, match="belongs to `moot judge`"):
        moot.debate(topics=topics, out=theirs, dry_run=True)
    assert tree(theirs) == before


@pytest.mark.subprocess  # a fresh interpreter, with an xllamacpp that cannot be imported
def test_the_embedded_model_is_not_started_and_no_key_is_needed(tmp_path):
    # an xllamacpp that cannot be imported: starting the embedded model would fail (exit 2)
    (tmp_path / "shadow" / "xllamacpp").mkdir(parents=True)
    (tmp_path / "shadow" / "xllamacpp" / "__init__.py").write_text("raise ImportError('no')\n")
    env = moot_env(PYTHONPATH=str(tmp_path / "shadow"))
    topics = write_topics(tmp_path / "topics.json", ["A topic"])
    args = ["debate", "--topics", topics, "--dry-run"]
    result = run_fresh_moot(*args, "--out", tmp_path / "o", env=env)
    assert result.returncode == 0, result.stderr
    assert "local/smollm2: no key" in result.stdout and "demo model" not in result.stderr
    assert "in batches" not in result.stdout  # free: no cost line
    result = run_moot(*args, "--out", tmp_path / "p", "--model", "openai/gpt-4o-mini")
    assert result.returncode == 0, result.stderr
    assert "OPENAI_API_KEY (not set)" in result.stdout
    _, rows = plan_tables(result.stdout)
    assert all(float(row[4]) > 0 for row in rows.values())  # priced, never $0.00
    # and in batches, at the cost map's batch rates (7.5e-08 and 3e-07 per token)
    inputs = sum(row[2] for row in rows.values())
    outputs = sum(row[3] for row in rows.values())
    batched = inputs * 7.5e-08 + outputs * 3e-07
    assert f"${batched:.4f} in batches (--batch)" in result.stdout
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()


def test_eval_quality_plans_both_orders_of_each_pair(tmp_path):
    texts = [("affirmative", "Answer one."), ("negative", "Answer two, longer than one.")]
    responses = responses_file(tmp_path / "r.json", texts)
    baseline = responses_file(tmp_path / "b.json", [(s, t + " Base.") for s, t in texts])
    out = tmp_path / "out"
    with ScriptedServer(rules=[Rule(pattern="Assistant", reply="7 5")]) as server:
        options = {"responses": responses, "baseline": baseline, "out": out}
        options |= {"judge": "openai/judge", "api_base": server.url}
        dry = moot.eval.quality(**options, dry_run=True)
        assert (len(server.requests), out.exists()) == (0, False)
        moot.eval.quality(**options, max_retries=0)
        again = moot.eval.quality(**options, dry_run=True)
    items, rows = plan_tables(stdout(dry))
    assert items["judgments"] == (2, 0, 2)
    assert "cost unpriced (openai/judge)" in stdout(dry)
    assert "$" not in stdout(dry).split("\n\n")[-1]
    ledger = json.loads((out / "summary.json").read_text())["ledger"]["by_role"]
    assert len(ledger) == 1 and len(read_jsonl(out / "judgments.jsonl")) == 2
    _, calls, inputs, outputs, _ = rows[("quality_judge", "quality")]
    assert (calls, inputs) == (4, ledger[0]["prompt_tokens"])  # replies parsed: no repair call
    assert ledger[0]["completion_tokens"] <= outputs == 4 * 1024
    items, rows = plan_tables(stdout(again))
    assert items["judgments"] == (2, 2, 0) and not rows


def test_judge_plans_the_debatrix_graph_call_for_call(tmp_path):
    debates = tmp_path / "debates.jsonl"
    debates.write_text(
        shared_data("panelbench", "debateart.jsonl").read_text().splitlines()[0] + "\n"
    )
    out = tmp_path / "out"
    budgets = {"analysis_tokens": 100, "judgment_tokens": 120, "extraction_tokens": 40}
    with ScriptedServer() as server:  # schema-constrained replies always parse: no repair call
        options = {"debates": debates, "out": out, "judge": "openai/scripted"}
        options |= {"api_base": server.url, "constrained": True, "max_retries": 0, **budgets}
        dry = moot.judge(**options, dry_run=True)
        assert (len(server.requests), out.exists()) == (0, False)
        moot.judge(**options)
        again = moot.judge(**options, dry_run=True)
    # each call asks for its own budget: analyses, judgments, and every extraction's 40
    assert {r.body["max_tokens"] for r in server.requests} == {100, 120, 40}
    items, rows = plan_tables(stdout(dry))
    assert items["judgments"] == (1, 0, 1)
    assert_bounds(rows, out / "summary.json")
    assert items and plan_tables(stdout(again))[0]["judgments"] == (1, 1, 0)


def test_label_judges_plan_one_call_per_detection_and_per_answer(tmp_path):
    retrieved, perspectives, _ = berds_fixture(tmp_path)  # 3 questions, 2 perspectives each
    answers = [{**a, "question": f"Question {i}?"} for i, a in enumerate(demo_answers(3))]
    answers = write_jsonl(tmp_path / "answers.jsonl", answers)
    out = tmp_path / "berds"
    with ScriptedServer(rules=[Rule(pattern="Statement:", reply="No")]) as server:
        judge = {"api_base": server.url, "max_retries": 0}
        options = {"retrieved": retrieved, "perspectives": perspectives, "k": 2, "out": out}
        options |= {"detector": "openai/judge", **judge}
        dry = moot.eval.berds(**options, dry_run=True)
        assert (len(server.requests), out.exists()) == (0, False)
        moot.eval.berds(**options)
        da = moot.eval.da(
            answers=answers, out=tmp_path / "da", judge="openai/judge", **judge, dry_run=True
        )
        assert len(server.requests) == 3 * 2 * 2
    items, rows = plan_tables(stdout(dry))
    assert items["detections"] == (3 * 2 * 2, 0, 12)
    (ledger,) = json.loads((out / "summary.json").read_text())["ledger"]["by_role"]
    _, calls, inputs, outputs, _ = rows[("perspective_detector", "perspective_detection")]
    assert (calls, inputs) == (12, ledger["prompt_tokens"])  # every reply parsed: no repair
    assert ledger["completion_tokens"] <= outputs
    items, rows = plan_tables(stdout(da))
    assert items["judgments"] == (3, 0, 3) and rows[("da_judge", "dispute_awareness")][1] == 3
    assert not (tmp_path / "da").exists()


def test_generate_plans_each_instruction_and_skips_the_answered(tmp_path):
    topics = tmp_path / "test_arg.jsonl"
    topics.write_text(json.dumps(GIVEN) + "\n", encoding="utf-8")
    out = tmp_path / "responses.json"
    with ScriptedServer() as server:
        options = {"dataset": topics, "out": out, "model": "openai/m"}
        options |= {"api_base": server.url, "max_tokens": 50}
        dry = moot.generate(**options, dry_run=True)
        assert len(server.requests) == 0
        assert list(tmp_path.iterdir()) == [topics]
        moot.generate(**options, limit=2)
        sent = len(server.requests)
        again = moot.generate(**options, dry_run=True)
        assert len(server.requests) == sent
    items, rows = plan_tables(stdout(dry))
    assert items["instructions"] == (4, 0, 4)
    assert rows[("generator", "generate")][1:4:2] == [4, 4 * 50]
    items, rows = plan_tables(stdout(again))
    assert items["instructions"] == (4, 2, 2) and rows[("generator", "generate")][1] == 2


def test_compare_plans_extraction_arguments_and_answers(tmp_path):
    path, out = compare_questions(tmp_path, 3), tmp_path / "out"
    options = {"questions": path, "out": out, "scenario": 2, "generate_arguments": True}
    options |= {"constrained": True, "model": "openai/scripted", "max_retries": 0}
    with ScriptedServer() as server:  # schema-shaped replies: every list parses
        dry = moot.compare(**options, api_base=server.url, dry_run=True)
        assert (len(server.requests), out.exists()) == (0, False)
        moot.compare(**options, api_base=server.url)
    items, rows = plan_tables(stdout(dry))
    assert items["questions"] == (3, 0, 3)
    assert_bounds(rows, out / "summary.json")


def test_compare_plans_free_text_questions_with_the_argument_files_longest_lists(tmp_path):
    questions = tmp_path / "questions.txt"
    questions.write_text("What is better: ASP or PHP?\nWhat is better: gas or charcoal?\n")
    arguments = write_jsonl(
        tmp_path / "arguments.jsonl",
        [
            {"object1": "ASP", "object2": "PHP", "arguments": {"ASP": ["Fast. " * 30], "PHP": []}},
            {
                "object1": "gas",
                "object2": "charcoal",
                "arguments": {"gas": ["Clean."], "charcoal": []},
            },
        ],
    )
    out = tmp_path / "out"
    extracted = '{"object1": "%s", "object2": "%s", "aspect": ""}'
    rules = [Rule("using following arguments", "ASP, by far.")]
    rules += [
        Rule(f"{a} or {b}", extracted % (a, b)) for a, b in (("ASP", "PHP"), ("gas", "charcoal"))
    ]
    options = {"questions": questions, "out": out, "scenario": 2, "arguments": arguments}
    options |= {"model": "openai/scripted", "max_retries": 0}
    with ScriptedServer(rules=rules) as server:
        dry = moot.compare(**options, api_base=server.url, dry_run=True)
        assert (len(server.requests), out.exists()) == (0, False)
        moot.compare(**options, api_base=server.url)
    items, rows = plan_tables(stdout(dry))
    assert items["questions"] == (2, 0, 2)
    assert_bounds(rows, out / "summary.json")  # each answer counted, at the longest lists
    assert "2 free-text questions' objects are still to extract" in stdout(dry)
    assert "a run would fail" not in stdout(dry)


def test_judge_plans_the_window_as_full_budget_replies_would_fill_it(tmp_path):
    debates = tmp_path / "debates.jsonl"
    debates.write_text(
        shared_data("panelbench", "debateart.jsonl").read_text().splitlines()[0] + "\n"
    )
    options = {"debates": debates, "out": tmp_path / "out", "judge": "openai/m"}
    plans = {
        framework: stdout(
            moot.judge(**options, framework=framework, context_window=6000, dry_run=True)
        )
        for framework in ("debatrix", "direct")
    }
    _, rows = plan_tables(plans["debatrix"])
    assert rows[("judge", "memory_summary")][1] > 0
    assert "memory summaries are counted for prompts over the judge's window" in plans["debatrix"]
    assert "1 judgments are left incomplete" in plans["direct"]  # the transcript does not fit
    assert not (tmp_path / "out").exists()
