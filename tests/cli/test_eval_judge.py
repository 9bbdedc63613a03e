"""`moot eval judge`: the judges of examples/judges against the scripted server, in process.

Each test reads the requests the server received (the fenced judged text, both orders, each
juror's model) and the outputs (verdicts, consistency counts, agreement).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import krippendorff
import pytest

import moot
from moot.prompts import fence
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import read_jsonl, refused_in_one_line, run_moot, stdout
from tests.cli.test_dry_run import plan_tables

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "judges"
MALFORMED = Path(__file__).parent / "judge_specs"


def options(server: ScriptedServer, out: Path, example: str, **extra: object) -> dict[str, object]:
    """`moot.eval.judge`'s keywords for the judge of `example` and its items."""
    given = {"spec": EXAMPLES / f"{example}.yaml", "items": EXAMPLES / f"{example}.jsonl"}
    return given | {"out": out, "judge": "openai/judge", "api_base": server.url} | extra


def contents(request) -> str:
    return "\n".join(m["content"] for m in request.body["messages"])


def test_a_pointwise_judge_fences_the_answer_reads_and_repairs_replies_and_resumes(tmp_path):
    rules = [
        Rule(pattern="could not be read", reply='{"score": 2, "reason": "off topic"}'),
        Rule(pattern="boil", reply='My verdict: {"score": 9, "reason": "clear steps"}'),
        Rule(pattern="turtles", reply="Two out of ten, I would say."),
    ]
    out = tmp_path / "out"
    with ScriptedServer(rules=rules) as server:
        result = moot.eval.judge(**options(server, out, "helpfulness", max_retries=0))
        sent = list(server.requests)
        moot.eval.judge(**options(server, out, "helpfulness", max_retries=0))
        assert len(server.requests) == len(sent)  # a rerun costs nothing
    assert len(sent) == 2 + 1  # one repair round for the reply that held no JSON
    items = [json.loads(line) for line in (EXAMPLES / "helpfulness.jsonl").read_text().splitlines()]
    (first,) = (r.body["messages"] for r in sent if "boil" in contents(r))  # items in any order
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == (EXAMPLES / "helpfulness_system.j2").read_text().strip()
    assert fence(items[0]["answer"], "answer") in first[1]["content"]
    assert f"Question: {items[0]['question']}" in first[1]["content"]
    assert {r.body["max_tokens"] for r in sent} == {256}  # the spec's budget
    records = read_jsonl(out / "judgments.jsonl")
    assert [r["verdict"] for r in records] == [9, 2]
    assert records[1]["jurors"]["openai/judge"]["replies"][0] == "Two out of ten, I would say."
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["items"], summary["parse_failures"], summary["errors"]) == (2, 0, 0)
    assert summary["mean"] == 5.5
    low, high = summary["mean_ci95"]
    assert 2 <= low <= 5.5 <= high <= 9
    assert "| mean | 5.5000 |" in stdout(result)


def test_unread_replies_and_failed_calls_are_records_apart_and_a_rerun_retries_the_failure(
    tmp_path,
):
    items = tmp_path / "items.jsonl"
    lines = [
        {"question": "Q-READ", "answer": "fine"},
        {"question": "Q-UNREAD", "answer": "hmm"},
        {"question": "Q-FAILS", "answer": "boom"},
    ]
    items.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rules = [
        Rule(pattern="Q-READ", reply='{"score": 7, "reason": "ok"}'),
        Rule(pattern="Q-UNREAD", reply="no idea"),
        Rule(pattern="Q-FAILS", reply='{"score": 4, "reason": "late"}'),
    ]
    out = tmp_path / "out"
    given = {"items": items, "max_retries": 0}
    with ScriptedServer(rules=rules, faults=[Fault("500", times=1, match="Q-FAILS")]) as server:
        with pytest.raises(moot.RunFailed) as failed:
            moot.eval.judge(**options(server, out, "helpfulness", **given))
        assert failed.value.result.exit_code == 1
        records = {r["input"]["question"]: r for r in read_jsonl(out / "judgments.jsonl")}
        assert records["Q-FAILS"]["status"] == "error"
        unread = records["Q-UNREAD"]["jurors"]["openai/judge"]
        assert records["Q-UNREAD"]["verdict"] is None and unread["value"] is None  # never a 0
        assert unread["replies"] == ["no idea", "no idea"]  # the repair round, read neither time
        calls = len(server.requests)
        moot.eval.judge(**options(server, out, "helpfulness", **given))
        assert len(server.requests) == calls + 1  # only the failed item, again
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["parse_failures"], summary["errors"], summary["mean"]) == (1, 0, 5.5)


