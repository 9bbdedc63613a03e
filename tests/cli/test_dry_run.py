"""`--dry-run`: the plan of a run, through the CLI, against what the same run really does.

The plan's calls must equal the real run's ledger; its tokens must bound it as docs/cli.md says.
A dry run sends nothing to the scripted server, starts no embedded model, and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    moot_env,
    read_jsonl,
    run_fresh_moot,
    run_moot,
    write_topics,
)
from tests.cli.test_berds import berds_fixture, demo_answers, write_jsonl
from tests.cli.test_berds import judge_args as berds_judge_args
from tests.cli.test_compare import compare
from tests.cli.test_compare import questions as compare_questions
from tests.cli.test_debate import debate_args as shared_debate_args
from tests.cli.test_eval import responses_file
from tests.conftest import shared_data

pytestmark = pytest.mark.subprocess

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


def debate_args(server: ScriptedServer, topics: Path, out: Path, cache: Path, *extra: object):
    budgets = ["--turn-tokens", TURN_TOKENS, "--conclusion-tokens", CONCLUSION_TOKENS]
    return shared_debate_args(server, topics, out, *budgets, "--cache", cache, *extra)


def test_the_plan_calls_equal_a_real_runs_its_tokens_bound_them_and_a_rerun_skips(tmp_path):
    """One topic with given arguments, one without; a dry run, the real run, a dry rerun."""
    topics = tmp_path / "topics.jsonl"
    lines = [GIVEN, {"topic": "Is remote work better?"}]
    topics.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    with ScriptedServer(rules=[Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]) as s:
        args = debate_args(s, topics, out, cache, "--limit", 5)
        dry = run_moot(*args, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert (len(s.requests), out.exists(), cache.exists()) == (0, False, False)
        assert "nothing was sent or written" in dry.stdout
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
        before, sent = tree(out), len(s.requests)
        rerun = run_moot(*debate_args(s, topics, out, cache, "--dry-run"))  # all 8, 5 done
        assert rerun.returncode == 0, rerun.stderr
        assert (tree(out), len(s.requests)) == (before, sent)

    items, rows = plan_tables(dry.stdout)
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

    items, rows = plan_tables(rerun.stdout)
    assert items == {"argument lists": (2, 1, 1), "debates": (8, 5, 3)}
    assert rows[("debater_a", "arguments")][1] == 1
    assert sum(row[1] for row in rows.values()) == 1 + 3 * (2 * 2 + 1)


def test_bad_input_still_exits_2_and_writes_nothing(tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text('{"not": "a list"}', encoding="utf-8")
    out = tmp_path / "out"
    result = run_moot("debate", "--topics", topics, "--out", out, "--dry-run")
    assert result.returncode == 2
    assert result.stderr.startswith("moot: error:") and "Traceback" not in result.stderr
    assert not out.exists()
    theirs = tmp_path / "theirs"  # another command's folder is refused, as a real run does
    (theirs / ".moot").mkdir(parents=True)
    (theirs / ".moot" / "owner.json").write_text('{"command": "moot judge"}', encoding="utf-8")
    before = tree(theirs)
    write_topics(topics, ["A topic"])
    result = run_moot("debate", "--topics", topics, "--out", theirs, "--dry-run")
    assert result.returncode == 2 and "belongs to `moot judge`" in result.stderr
    assert tree(theirs) == before


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
    result = run_moot(*args, "--out", tmp_path / "p", "--model", "openai/gpt-4o-mini")
    assert result.returncode == 0, result.stderr
    assert "OPENAI_API_KEY (not set)" in result.stdout
    _, rows = plan_tables(result.stdout)
    assert all(float(row[4]) > 0 for row in rows.values())  # priced, never $0.00
    assert not (tmp_path / "o").exists() and not (tmp_path / "p").exists()


def test_eval_quality_plans_both_orders_of_each_pair(tmp_path):
    texts = [("affirmative", "Answer one."), ("negative", "Answer two, longer than one.")]
    responses = responses_file(tmp_path / "r.json", texts)
    baseline = responses_file(tmp_path / "b.json", [(s, t + " Base.") for s, t in texts])
    out = tmp_path / "out"
    with ScriptedServer(rules=[Rule(pattern="Assistant", reply="7 5")]) as server:
        args = ["eval", "quality", "--responses", responses, "--baseline", baseline]
        args += ["--out", out, "--judge", "openai/judge", "--api-base", server.url]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
        real = run_moot(*args, "--max-retries", 0)
        assert real.returncode == 0, real.stderr
        again = run_moot(*args, "--dry-run")
    items, rows = plan_tables(dry.stdout)
    assert items["judgments"] == (2, 0, 2)
    assert "cost unpriced (openai/judge)" in dry.stdout and "$" not in dry.stdout.split("\n\n")[-1]
    ledger = json.loads((out / "summary.json").read_text())["ledger"]["by_role"]
    assert len(ledger) == 1 and len(read_jsonl(out / "judgments.jsonl")) == 2
    _, calls, inputs, outputs, _ = rows[("quality_judge", "quality")]
    assert (calls, inputs) == (4, ledger[0]["prompt_tokens"])  # replies parsed: no repair call
    assert ledger[0]["completion_tokens"] <= outputs == 4 * 1024
    items, rows = plan_tables(again.stdout)
    assert items["judgments"] == (2, 2, 0) and not rows


def test_judge_plans_the_debatrix_graph_call_for_call(tmp_path):
    debates = tmp_path / "debates.jsonl"
    debates.write_text(
        shared_data("panelbench", "debateart.jsonl").read_text().splitlines()[0] + "\n"
    )
    out = tmp_path / "out"
    budgets = {"--analysis-tokens": 100, "--judgment-tokens": 120, "--extraction-tokens": 40}
    with ScriptedServer() as server:  # schema-constrained replies always parse: no repair call
        args = ["judge", "--debates", debates, "--out", out, "--judge", "openai/scripted"]
        args += ["--api-base", server.url, "--constrained", "--max-retries", 0]
        args += [str(v) for pair in budgets.items() for v in pair]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
        again = run_moot(*args, "--dry-run")
    # each call asks for its own budget: analyses, judgments, and every extraction's 40
    assert {r.body["max_tokens"] for r in server.requests} == {100, 120, 40}
    items, rows = plan_tables(dry.stdout)
    assert items["judgments"] == (1, 0, 1)
    assert_bounds(rows, out / "summary.json")
    assert items and plan_tables(again.stdout)[0]["judgments"] == (1, 1, 0)


def test_label_judges_plan_one_call_per_detection_and_per_answer(tmp_path):
    retrieved, perspectives, _ = berds_fixture(tmp_path)  # 3 questions, 2 perspectives each
    answers = [{**a, "question": f"Question {i}?"} for i, a in enumerate(demo_answers(3))]
    answers = write_jsonl(tmp_path / "answers.jsonl", answers)
    out = tmp_path / "berds"
    with ScriptedServer(rules=[Rule(pattern="Statement:", reply="No")]) as server:
        args = ["eval", "berds", "--retrieved", retrieved, "--perspectives", perspectives]
        args += ["-k", 2, *berds_judge_args(server, out, "--detector")]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
        real = run_moot(*args)
        assert real.returncode == 0, real.stderr
        da = run_moot("eval", "da", "--answers", answers, "--dry-run", *berds_judge_args(
            server, tmp_path / "da"))  # fmt: skip
        assert (da.returncode, len(server.requests)) == (0, 3 * 2 * 2), da.stderr
    items, rows = plan_tables(dry.stdout)
    assert items["detections"] == (3 * 2 * 2, 0, 12)
    (ledger,) = json.loads((out / "summary.json").read_text())["ledger"]["by_role"]
    _, calls, inputs, outputs, _ = rows[("perspective_detector", "perspective_detection")]
    assert (calls, inputs) == (12, ledger["prompt_tokens"])  # every reply parsed: no repair
    assert ledger["completion_tokens"] <= outputs
    items, rows = plan_tables(da.stdout)
    assert items["judgments"] == (3, 0, 3) and rows[("da_judge", "dispute_awareness")][1] == 3
    assert not (tmp_path / "da").exists()


def test_generate_plans_each_instruction_and_skips_the_answered(tmp_path):
    topics = tmp_path / "test_arg.jsonl"
    topics.write_text(json.dumps(GIVEN) + "\n", encoding="utf-8")
    out = tmp_path / "responses.json"
    with ScriptedServer() as server:
        args = ["generate", "--dataset", topics, "--out", out, "--model", "openai/m"]
        args += ["--api-base", server.url, "--max-tokens", 50]
        dry = run_moot(*args, "--dry-run")
        assert (dry.returncode, len(server.requests)) == (0, 0), dry.stderr
        assert list(tmp_path.iterdir()) == [topics]
        real = run_moot(*args, "--limit", 2)
        assert real.returncode == 0, real.stderr
        sent = len(server.requests)
        again = run_moot(*args, "--dry-run")
        assert len(server.requests) == sent
    items, rows = plan_tables(dry.stdout)
    assert items["instructions"] == (4, 0, 4)
    assert rows[("generator", "generate")][1:4:2] == [4, 4 * 50]
    items, rows = plan_tables(again.stdout)
    assert items["instructions"] == (4, 2, 2) and rows[("generator", "generate")][1] == 2


def test_compare_plans_extraction_arguments_and_answers(tmp_path):
    path, out = compare_questions(tmp_path, 3), tmp_path / "out"
    args = ["--questions", path, "--out", out, "--scenario", 2, "--generate-arguments"]
    with ScriptedServer() as server:  # schema-shaped replies: every list parses
        dry = compare(server, *args, "--dry-run", "--constrained")
        assert (dry.returncode, len(server.requests), out.exists()) == (0, 0, False), dry.stderr
        real = compare(server, *args, "--constrained")
        assert real.returncode == 0, real.stderr
    items, rows = plan_tables(dry.stdout)
    assert items["questions"] == (3, 0, 3)
    assert_bounds(rows, out / "summary.json")
