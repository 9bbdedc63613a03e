"""`moot view` of the DebateQA, BERDS and CompQA-compare folders, in headless chromium.

Real runs made once per session: P.D. with a tiny random GPT-2, D.A., BERDS, the perspective
detector, curation (a tiny BERT embedder) and `moot compare`, against the scripted server, each
with a failure; the tests read the rendered DOM and compare it with the folders' files.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from moot.core.retrieval.index import build_index
from moot.prompts import fence
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.browser import items_tab, open_page
from tests.cli.helpers import moot_env, read_jsonl, run_moot
from tests.cli.test_berds import (
    DA_RULES,
    DETECTOR_REPLIES,
    berds_fixture,
    demo_answers,
    detector_subset,
    judge_args,
    write_jsonl,
)
from tests.conftest import built_once, shared_data
from tests.tiny import tiny_bert
from tests.tiny_gpt2 import tiny_gpt2

pytestmark = pytest.mark.subprocess

#: Points of view a tiny BERT tells apart (tests/cli/test_answer.py): no full stops
BAN = "voting should be compulsory"
#: Model text that would run script if the page drew it as markup.
HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
POVS = [
    {"POV": "Yes, it is possible.", "Explanation": "Some traditions see the self as divine."},
    {"POV": f"No. {HOSTILE}", "Explanation": "Most religions call self-worship idolatry."},
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Six run folders, each with what its view must show, and two pages of them."""
    return built_once(tmp_path_factory, "view-kinds", make_runs)


KINDS = ("pd", "da", "berds", "detector", "curate", "compare")


def make_runs(tmp: Path) -> dict:
    """The six runs, three at a time (each its own process, the P.D. and curation ones first:
    they load torch), then the pages."""
    env = moot_env(MOOT_CACHE_DIR=str(tmp / "cache"))
    found = {kind: tmp / kind for kind in KINDS}
    answers = demo_answers(4)  # P.D. and D.A. of the same four answers (side by side)
    for answer, question in zip(answers, ["Q-AWARE", "Q-UNAWARE", "Q-BAD", "Q-FAILS"], strict=True):
        answer["question"] = f"{question}: is it debated?"
    write_jsonl(tmp / "answers.jsonl", answers)
    # the tiny models first, in one thread: transformers' lazy imports are not thread-safe
    tiny_gpt2(tmp / "gpt2", n_positions=128, initializer_range=0.1)
    tiny_bert(tmp / "bert", init=1.0)
    jobs = (make_pd, make_curate, make_da, make_berds, make_detector, make_compare)
    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(job, tmp, env) for job in jobs]:
            result = done.result()
            assert result.returncode == 1, result.stderr  # each run has one failure

    found["pages"] = {"kinds": tmp / "kinds.html", "pair": tmp / "pair.html"}
    views = [
        run_moot("view", *(found[k] for k in KINDS), "--out", found["pages"]["kinds"], env=env),
        run_moot("view", found["pd"], found["da"], "--out", found["pages"]["pair"], env=env),
    ]
    for result in views:
        assert result.returncode == 0, result.stderr
    found["stdout"] = views[0].stdout
    return found


def make_pd(tmp: Path, env: dict):
    """P.D. of the four answers: the last one's partial answer overflows the window."""
    answers = read_jsonl(tmp / "answers.jsonl")
    too_long = [{"POV": "Long.", "Explanation": "word " * 80}]
    sets = [(a, POVS) for a in answers[:3]] + [(answers[3], too_long)]
    partials = write_jsonl(
        tmp / "partials.jsonl",
        [{"id": a["id"], "question": a["question"], "partial_answers": p} for a, p in sets],
    )
    return run_moot(
        "eval", "pd", "--answers", tmp / "answers.jsonl", "--partial-answers", partials,
        "--scorer", tmp / "gpt2", "--max-length", 64, "--out", tmp / "pd", "--quiet", env=env,
    )  # fmt: skip


def make_da(tmp: Path, env: dict):
    """D.A.: judged 1, 0, an unread reply, and a call that fails."""
    with ScriptedServer(rules=DA_RULES, faults=[Fault("500", match="Question: Q-FAILS")]) as server:
        return run_moot("eval", "da", "--answers", tmp / "answers.jsonl",
                        *judge_args(server, tmp / "da"), "--quiet", env=env)  # fmt: skip