def test_a_pairwise_judge_sees_each_pair_in_both_orders_and_counts_position_swaps(tmp_path):
    first = r"Assistant 1:\n<<<answer_a \w+>>>\n"
    rules = [
        Rule(pattern=first + "Rayleigh", reply='{"score_1": 9, "score_2": 3, "reason": "a"}'),
        Rule(pattern=first + "Because", reply='{"score_1": 3, "score_2": 9, "reason": "b"}'),
        Rule(pattern=first + r"Yes\.\n", reply='{"score_1": 7, "score_2": 8, "reason": "c"}'),
        Rule(pattern=first + "Yes, 7", reply='{"score_1": 8, "score_2": 8, "reason": "d"}'),
    ]
    out = tmp_path / "out"
    with ScriptedServer(rules=rules) as server:
        moot.eval.judge(**options(server, out, "pairwise", max_retries=0))
    pairs = [json.loads(line) for line in (EXAMPLES / "pairwise.jsonl").read_text().splitlines()]
    shown = Counter()
    for request in server.requests:
        text = contents(request)
        (pair,) = (p for p in pairs if p["question"] in text)
        a_first = fence(pair["answer_a"], "answer_a") in text  # a in the first place...
        b_first = fence(pair["answer_b"], "answer_a") in text  # ...or b, in a's fence label
        assert a_first != b_first
        shown[(pair["question"], "a first" if a_first else "b first")] += 1
    assert shown == {(p["question"], order): 1 for p in pairs for order in ("a first", "b first")}
    records = read_jsonl(out / "judgments.jsonl")
    assert [r["verdict"] for r in records] == ["win", "loss"]  # loss, then a tie: a loss
    assert [r["jurors"]["openai/judge"]["inconsistent"] for r in records] == [False, True]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["wins"], summary["ties"], summary["losses"]) == (1, 0, 1)
    assert (summary["order_consistent"], summary["order_inconsistent"]) == (1, 1)
    assert summary["win_score"] == 1.0 and summary["order_inconsistency"] == 0.5


JURY_RULES = [
    Rule(pattern="Saturn", model="juror-c", reply='{"correct": true, "reason": "c"}'),
    Rule(pattern="Saturn", reply='{"correct": false, "reason": "Jupiter"}'),
    Rule(pattern="boils", model="juror-b", reply='{"correct": false, "reason": "b"}'),
    Rule(pattern="", reply='{"correct": true, "reason": "yes"}'),
]


