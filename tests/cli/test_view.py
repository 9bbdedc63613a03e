"""`moot view` end to end: real runs against the scripted server, the page in headless chromium."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from moot.core.data.compqa import MAXIMA
from moot.core.retrieval.index import build_index
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.browser import items_tab, open_page
from tests.cli.helpers import moot_env, run_moot
from tests.conftest import built_once, shared_data

pytestmark = pytest.mark.subprocess

SECRET = "sk-view-test-0123456789abcdef"
#: A model reply that would run script and load an image if the page drew it as markup.
HOSTILE = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    f"<!-- </script> key {SECRET}"
)
TOPICS = ["Should zoos be banned?", "Is remote work better than office work?"]


def debate(server: ScriptedServer, topics: Path, out: Path, env: dict, *extra: object):
    return run_moot(
        "debate", "--topics", topics, "--out", out, "--model", "openai/scripted",
        "--api-base", server.url, "--arguments-per-stance", 1, "--max-retries", 0,
        "--quiet", *extra, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two debate runs (one with failures and hostile replies), a judge, evaluations, pages."""
    return built_once(tmp_path_factory, "view", make_runs)


def make_runs(tmp: Path) -> dict:
    env = moot_env(MOOT_CACHE_DIR=str(tmp / "cache"))
    # arguments given, so both runs debate the same ones; the base run has two pages of debates
    given = {side: {"arguments": [f"{side} holds."]} for side in ("Affirmative", "Negative")}
    topics, more = tmp / "topics.json", tmp / "more.json"
    topics.write_text(json.dumps([{"topic": t, **given} for t in TOPICS]), encoding="utf-8")
    many = [*TOPICS, *(f"Topic {i}" for i in range(24))]
    more.write_text(json.dumps([{"topic": t, **given} for t in many]), encoding="utf-8")
    found = {}
    with ScriptedServer(rules=[Rule(pattern="remote work", reply=HOSTILE)]) as server:
        server.add_fault(Fault(kind="500", times=2, match="watching a debate.*zoos"))
        found["base"] = tmp / "base"
        assert debate(server, more, found["base"], env).returncode == 1  # 2 debates failed
        found["tuned"] = tmp / "tuned"
        result = debate(server, topics, found["tuned"], env, "--temperature", 0.2)
        assert result.returncode == 0, result.stderr

    lines = shared_data("panelbench", "debateart.jsonl").read_text(encoding="utf-8")
    found["debates"] = tmp / "debates.jsonl"
    found["debates"].write_text(lines.splitlines()[0] + "\n", encoding="utf-8")
    score = Rule(r'"score": <an integer from 1 to 10>', '{"comment": "solid", "score": 6}')
    with ScriptedServer(rules=[score]) as server:
        found["judge"] = tmp / "judge"
        result = run_moot(
            "judge", "--debates", found["debates"], "--out", found["judge"], "--judge",
            "openai/scripted", "--api-base", server.url, "--max-retries", 0, "--quiet", env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    responses = [
        {"topic": "Topic", "side": side, "argument": f"arg {i}", "instruction": "Argue",
         "raw_output": "", "response": text}
        for i, (side, text) in enumerate(
            [("affirmative", "FULL"), ("negative", "HALF"), ("affirmative", "MOST")]
        )
    ]  # fmt: skip
    (tmp / "responses.json").write_text(json.dumps(responses), encoding="utf-8")
    control = [
        Rule(pattern="FULL", reply="100 0"),
        Rule(pattern="HALF", reply="50 50"),
        Rule(pattern="MOST", reply="80 20"),
    ]
    with ScriptedServer(rules=control) as server:
        found["control"] = tmp / "control"
        result = run_moot(
            "eval", "controllability", "--responses", tmp / "responses.json", "--out",
            found["control"], "--judge", "openai/judge", "--api-base", server.url, "--quiet",
            env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    base = [{**r, "response": f"BASE {r['response']}"} for r in responses]
    (tmp / "baseline.json").write_text(json.dumps(base), encoding="utf-8")
    answer = r"Assistant 1's Answer\]\n<<<answer \w+>>>\n"
    pairwise = [Rule(pattern=answer + "BASE", reply="5 9"), Rule(pattern=answer, reply="9 5")]
    with ScriptedServer(rules=pairwise) as server:  # ours wins in both orders
        found["quality"] = tmp / "quality"
        result = run_moot(
            "eval", "quality", "--responses", tmp / "responses.json", "--baseline",
            tmp / "baseline.json", "--out", found["quality"], "--judge", "openai/judge",
            "--api-base", server.url, "--quiet", env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    generations = shared_data("debateqa", "demo_answers.jsonl").read_text().splitlines()[:40]
    docs = tmp / "docs.jsonl"  # a BM25 index over 40 DebateQA answers, 2 BERDS questions
    docs.write_text(
        "".join(json.dumps({"id": f"a{i}", "text": json.loads(g)["generation"]}) + "\n"
        for i, g in enumerate(generations))
    )  # fmt: skip
    build_index(docs, tmp / "index")
    berds = shared_data("berds", "dev_perspective_sets.jsonl").read_text().splitlines()[:2]
    (tmp / "questions.jsonl").write_text("\n".join(berds) + "\n")
    react = [
        Rule(pattern="no searches left", role="last", reply="Thought: done.\nFinal Answer: ANS"),
        Rule(pattern="search 1 of 2", role="last", reply="Thought: other side?\nSearch: costs"),
        Rule(pattern="search 2 of 2", role="last", reply="Thought: enough.\nSearch: more"),
    ]
    with ScriptedServer(rules=react) as server:
        found["answer"] = tmp / "answer"
        result = run_moot(
            "answer", "--questions", tmp / "questions.jsonl", "--out", found["answer"],
            "--mode", "react-single", "--index", tmp / "index", "--max-searches", 2, "--model",
            "openai/scripted", "--api-base", server.url, "--quiet", env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    source = shared_data("compqa", "raw_summaries", "gpt4_scenario_1.json")
    answers = tmp / "gpt4_scenario_1.json"
    answers.write_text(json.dumps(json.loads(source.read_text())[:2]), encoding="utf-8")
    scores = json.dumps({str(n): MAXIMA[n] for n in MAXIMA})
    # the first answer is judged, the second gets prose twice: an invalid judgment
    with ScriptedServer(rules=[Rule(pattern="Comparative answer", reply=scores)]) as server:
        server.add_fault(Fault(kind="500", times=1, match="Comparative answer"))
        found["compqa"] = tmp / "compqa"
        result = run_moot(
            "eval", "compqa", "--answers", answers, "--out", found["compqa"], "--judge",
            "openai/judge", "--api-base", server.url, "--max-retries", 0, "--quiet", env=env,
        )  # fmt: skip
    assert result.returncode == 1  # one judge call failed for good: a failure, shown as one

    secret_env = moot_env(MOOT_CACHE_DIR=str(tmp / "cache"), OPENAI_API_KEY=SECRET)
    views = {
        "base": run_moot("view", found["base"], env=secret_env),
        "pair": run_moot("view", found["base"], found["tuned"], "--out", tmp / "pair.html"),
        "kinds": run_moot(
            "view",
            found["judge"],
            found["control"],
            found["quality"],
            found["answer"],
            found["compqa"],
            "--debates",
            found["debates"],
            "--out",
            tmp / "kinds.html",
        ),  # fmt: skip
    }
    for name, result in views.items():
        assert result.returncode == 0, (name, result.stderr)
    found["pages"] = {
        "base": found["base"] / "view.html",
        "pair": tmp / "pair.html",
        "kinds": tmp / "kinds.html",
    }
    found["stdout"] = {name: result.stdout for name, result in views.items()}
    return found


def items_of(runs: dict, browser, run: str):
    """The page of the judge, controllability and CompQA runs, on `run`'s items."""
    return items_tab(browser, runs["pages"]["kinds"], runs[run])


def test_the_page_names_where_it_went_and_counts_failures(runs):
    assert (
        runs["stdout"]["base"].strip() == f"{runs['pages']['base']}: 1 run(s), 52 items, 2 failed"
    )


def test_no_secret_and_no_model_markup_reaches_the_file(runs):
    text = runs["pages"]["base"].read_text(encoding="utf-8")
    assert SECRET not in text and "[redacted]" in text
    data = text.split('id="moot-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and "window.pwned" in data  # the reply is there, as escaped JSON
    page = text.replace(data, "").replace("http://www.w3.org/2000/svg", "")  # SVG's namespace
    assert "://" not in page  # nothing to load: no CDN, no server


def test_debates_show_transcripts_and_failures_with_their_errors(runs, browser):
    page = open_page(browser, runs["pages"]["base"])
    rows = page.locator("tr.item-row")
    assert rows.count() == 50
    assert page.locator("tr.item-row[data-status=failed]").count() == 2
    assert (
        page.locator("tr.item-row[data-status=failed] .error")
        .first.inner_text()
        .startswith("openai/scripted: HTTP 500")
    )
    page.locator("tr.item-row[data-status=ok]").first.click()
    detail = page.locator("[data-role=detail]")
    assert detail.locator(".turn").count() == 4  # 2 rounds, A and B
    assert "Round 2 · B" in detail.inner_text() and "Conclusion" in detail.inner_text()
    page.locator("tr.item-row[data-status=failed]").first.click()
    assert "FAILED: openai/scripted: HTTP 500" in detail.locator("[data-role=error]").inner_text()
    page.screenshot(path=str(runs["base"] / "view.png"))
    assert (runs["base"] / "view.png").stat().st_size > 10_000
    assert page.errors == []


def test_model_markup_is_shown_as_text_and_runs_nothing(runs, browser):
    page = open_page(browser, runs["pages"]["base"])
    page.locator("tr.item-row", has_text="remote work").first.click()
    detail = page.locator("[data-role=detail]")
    assert "<script>window.pwned = 1</script><img src=x" in detail.inner_text()
    assert page.evaluate("window.pwned") is None
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0
    assert SECRET not in page.content() and "[redacted]" in detail.inner_text()


def test_filters_by_status_search_and_model(runs, browser):
    from playwright.sync_api import expect

    page = open_page(browser, runs["pages"]["base"])
    count = page.locator("[data-role=count]")
    page.select_option("[data-role=status]", "failed")
    assert count.inner_text() == "2 of 52 items"
    page.select_option("[data-role=status]", "")
    page.select_option("[data-role=topic]", TOPICS[0])
    assert count.inner_text() == "2 of 52 items"
    page.select_option("[data-role=topic]", "")
    page.fill("[data-role=search]", "REMOTE work")
    expect(count).to_have_text("2 of 52 items")
    assert page.locator("tr.item-row", has_text="zoos").count() == 0
    page.fill("[data-role=search]", "no such text anywhere")
    expect(count).to_have_text("0 of 52 items")
    page.fill("[data-role=search]", "")
    page.select_option("[data-role=model]", "openai/scripted")
    expect(count).to_have_text("52 of 52 items")


def test_items_come_a_page_at_a_time_and_filters_count_them_all(runs, browser):
    page = open_page(browser, runs["pages"]["base"])
    assert page.locator("[data-role=count]").inner_text() == "52 of 52 items"
    assert page.locator("tr.item-row").count() == 50
    assert page.locator("[data-role=page]").first.inner_text() == "page 1 of 2"
    page.locator("[data-role=next]").first.click()
    assert page.locator("tr.item-row").count() == 2
    page.select_option("[data-role=status]", "failed")  # a filter starts again at page 1
    assert page.locator("tr.item-row").count() == 2
    assert page.locator("[data-role=page]").first.inner_text() == "page 1 of 1"


def test_summary_shows_the_manifest_ledger_and_charts(runs, browser):
    page = open_page(browser, runs["pages"]["base"])
    page.click("[data-tab=Summary]")
    assert page.locator("[data-role=failed-count]").inner_text() == "2"
    ledger = page.locator("[data-role=ledger]")
    assert ledger.locator("tr").count() >= 4 and "debater_a" in ledger.inner_text()
    cost = ledger.locator("tr").last.locator("td, th").nth(7)  # role, stage, model, calls, ...
    assert cost.inner_text() == "unpriced"  # the scripted model has no price: never $0
    assert page.locator("[data-view=summary] svg rect").count() >= 3
    assert "debatune" in page.locator("[data-view=summary]").inner_text()  # the manifest


def test_two_runs_side_by_side_aligned_by_item(runs, browser):
    page = open_page(browser, runs["pages"]["pair"])
    page.click("[data-tab='Side by side']")
    assert page.locator("[data-role=count]").inner_text() == "52 of 52 aligned items"
    row = page.locator("tr.item-row", has_text="zoos").first
    assert row.locator(".status.failed").count() == 1 and row.locator(".status").count() == 2
    row.click()
    columns = page.locator("[data-role=detail] > .detail")
    assert columns.count() == 2
    assert "FAILED" in columns.nth(0).inner_text() and "FAILED" not in columns.nth(1).inner_text()
    assert columns.nth(1).locator(".turn").count() == 4
    only = page.locator("tr.item-row", has_text="Topic 3").first  # not in the tuned run
    assert only.locator(".status").count() == 1 and only.locator("td").nth(2).inner_text() == "—"
    only.click()
    assert "not in this run" in columns.nth(1).inner_text()


def test_a_debatrix_judgment_shows_analyses_per_dimension_and_the_gold_verdict(runs, browser):
    page = items_of(runs, browser, "judge")
    record = json.loads(runs["debates"].read_text().splitlines()[0])
    assert page.locator("tr.item-row").first.inner_text().count(record["motion"]) == 1
    page.locator("tr.item-row").first.click()
    detail = page.locator("[data-role=detail]")
    text = detail.inner_text()
    assert "panel winner" in text and "gold winner" in text
    gold = record["con"][0] if record["gold"]["final"] == 1 else record["pro"][0]
    assert f"gold winner\t{gold}" in text or f"gold winner\n{gold}" in text
    tables = detail.locator("[data-role=speeches]")
    assert tables.count() == 3  # argument, source, language
    assert tables.first.locator("tr").count() == 1 + len(record["speeches"])
    page.screenshot(path=str(runs["judge"].parent / "judge.png"), full_page=True)


def test_scores_filter_by_range(runs, browser):
    page = items_of(runs, browser, "control")
    count = page.locator("[data-role=count]")
    assert count.inner_text() == "3 of 3 items"
    page.fill("[data-role=min]", "60")
    assert count.inner_text() == "2 of 3 items"
    page.fill("[data-role=max]", "90")
    assert count.inner_text() == "1 of 3 items"
    page.locator("tr.item-row").first.click()
    assert "80 20" in page.locator("[data-role=detail]").inner_text()  # the judge's reply


def test_items_are_sampled_at_random_or_by_the_verdict_and_labelled_in_the_browser(runs, browser):
    page = items_of(runs, browser, "control")  # supports of 100, 50 and 80 %

    def sampled(how: str, seed: int, size: int) -> list[str]:
        page.select_option("[data-role=sample]", how)
        for role, value in (("seed", seed), ("size", size)):
            page.fill(f"[data-role={role}]", str(value))
            page.locator(f"[data-role={role}]").dispatch_event("change")
        return [row.get_attribute("data-id") for row in page.locator("tr.item-row").all()]

    ids = sampled("", 1, 3)
    assert sampled("random", 1, 2) == sampled("random", 1, 2) and len(sampled("random", 1, 2)) == 2
    assert {tuple(sampled("random", seed, 3)) for seed in range(1, 6)} != {tuple(ids)}
    # one judged item of each verdict before a second of any: three verdicts, three items
    assert sorted(sampled("stratified", 3, 3)) == sorted(ids)
    assert sampled("", 1, 3) == ids
    page.fill("[data-role=labeller]", "cy")
    page.locator("[data-role=labeller]").dispatch_event("change")
    page.locator("tr.item-row").first.click()
    panel = page.locator("[data-role=labels]")
    assert panel.locator("tr[data-field=support] [data-role=judge]").inner_text() in (
        "100", "50", "80",
    )  # fmt: skip
    panel.locator("tr[data-field=support] [data-role=value]").fill("70")
    panel.locator("tr[data-field=support] button").click()
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    page.click(f"[data-tab='Items: {runs['control']}']")
    page.select_option("[data-role=sample]", "")
    page.locator(f"tr.item-row[data-id='{ids[0]}']").click()
    assert panel.locator("tr[data-field=support] [data-role=value]").input_value() == "70"
    assert page.locator("[data-role=labelled]", has_text="✓").count() == 1


def test_pairwise_verdicts_show_both_orders_with_the_judges_replies(runs, browser):
    page = items_of(runs, browser, "quality")
    assert page.locator("tr.item-row").count() == 3
    assert page.locator("tr.item-row", has_text="win").count() == 3
    page.locator("tr.item-row").first.click()
    text = page.locator("[data-role=detail]").inner_text()
    forward, reverse = text.split("Forward order")[1].split("Reverse order")
    assert "9 5" in forward and "5 9" in reverse and "win" in text


def test_an_answer_shows_its_react_trace_and_chunks_with_sources(runs, browser):
    page = items_of(runs, browser, "answer")
    assert page.locator("tr.item-row").count() == 2
    page.locator("tr.item-row").first.click()
    detail = page.locator("[data-role=detail]")
    text = detail.inner_text()
    assert "ANS" in text.split("Answer", 1)[1] and "ReAct trace" in text
    steps = [t.split("\n", 1)[0] for t in detail.locator(".turn .who").all_inner_texts()]
    assert steps[:4] == ["1. search", "2. step", "3. search", "4. step"]
    assert "Search: costs" in text
    chunks = text.split("Retrieved chunks (", 1)[1]
    assert int(chunks.split(")", 1)[0]) > 0 and " · a" in chunks  # each with its document id


def test_compqa_shows_criterion_scores_and_failures(runs, browser):
    page = items_of(runs, browser, "compqa")
    assert page.locator("tr.item-row").count() == 2
    page.locator("tr.item-row[data-status=ok]").click()
    detail = page.locator("[data-role=detail]")
    assert detail.locator("th", has_text="C15").count() == 1
    assert detail.locator("td.num").count() >= 15
    page.locator("tr.item-row[data-status=error]").click()
    failure = detail.locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: openai/judge: HTTP 500"), failure


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["view", "{tmp}/missing"], "folder not found"),
        (["view", "{tmp}/mine"], "not a run folder moot made"),
        (["view", "{base}", "{base}"], "--out FILE is needed for more than one RUN"),
        (["view", "{base}", "--out", "{tmp}"], "is a folder, expected a file"),
        (["view", "{base}", "--debates", "{tmp}/mine/notes.txt"], "notes.txt"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args, needle, runs, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not debates\n")
    filled = [a.format(tmp=tmp_path, base=runs["tuned"]) for a in args]
    result = run_moot(*filled)
    assert result.returncode == 2, result.stderr
    assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("*.html")) and not (runs["tuned"] / "view.html").exists()


def test_the_page_embeds_nothing_from_outside_its_folders_and_never_waits_on_a_fifo(runs, tmp_path):
    """Issue 29, item 15: a log that is a symlink out of the folder, a `moot run` manifest that
    names a folder outside it, a log that is a FIFO: each one line, exit 2, no page."""
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text(json.dumps({"id": "x", "topic": "FROM-ELSEWHERE", "status": "ok"}) + "\n")
    linked, fifo, loop = tmp_path / "linked", tmp_path / "fifo", tmp_path / "loop"
    for folder in (linked, fifo, tmp_path / "outside"):
        shutil.copytree(runs["tuned"], folder)
    (linked / "debates.jsonl").unlink()
    (linked / "debates.jsonl").symlink_to(elsewhere)
    (fifo / "debates.jsonl").unlink()
    os.mkfifo(fifo / "debates.jsonl")
    (loop / ".moot").mkdir(parents=True)
    (loop / ".moot" / "owner.json").write_text(json.dumps({"command": "moot run"}))
    (loop / "manifest.json").write_text(json.dumps({"kind": "moot-run", "order": ["../outside"]}))
    cases = [
        (linked, f"{linked / 'debates.jsonl'}: leads outside {linked}"),
        (fifo, f"{fifo / 'debates.jsonl'}: not a regular file"),
        (loop, f"{loop / '..' / 'outside'}: leads outside {loop}"),
    ]
    for folder, needle in cases:
        result = run_moot("view", folder, "--out", tmp_path / "page.html", timeout=60)
        assert result.returncode == 2, result.stderr
        assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "page.html").exists()


def test_a_large_run_lists_its_items_and_reads_an_opened_one_from_a_file_beside_the_page(
    tmp_path, browser
):
    """Issue 33, part 2: past 1,000 items the page holds what its list reads (~200 bytes an item,
    not the 2 KB records) and an opened item's record comes from ``view.data/`` beside it, hostile
    text still text, secrets still out; a smaller page written over it takes those files away."""
    from playwright.sync_api import expect

    run = tmp_path / "large"
    (run / ".moot").mkdir(parents=True)
    (run / ".moot" / "owner.json").write_text('{"command": "moot debate"}')

    def write(debates: int) -> None:
        turn = {"speaker": "A", "side": "Affirmative", "round": 0, "text": "long turn " * 200}
        records = [
            {"id": f"d{i:04d}", "topic": f"Motion {i}", "stance": "Affirmative", "status": "ok",
             "transcript": [{**turn, "text": HOSTILE}] if i == 1234 else [turn], "rounds": 1}
            for i in range(debates)
        ]  # fmt: skip
        lines = "".join(json.dumps(record) + "\n" for record in records)
        (run / "debates.jsonl").write_text(lines, encoding="utf-8")

    write(1500)
    result = run_moot("view", run, env=moot_env(OPENAI_API_KEY=SECRET))
    assert result.returncode == 0, result.stderr
    page_path, files = run / "view.html", list((run / "view.data").iterdir())
    assert page_path.stat().st_size < 200_000 and len(files) == 6  # 250 items a file
    assert not any(SECRET in path.read_text() for path in [page_path, *files])
    page = open_page(browser, page_path)
    count = page.locator("[data-role=count]")
    assert count.inner_text() == "1500 of 1500 items"
    page.fill("[data-role=search]", "motion 1234")
    expect(count).to_have_text("1 of 1500 items")
    page.locator("tr.item-row").first.click()
    detail = page.locator("[data-role=detail]")
    expect(detail.locator(".turn")).to_contain_text("<script>window.pwned = 1</script><img src=x")
    assert "[redacted]" in detail.inner_text() and page.evaluate("window.pwned") is None
    assert page.locator("main img").count() == 0 and page.errors == []
    page.click("[data-tab=Summary]")  # no score is listed: no histogram of scores
    assert "scores (" not in page.locator("main").inner_text()

    other = tmp_path / "other"  # side by side: the same debates, less the last 500
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("view.*"))
    lines = (other / "debates.jsonl").read_text().splitlines(keepends=True)
    (other / "debates.jsonl").write_text("".join(lines[:1000]))
    assert run_moot("view", run, other, "--out", tmp_path / "pair.html").returncode == 0
    page = open_page(browser, tmp_path / "pair.html")
    page.click("[data-tab='Side by side']")
    expect(page.locator("[data-role=count]")).to_have_text("1500 of 1500 aligned items")
    page.fill("[data-role=search]", "motion 1234")
    expect(page.locator("[data-role=count]")).to_have_text("1 of 1500 aligned items")
    page.locator("tr.item-row").first.click()
    columns = page.locator("[data-role=detail] > .detail")
    expect(columns.nth(0).locator(".turn")).to_contain_text("<script>window.pwned")
    assert "not in this run" in columns.nth(1).inner_text() and page.errors == []

    write(3)
    assert run_moot("view", run).returncode == 0
    assert not (run / "view.data").exists() and "long turn" in page_path.read_text()