def make_berds(tmp: Path, env: dict):
    """BERDS: q0 loses a detection to a server error, q1 is scored, q2 has an unread detection."""
    retrieved, perspectives, rules = berds_fixture(tmp)
    records = read_jsonl(retrieved)
    records[1]["chunks"][0]["title"] = HOSTILE  # a title is judged after its document's text
    write_jsonl(retrieved, records)
    first = json.loads(perspectives.read_text(encoding="utf-8").splitlines()[0])["perspectives"]
    fault = Fault("500", match=rf"IRRELEVANT text\. T\n.*Statement: {re.escape(first[0])}")
    with ScriptedServer(rules=rules, faults=[fault]) as server:
        return run_moot(
            "eval", "berds", "--retrieved", retrieved, "--perspectives", perspectives, "-k", 2,
            *judge_args(server, tmp / "berds", "--detector"), "--quiet", env=env,
        )  # fmt: skip


def make_detector(tmp: Path, env: dict):
    """The detector on 6 labelled pairs: pair 1 a false positive, 3 unread, 4 a failed call."""
    pairs, rows = detector_subset(tmp, 6)
    pair = [re.escape(f"Document: {fence(doc, 'document')}\nStatement: {persp}\n")
            for _, _, doc, persp, _ in rows]  # fmt: skip
    rules = [Rule("could not be read", "still unsure")] + [
        Rule(pattern, DETECTOR_REPLIES.get(row[1], "Yes" if row[4] == "1" else "No"))
        for pattern, row in zip(pair, rows, strict=True)
    ]
    with ScriptedServer(rules=rules, faults=[Fault("500", match=pair[3])]) as server:
        return run_moot("eval", "detector", "--pairs", pairs,
                        *judge_args(server, tmp / "detector", "--detector"), "--quiet",
                        env=env)  # fmt: skip


def make_curate(tmp: Path, env: dict):
    """Curation: q0 keeps 2 of 3 points of view (a duplicate), q1's reply lists none, q2 fails."""
    docs = write_jsonl(
        tmp / "docs.jsonl",
        [{"id": f"a{r['id']}", "text": r["generation"]} for r in demo_answers(40)],
    )
    build_index(docs, tmp / "index")
    berds = shared_data("berds", "dev_perspective_sets.jsonl").read_text().splitlines()[:3]
    (tmp / "questions.jsonl").write_text("\n".join(berds) + "\n")
    texts = [json.loads(line)["question"] for line in berds]
    povs = "".join(
        f"Point-of-View {i}: {p} [Document 1]\n"
        for i, p in enumerate([BAN, BAN, "compulsory voting raises turnout"], 1)
    )
    rules = [
        Rule(pattern=f"Task: Generate Points-of-View.*{re.escape(texts[0])}", reply=povs),
        Rule(pattern="Task: Generate Points-of-View", reply="I cannot list them."),
        Rule(pattern="Task: Provide an Answer to a Question that Reflects", reply="Because."),
    ]
    with ScriptedServer(rules=rules, faults=[Fault("500", match=re.escape(texts[2]))]) as server:
        return run_moot(
            "curate", "--questions", tmp / "questions.jsonl", "--docs", tmp / "index", "--out",
            tmp / "curate", "--model", "openai/scripted", "--api-base", server.url,
            "--embedder", f"cls:{tmp / 'bert'}", "--max-retries", 0,
            "--quiet", env=env,
        )  # fmt: skip


def make_compare(tmp: Path, env: dict):
    """`moot compare`, scenario 2: q0 has no arguments, q1 is answered from them, q2 fails."""
    compqa = shared_data("compqa", "derived_questions.jsonl").read_text().splitlines()[:3]
    (tmp / "compqa.jsonl").write_text("\n".join(compqa) + "\n")
    arguments = write_jsonl(
        tmp / "arguments.jsonl",
        [
            {"object1": "basketball", "object2": "volleyball", "aspect": "number of spectators",
             "arguments": {"basketball": ["The NBA is watched worldwide.", HOSTILE],
                           "volleyball": ["Beach volleyball fills stadiums."]}},
            {"object1": "ASP", "object2": "PHP", "aspect": "",
             "arguments": {"ASP": ["Typed."], "PHP": ["Everywhere."]}},
        ],
    )  # fmt: skip
    with ScriptedServer(rules=[Rule(".", "Basketball draws more.")],
                        faults=[Fault("500", match="ASP")]) as server:  # fmt: skip
        return run_moot(
            "compare", "--questions", tmp / "compqa.jsonl", "--out", tmp / "compare",
            "--scenario", 2, "--arguments", arguments, "--model", "openai/scripted",
            "--api-base", server.url, "--max-retries", 0, "--quiet", env=env,
        )  # fmt: skip