def test_a_jury_asks_each_juror_takes_the_majority_and_reports_its_agreement(tmp_path):
    out = tmp_path / "out"
    with ScriptedServer(rules=JURY_RULES) as server:
        result = moot.eval.judge(**options(server, out, "jury", temperature=0.7))
    models = Counter(r.body["model"] for r in server.requests)
    assert models == {"juror-a": 3, "juror-b": 3, "juror-c": 3}
    assert {r.body["temperature"] for r in server.requests} == {0}  # the spec's, not the flag's
    records = read_jsonl(out / "judgments.jsonl")
    assert [r["verdict"] for r in records] == [True, False, True]
    assert records[1]["verdicts"] == {
        "openai/juror-a": False,
        "openai/juror-b": False,
        "openai/juror-c": True,
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdicts"] == {"False": 1, "True": 2} and summary["split"] == 0
    rows = {"a": [1, 0, 1], "b": [1, 0, 0], "c": [1, 1, 1]}

    def alpha(*data):
        return pytest.approx(krippendorff.alpha(list(data), level_of_measurement="nominal"))

    agreement = summary["agreement"]
    assert agreement["alpha"] == alpha(*rows.values())
    assert agreement["pairwise"]["openai/juror-a vs openai/juror-b"] == alpha(rows["a"], rows["b"])
    jury = [1, 0, 1]
    assert agreement["with_jury"] == {
        "openai/juror-a": 1.0,
        "openai/juror-b": alpha(rows["b"], jury),
        "openai/juror-c": alpha(rows["c"], jury),
    }
    assert "agreement.with_jury.openai/juror-a | 1.0000" in stdout(result)


def test_a_dry_run_plans_the_calls_a_real_run_makes(tmp_path):
    out = tmp_path / "out"
    reply = '{"score_1": 6, "score_2": 5, "reason": "r"}'
    with ScriptedServer(rules=[Rule(pattern="Assistant", reply=reply)]) as server:
        given = options(server, out, "pairwise", max_retries=0)
        dry = moot.eval.judge(**given, dry_run=True)
        assert (server.requests, out.exists()) == ([], False)
        moot.eval.judge(**given)
        again = moot.eval.judge(**given, dry_run=True)
    items, rows = plan_tables(stdout(dry))
    assert items["judgments"] == (2, 0, 2)
    (ledger,) = json.loads((out / "summary.json").read_text())["ledger"]["by_role"]
    _, calls, inputs, outputs, _ = rows[("judge", "pairwise")]
    assert (calls, inputs) == (ledger["calls"], ledger["prompt_tokens"]) == (4, inputs)
    assert ledger["completion_tokens"] <= outputs
    assert plan_tables(stdout(again))[0]["judgments"] == (2, 2, 0)


def test_an_edited_judge_is_a_new_run(tmp_path):
    judges = tmp_path / "judges"
    shutil.copytree(EXAMPLES, judges)
    out = tmp_path / "out"
    with ScriptedServer(rules=[Rule(pattern="", reply='{"score": 5, "reason": "r"}')]) as server:
        given = options(server, out, "helpfulness", spec=judges / "helpfulness.yaml")
        moot.eval.judge(**given)
        template = judges / "helpfulness.j2"
        template.write_text(template.read_text() + "Be strict.\n")
        with pytest.raises(moot.MootError) as refused:
            moot.eval.judge(**given)
    assert "use a new --out" in refused_in_one_line(refused.value)


@pytest.mark.parametrize("spec", sorted(MALFORMED.glob("*.yaml")), ids=lambda p: p.stem)
def test_a_malformed_spec_is_one_line_before_any_request(tmp_path, scripted_server, spec):
    expected = spec.read_text().splitlines()[0].removeprefix("# expect: ")
    out = tmp_path / "out"
    with pytest.raises(moot.ConfigError) as refused:
        moot.eval.judge(**options(scripted_server, out, "helpfulness", spec=spec))
    assert refused_in_one_line(refused.value) == expected.format(spec=spec)
    assert (scripted_server.requests, out.exists()) == ([], False)


def test_a_record_lacking_a_field_the_template_uses_is_refused_by_its_line(
    tmp_path, scripted_server
):
    items = tmp_path / "items.jsonl"
    items.write_text('{"question": "q", "answer": "a"}\n\n{"question": "q2"}\n')
    out = tmp_path / "out"
    with pytest.raises(moot.InputError) as refused:
        moot.eval.judge(**options(scripted_server, out, "helpfulness", items=items))
    spec = EXAMPLES / "helpfulness.yaml"
    assert refused_in_one_line(refused.value) == (
        f"{items}, line 3: no field 'answer', which {spec} uses"
    )
    assert (scripted_server.requests, out.exists()) == ([], False)


@pytest.mark.subprocess
def test_the_command_line_says_a_malformed_spec_in_one_line_and_exits_2(tmp_path):
    spec = MALFORMED / "bad_range.yaml"
    items = EXAMPLES / "helpfulness.jsonl"
    done = run_moot("eval", "judge", "--spec", spec, "--in", items, "--out", tmp_path / "o")
    assert done.returncode == 2
    assert done.stderr == f"moot: error: {spec}: fields.score: min 10 is above max 1\n"


def test_the_walk_through_shows_the_tested_example_files():
    doc = (ROOT / "docs" / "judges.md").read_text(encoding="utf-8")
    shown = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", doc, re.S)
    assert {name for name, _ in shown} == {
        str(p.relative_to(ROOT)) for p in EXAMPLES.iterdir() if p.is_file()
    }
    for name, text in shown:
        assert text == (ROOT / name).read_text(encoding="utf-8"), name


def test_moot_view_shows_each_items_verdict_jurors_and_both_orders(tmp_path, browser):
    from tests.cli.browser import items_tab

    jury, pair, page_path = tmp_path / "jury", tmp_path / "pair", tmp_path / "view.html"
    reply = '{"score_1": 6, "score_2": 5, "reason": "r"}'
    with ScriptedServer(rules=[*JURY_RULES[:-1], Rule(pattern="Assistant", reply=reply)]) as server:
        moot.eval.judge(**options(server, pair, "pairwise"))
        with ScriptedServer(rules=JURY_RULES) as jurors:
            moot.eval.judge(**options(jurors, jury, "jury"))
    moot.view(runs=[str(jury), str(pair)], out=page_path)
    page = items_tab(browser, page_path, str(jury))
    rows = page.locator("tr.item-row")
    assert [r.get_attribute("data-status") for r in rows.all()] == ["ok", "ok", "ok"]
    rows.filter(has_text="largest planet").first.click()
    detail = page.locator("[data-role=detail]").inner_text()
    assert "Juror openai/juror-c" in detail and "Jupiter" in detail
    page = items_tab(browser, page_path, str(pair))
    page.locator("tr.item-row").first.click()
    detail = page.locator("[data-role=detail]").inner_text()
    assert detail.index("a first") < detail.index("b first") and '"score_1": 6' in detail
    assert page.errors == []


def test_budget_stops_the_run_and_limit_judges_the_first_items(tmp_path):
    from tests.cli.test_budget_summaries import DONE, judge, stop_then_finish

    items = tmp_path / "items.jsonl"
    lines = [{"question": f"Q-{i} padded alike", "answer": f"A-{i} same length"} for i in range(4)]
    items.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rules = [Rule(pattern="Q-", reply='{"score": 6, "reason": "fine"}')]
    with ScriptedServer(rules=rules) as server:
        given = {"spec": EXAMPLES / "helpfulness.yaml", "items": items, **judge(server, tmp_path)}
        runs = stop_then_finish(server, tmp_path, "eval judge", given, items=4)
        limited = moot.eval.judge(**{**given, "out": tmp_path / "limited", "limit": 1})
    assert runs.stopped.exit_code == 3 and runs.resumed.exit_code == 0
    assert (runs.first["items"], runs.first["stopped"], runs.first["errors"]) == (DONE, 2, 0)
    assert (runs.second["items"], runs.second["stopped"], runs.second["mean"]) == (4, 0, 6)
    assert runs.requests == 4  # every item paid once
    assert limited.ok and len(read_jsonl(tmp_path / "limited" / "judgments.jsonl")) == 1


def test_a_juror_named_twice_is_refused(tmp_path, scripted_server):
    spec = tmp_path / "jury.yaml"
    spec.write_text(
        (EXAMPLES / "jury.yaml").read_text().replace("openai/juror-c", "judge"), encoding="utf-8"
    )
    shutil.copy(EXAMPLES / "jury.j2", tmp_path)
    given = options(scripted_server, tmp_path / "out", "jury", spec=spec, judge="openai/juror-a")
    with pytest.raises(moot.ConfigError) as refused:
        moot.eval.judge(**given)
    assert refused_in_one_line(refused.value) == (
        f"{spec}: models[2]: openai/juror-a is in the jury twice"
    )
    assert scripted_server.requests == []


def test_a_record_the_template_fails_on_is_refused_before_any_request(tmp_path, scripted_server):
    (tmp_path / "count.j2").write_text("{{ question }} in {{ words + 1 }} words")
    spec = tmp_path / "count.yaml"
    spec.write_text(
        "name: count\ntemplate: count.j2\ninputs: [question, words]\n"
        "fields:\n  score: {type: int, min: 1, max: 10}\n"
    )
    items = tmp_path / "items.jsonl"
    items.write_text('{"question": "q", "words": 3}\n{"question": "q", "words": "many"}\n')
    given = options(scripted_server, tmp_path / "out", "helpfulness", spec=spec, items=items)
    with pytest.raises(moot.InputError) as refused:
        moot.eval.judge(**given)
    assert refused_in_one_line(refused.value) == (
        f'{items}, line 2: {spec}\'s templates fail on it: can only concatenate str (not "int") '
        "to str"
    )
    assert scripted_server.requests == []


def test_a_spec_built_in_python_keeps_its_digest_when_it_leaves_reply_at_its_default(tmp_path):
    from moot.agents.judge_spec import JudgeSpec, compile_judge

    (tmp_path / "t.j2").write_text("Q {{ answer }}")
    tree = {"name": "ds", "template": "t.j2", "judged": ["answer"]}
    tree |= {"fields": {"score": {"type": "int", "min": 1, "max": 5}}}
    digests = [
        compile_judge(JudgeSpec.parse(tree | extra), tmp_path, "spec").digest
        for extra in ({}, {"reply": "json"}, {"reply": "number"})
    ]
    assert digests[:2] == ["7c906402f20a32e7"] * 2  # the digest before `reply` was a key
    assert digests[2] != digests[0]