def items_of(runs: dict, browser, run: str):
    """The page of the six runs, on `run`'s items."""
    return items_tab(browser, runs["pages"]["kinds"], runs[run])


def rows_by_status(page) -> list[str]:
    return [row.get_attribute("data-status") for row in page.locator("tr.item-row").all()]


def detail_of(page, which: str | int):
    """The detail of the item whose row holds `which`, or of the `which`-th row."""
    rows = page.locator("tr.item-row")
    (rows.nth(which) if isinstance(which, int) else rows.filter(has_text=which).first).click()
    return page.locator("[data-role=detail]")


def no_markup_ran(page) -> None:
    assert page.evaluate("window.pwned") is None and page.locator("img").count() == 0
    assert page.errors == []


@pytest.mark.slow  # builds the six runs (P.D. and curation load torch): started first, once
def test_every_item_of_the_six_runs_is_on_the_page_failures_counted(runs):
    # P.D. 4 answers, D.A. 4, BERDS 3, detector 6, curate 3, compare 3: one failure in each
    assert runs["stdout"].strip().endswith("6 run(s), 23 items, 6 failed")


def test_pd_shows_each_answer_per_question_with_its_partial_answers(runs, browser):
    page = items_of(runs, browser, "pd")
    records = read_jsonl(runs["pd"] / "scores.jsonl")
    assert rows_by_status(page) == [r["status"] for r in records] == ["ok"] * 3 + ["error"]
    shown = page.locator("tr.item-row td.num").all_inner_texts()
    assert shown == [f"{r['pd']:.3f}" for r in records[:3]] + ["—"]  # the files' P.D.
    detail = detail_of(page, "Q-UNAWARE")
    table = detail.locator("[data-role=partials]")
    assert table.locator("tr").count() == 1 + len(POVS)
    record = records[1]
    for i, row in enumerate(table.locator("tr").all()[1:]):
        cells = row.locator("td").all_inner_texts()
        assert cells[1] == record["povs"][i] and cells[2] == f"{record['perplexities'][i]:.3f}"
    assert HOSTILE in detail.inner_text()  # a point of view with markup: shown as text
    failure = detail_of(page, "Q-FAILS").locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: ") and "does not fit the scorer's window" in failure
    no_markup_ran(page)


def test_da_shows_each_verdict_with_the_judges_replies(runs, browser):
    page = items_of(runs, browser, "da")
    assert rows_by_status(page) == ["ok", "ok", "unparsed", "error"]
    assert page.locator("tr.item-row td.num").all_inner_texts() == ["1", "0", "—", "—"]
    detail = detail_of(page, "Q-AWARE")
    assert detail.locator("[data-field=verdict]").inner_text() == "1: says it is debated"
    assert detail.locator(".turn").all_inner_texts() == ["judge reply 1\n1"]
    unread = detail_of(page, "Q-BAD")
    assert unread.locator("[data-role=error]").inner_text().startswith("unparsed: ")
    replies = unread.locator(".turn").all_inner_texts()
    assert replies == ["judge reply 1\nI cannot say.", "judge reply 2\nstill unsure"]
    failure = detail_of(page, "Q-FAILS").locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: openai/judge: HTTP 500"), failure


def test_berds_shows_each_querys_documents_labels_and_figures(runs, browser):
    page = items_of(runs, browser, "berds")
    scores = read_jsonl(runs["berds"] / "scores.jsonl")
    assert rows_by_status(page) == ["error", "ok", "unparsed"]
    judgments = {
        (j["question_id"], j["perspective_index"], j["rank"]): j
        for j in read_jsonl(runs["berds"] / "judgments.jsonl")
    }
    detail = detail_of(page, scores[1]["question"])
    assert detail.locator("[data-field='MRecall@2']").inner_text() == str(scores[1]["mrecall"])
    assert (
        detail.locator("[data-field='Precision@2']").inner_text() == f"{scores[1]['precision']:g}"
    )
    perspectives = detail.locator("[data-role=perspectives] tr td:nth-child(2)")
    assert perspectives.all_inner_texts() == scores[1]["perspectives"]
    rows = detail.locator("[data-role=detections] tr").all()[1:]
    assert len(rows) == 2  # k
    for rank, row in enumerate(rows):
        labels = [cell.get_attribute("data-label") for cell in row.locator("td[data-label]").all()]
        expected = [judgments[(scores[1]["id"], p, rank)]["judgment"]["label"] for p in (0, 1)]
        assert labels == [str(label) for label in expected]
        assert scores[1]["documents"][rank]["id"] in row.inner_text()
    assert HOSTILE in detail.inner_text()  # the document's title, shown as text
    failed = detail_of(page, scores[0]["question"])
    assert failed.locator("[data-role=error]").inner_text().startswith("FAILED: openai/judge")
    assert failed.locator("[data-label=failed]").count() == 1
    unread = detail_of(page, scores[2]["question"])
    assert unread.locator("[data-label=unread]").count() == 1 and "Hmm." in unread.inner_text()
    no_markup_ran(page)


def test_detector_verdicts_are_set_against_the_gold_labels(runs, browser):
    page = items_of(runs, browser, "detector")
    records = read_jsonl(runs["detector"] / "judgments.jsonl")
    assert [r["pair_id"] for r in records] == ["1", "2", "3", "4", "6", "7"]
    assert rows_by_status(page) == ["ok", "ok", "unparsed", "error", "ok", "ok"]
    labels = page.locator("tr.item-row td:nth-child(3)").all_inner_texts()
    assert labels == ["wrong", "right", "", "", "right", "right"]  # pair 1: a false positive
    wrong = records[0]
    assert (wrong["label"], wrong["judgment"]["label"]) == (0, 1)
    detail = detail_of(page, 0)
    assert detail.locator("[data-field=gold]").inner_text() == "0: does not support"
    assert detail.locator("[data-field=verdict]").inner_text() == "1: supports"
    text = detail.inner_text()
    assert wrong["document"][:60] in text and wrong["perspective"] in text
    failure = detail_of(page, 3).locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: openai/judge: HTTP 500")


def test_curation_shows_kept_and_dropped_questions_and_points_of_view(runs, browser):
    page = items_of(runs, browser, "curate")
    assert rows_by_status(page) == ["ok", "unparsed", "error"]
    labels = page.locator("tr.item-row td:nth-child(3)").all_inner_texts()
    assert labels == ["kept, 2 of 3 POVs", "dropped", ""]
    records = read_jsonl(runs["curate"] / "curation.jsonl")
    detail = detail_of(page, records[0]["question"])
    povs = detail.locator("[data-role=povs] tr").all()[1:]
    assert len(povs) == 3 and povs[0].locator("td").nth(2).inner_text() == "kept"
    assert povs[1].locator("td").nth(2).inner_text().startswith("dropped: duplicate of")
    dropped = detail_of(page, records[1]["question"])
    assert "no 'Point-of-View N: ...' line" in dropped.locator("[data-role=error]").inner_text()
    dropped.locator("summary", has_text="the reply that could not be read").click()
    assert "I cannot list them." in dropped.inner_text()
    failure = detail_of(page, records[2]["question"]).locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: openai/scripted: HTTP 500")


def test_compare_shows_each_pair_its_arguments_and_failures(runs, browser):
    page = items_of(runs, browser, "compare")
    titles = page.locator("tr.item-row td:nth-child(2)").all_inner_texts()
    assert [t.split("\n")[0] for t in titles] == [
        "baseball vs softball (most played sport)",
        "basketball vs volleyball (number of spectators)",
        "ASP vs PHP",
    ]
    assert rows_by_status(page) == ["no_arguments", "ok", "error"]
    detail = detail_of(page, "basketball")
    lists = detail.locator("[data-role=arguments]")
    assert lists.nth(0).locator("li").all_inner_texts() == [
        "The NBA is watched worldwide.",
        HOSTILE,
    ]
    assert "Basketball draws more." in detail.inner_text()
    warning = detail_of(page, "baseball").locator("[data-role=error]").inner_text()
    assert warning == "no_arguments: no arguments for this question"
    failure = detail_of(page, "ASP").locator("[data-role=error]").inner_text()
    assert failure.startswith("FAILED: openai/scripted: HTTP 500")
    no_markup_ran(page)


def test_pd_and_da_of_the_same_answers_side_by_side(runs, browser):
    page = open_page(browser, runs["pages"]["pair"])
    page.click("[data-tab='Side by side']")
    assert page.locator("[data-role=count]").inner_text() == "4 of 4 aligned items"
    row = page.locator("tr.item-row").nth(3)  # the answer neither could score
    assert row.locator(".status.failed").count() == 2
    page.locator("tr.item-row").first.click()
    columns = page.locator("[data-role=detail] > .detail")
    assert columns.nth(0).locator("[data-role=partials]").count() == 1
    assert "1: says it is debated" in columns.nth(1).inner_text()
