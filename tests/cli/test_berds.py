"""`moot eval da|berds|detector` end to end against the scripted server, hand-computed results.

In process (`moot.eval.da(...)`, `moot.eval.berds(...)`, `moot.eval.detector(...)`).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

import moot
from moot.core.data.questions import load_questions
from moot.core.errors import InputError
from moot.graphs.berds_eval import join_perspectives, load_pairs, load_retrieved
from moot.prompts import fence
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import read_jsonl, refused_in_one_line, run_moot, stderr, stdout
from tests.conftest import shared_data
from tests.fenced import unfence


def judge_args(server: ScriptedServer, out: Path, flag: str = "--judge") -> list[object]:
    return ["--out", out, flag, "openai/judge", "--api-base", server.url, "--max-retries", 0]


def judge_options(server: ScriptedServer, out: Path, flag: str = "judge") -> dict[str, object]:
    """`judge_args` as keyword arguments."""
    return {"out": out, flag: "openai/judge", "api_base": server.url, "max_retries": 0}


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def demo_answers(n: int) -> list[dict]:
    lines = shared_data("debateqa", "demo_answers.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:n]]


DA_RULES = [
    Rule(pattern="could not be read", reply="still unsure"),
    Rule(pattern="Question: Q-AWARE", reply="1"),
    Rule(pattern="Question: Q-ALSO-AWARE", reply="**Response: 1**"),
    Rule(pattern="Question: Q-UNAWARE", reply="Output: 0"),
    Rule(pattern="Question: Q-BAD", reply="I cannot say."),
]


def test_dispute_awareness_counts_parse_failures_apart_and_resumes(tmp_path):
    answers = demo_answers(4)  # {generation, id}: no question text
    answers[0]["question"] = "Q-AWARE: is it debated?"  # its own question wins
    path = write_jsonl(tmp_path / "answers.jsonl", answers)
    names = ["Q-AWARE", "Q-ALSO-AWARE", "Q-UNAWARE", "Q-BAD"]
    questions = write_jsonl(
        tmp_path / "questions.jsonl",
        [
            {"id": a["id"], "question": f"{n} question?"}
            for a, n in zip(answers, names, strict=True)
        ][1:],
    )
    out = tmp_path / "out"
    with ScriptedServer(rules=DA_RULES) as server:
        options = {"answers": path, "questions": questions, **judge_options(server, out)}
        result = moot.eval.da(**options)
        assert len(server.requests) == 4 + 1  # one repair round for the unreadable reply
        prompts = [r.body["messages"][0]["content"] for r in server.requests]
        assert any(answers[1]["generation"][:200] in unfence(p) for p in prompts)
        server.clear_log()
        moot.eval.da(**options)
        assert server.requests == []  # a rerun costs nothing
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["answers"], summary["scored"], summary["parse_failures"]) == (4, 3, 1)
    assert summary["dispute_aware"] == 2 and summary["da"] == pytest.approx(2 / 3)
    records = read_jsonl(out / "judgments.jsonl")
    failed = [r for r in records if not r["judgment"]["ok"]]
    assert [r["answer_id"] for r in failed] == [str(answers[3]["id"])]
    assert failed[0]["judgment"]["label"] is None  # never a default label
    assert failed[0]["judgment"]["replies"] == ["I cannot say.", "still unsure"]
    assert "| da | 0.6667 |" in stdout(result)
    assert (out / "summary.md").read_text().startswith("# dispute_awareness")


def test_dispute_awareness_needs_question_text(tmp_path):
    path = write_jsonl(tmp_path / "answers.jsonl", demo_answers(2))
    with ScriptedServer() as server, pytest.raises(moot.MootError) as refused:
        moot.eval.da(answers=path, **judge_options(server, tmp_path / "out"))
    assert server.requests == []
    assert "pass --questions" in refused_in_one_line(refused.value)
    assert not (tmp_path / "out").exists()


def perspective_sets(n: int) -> tuple[Path, list[dict]]:
    path = shared_data("berds", "dev_perspective_sets.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    return path, [json.loads(line) for line in lines[:n]]


def detection_rule(document: str, perspective: str, reply: str) -> Rule:
    return Rule(
        pattern=rf"Document: <<<document \w+>>>\n{document}[^\n]*\n<<<end document \w+>>>\n"
        f"Statement: {re.escape(perspective)}\n",
        reply=reply,
    )


def berds_fixture(tmp_path: Path) -> tuple[Path, Path, list[Rule]]:
    perspectives, questions = perspective_sets(3)  # 3 arguana questions, 2 perspectives each
    chunks = {
        0: ["SUPPORTS-FIRST", "IRRELEVANT", "SUPPORTS-SECOND"],  # P1 only at rank 2
        1: ["SUPPORTS-SECOND", "SUPPORTS-FIRST"],
        2: ["GARBLED", "IRRELEVANT"],
    }
    retrieved = write_jsonl(
        tmp_path / "retrieved.jsonl",
        [
            {
                "id": f"{q['dataset']}/{q['id']}",
                "question": q["question"],
                "k": len(chunks[i]),
                "chunks": [
                    {"id": f"c{i}{r}", "doc_id": f"d{r}", "text": f"{t} text.", "title": "T"}
                    for r, t in enumerate(chunks[i])
                ],
            }
            for i, q in enumerate(questions)
        ],
    )
    rules = [Rule(pattern="could not be read", reply="still unsure")]
    for q in questions:
        first, second = q["perspectives"]
        rules += [
            detection_rule("SUPPORTS-FIRST", first, "Yes."),
            detection_rule("SUPPORTS-SECOND", second, "**Yes**"),
            detection_rule("GARBLED", first, "Hmm."),
            detection_rule("GARBLED", second, "Answer: No"),
        ]
    rules.append(Rule(pattern="Statement:", reply="No"))
    return retrieved, perspectives, rules


def test_berds_mrecall_and_precision_equal_hand_computed_values(tmp_path):
    retrieved, perspectives, rules = berds_fixture(tmp_path)
    out = tmp_path / "out"
    with ScriptedServer(rules=rules) as server:
        options = {"retrieved": retrieved, "perspectives": perspectives, "k": 2}
        options |= judge_options(server, out, "detector")
        moot.eval.berds(**options)
        assert len(server.requests) == 3 * 2 * 2 + 1  # top-2 × 2 perspectives, one repair
        users = [r.body["messages"][1]["content"] for r in server.requests]
        assert any("SUPPORTS-FIRST text. T\nStatement:" in unfence(u) for u in users)  # text, title
        server.clear_log()
        moot.eval.berds(**options)
        assert server.requests == []
    summary = json.loads((out / "summary.json").read_text())
    # q0: top-2 covers P0 only -> MRecall 0, Precision 1/2; q1: both -> 1, 1; q2: unparsed
    assert (summary["questions"], summary["scored"], summary["parse_failures"]) == (3, 2, 1)
    assert summary["mrecall"] == pytest.approx(0.5)
    assert summary["precision"] == pytest.approx(0.75)
    assert summary["k"] == 2 and summary["detection_parse_failures"] == 1
    scores = read_jsonl(out / "scores.jsonl")
    assert [s["mrecall"] for s in scores] == [0, 1, None]
    assert scores[0]["supported"] == [True, False] and scores[2]["supported"] == [None, False]
    assert scores[2]["parse_failure"] is True
    assert len(read_jsonl(out / "judgments.jsonl")) == 12


def test_berds_k_larger_than_the_retrieved_list_exits_2_with_one_line(tmp_path):
    retrieved, perspectives, _ = berds_fixture(tmp_path)
    out = tmp_path / "out"
    with ScriptedServer() as server, pytest.raises(moot.MootError) as refused:
        moot.eval.berds(
            retrieved=retrieved, perspectives=perspectives, k=3,
            **judge_options(server, out, "detector"),
        )  # fmt: skip
    assert server.requests == []
    assert f"{retrieved}, id arguana_generated/751: 2 documents retrieved, fewer than -k 3" in (
        refused_in_one_line(refused.value)
    )
    assert not out.exists()


def test_a_retrieved_question_without_perspectives_is_an_input_error(tmp_path):
    retrieved, perspectives, _ = berds_fixture(tmp_path)
    records = read_jsonl(retrieved)
    records[1]["id"] = "kialo/no-such-question"
    write_jsonl(retrieved, records)
    with pytest.raises(InputError, match="kialo/no-such-question: no perspectives in"):
        join_perspectives(load_retrieved(retrieved), retrieved, load_questions(perspectives),
                          perspectives, 2)  # fmt: skip
    write_jsonl(retrieved, [{"id": "x", "chunks": [{"id": "c", "text": " "}]}])
    with pytest.raises(InputError, match="line 1: chunk 0 has no text"):
        load_retrieved(retrieved)


@pytest.mark.subprocess  # argv: the flag argparse requires
def test_berds_k_is_required(tmp_path):
    retrieved, perspectives, _ = berds_fixture(tmp_path)
    result = run_moot("eval", "berds", "--retrieved", retrieved, "--perspectives", perspectives,
                      "--out", tmp_path / "out")  # fmt: skip
    assert result.returncode == 2 and "-k" in result.stderr


def detector_subset(tmp_path: Path, n: int = 20) -> tuple[Path, list[list[str]]]:
    source = shared_data("berds", "pers_det.test.tsv")
    with source.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))[: n + 1]
    path = tmp_path / "pairs.tsv"
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(rows)
    return path, rows[1:]


# replies by pair id: a false negative (18), a false positive (1), an unparsable reply (3)
DETECTOR_REPLIES = {"1": "Yes", "2": "Answer: No", "3": "Maybe", "18": "No.", "20": "**Yes**"}


def test_detector_accuracy_and_f1(tmp_path):
    pairs, rows = detector_subset(tmp_path)
    rules = [
        Rule(
            pattern=re.escape(f"Document: {fence(doc, 'document')}\nStatement: {persp}\n"),
            reply=DETECTOR_REPLIES.get(pid, "Yes" if label == "1" else "No"),
        )
        for _, pid, doc, persp, label in rows
    ]
    out = tmp_path / "out"
    _, pid, doc, persp, _ = rows[8]  # pair 10 (label 0) fails once with a server error
    fault = Fault(
        "500", times=1, match=re.escape(f"{fence(doc, 'document')}\nStatement: {persp}\n")
    )
    with ScriptedServer(rules=rules, faults=[fault]) as server:
        options = {"pairs": pairs, **judge_options(server, out, "detector")}
        with pytest.raises(moot.RunFailed) as failed:
            moot.eval.detector(**options)
        assert type(failed.value) is moot.RunFailed and failed.value.result.exit_code == 1
        assert "moot: 1 of 20 pairs failed; rerun" in stderr(failed.value.result)
        assert len(server.requests) == 20 + 1
        assert json.loads((out / "summary.json").read_text())["errors"] == 1
        server.clear_log()
        moot.eval.detector(**options)
        assert len(server.requests) == 1  # only the failed call is made again
    summary = json.loads((out / "summary.json").read_text())
    # 6 positives, 14 negatives; scored 19: tp 5, fn 1, fp 1, tn 12
    assert (summary["pairs"], summary["scored"], summary["parse_failures"]) == (20, 19, 1)
    assert (summary["tp"], summary["fn"], summary["fp"], summary["tn"]) == (5, 1, 1, 12)
    assert summary["accuracy"] == pytest.approx(17 / 19)
    assert summary["f1"] == pytest.approx(5 / 6)


def rewrite(path: Path, edit) -> None:
    with path.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    edit(rows)
    with path.open("w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\n").writerows(rows)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda rows: rows[2].pop(), "line 3: expected 5 tab-separated fields, got 4"),
        (lambda rows: rows[0].__setitem__(0, "query"), "line 1: expected the header"),
        (lambda rows: rows[4].__setitem__(2, " "), "line 5: empty document or perspective"),
    ],
)
def test_detector_bad_rows_name_the_line(tmp_path, edit, message):
    pairs, _ = detector_subset(tmp_path, 5)
    rewrite(pairs, edit)
    with pytest.raises(InputError, match=re.escape(f"{pairs}, {message}")):
        load_pairs(pairs)


def test_detector_bad_label_exits_2_with_one_line(tmp_path):
    pairs, _ = detector_subset(tmp_path, 5)
    rewrite(pairs, lambda rows: rows[3].__setitem__(4, "yes"))
    out = tmp_path / "out"
    with pytest.raises(moot.MootError) as refused:
        moot.eval.detector(
            pairs=pairs, detector="openai/x", api_base="http://127.0.0.1:9/v1", out=out
        )
    assert f"{pairs}, line 4: label must be 0 or 1, got 'yes'" in refused_in_one_line(refused.value)
    assert not out.exists()


def test_berds_reads_the_released_layout_without_conversion(tmp_path):
    """BERDS' eval input: the released question records with `ctxs` added (berds README)."""
    _, questions = perspective_sets(2)
    ranked = [["SUPPORTS-FIRST", "SUPPORTS-SECOND"], ["IRRELEVANT", "SUPPORTS-FIRST"]]
    records = [
        {
            **q,
            "ctxs": [
                {"id": str(10 * i + r), "title": "T", "text": f"{t} text.", "score": 9.5 - r}
                for r, t in enumerate(ranked[i])
            ],
        }
        for i, q in enumerate(questions)
    ]
    # the README's minimal record: perspectives and ctxs only, a title-less document
    records.append(
        {"perspectives": ["P-ALONE."], "ctxs": [{"text": "SUPPORTS-ALONE"}, {"text": "x"}]}
    )
    retrieved = write_jsonl(tmp_path / "berds_output.jsonl", records)
    rules = [detection_rule("SUPPORTS-ALONE", "P-ALONE.", "Yes")]
    for q in questions:
        first, second = q["perspectives"]
        rules += [
            detection_rule("SUPPORTS-FIRST", first, "Yes"),
            detection_rule("SUPPORTS-SECOND", second, "Yes"),
        ]
    rules.append(Rule(pattern="Statement:", reply="No"))
    out = tmp_path / "out"
    with ScriptedServer(rules=rules) as server:
        moot.eval.berds(retrieved=retrieved, k=2, **judge_options(server, out, "detector"))
        users = [r.body["messages"][1]["content"] for r in server.requests]
    assert len(users) == 2 * 2 * 2 + 2
    users = [unfence(u) for u in users]
    assert any(u.startswith("Document: SUPPORTS-FIRST text. T\nStatement:") for u in users)
    assert any(u.startswith("Document: SUPPORTS-ALONE\nStatement: P-ALONE.") for u in users)
    scores = read_jsonl(out / "scores.jsonl")
    ids = [f"{q['dataset']}/{q['id']}" for q in questions]
    assert [s["id"] for s in scores] == [*ids, "line 3"]
    assert [s["mrecall"] for s in scores] == [1, 0, 1]
    assert [s["precision"] for s in scores] == [1.0, 0.5, 0.5]
    judged = read_jsonl(out / "judgments.jsonl")
    assert {r["chunk_id"] for r in judged} == {"0", "1", "10", "11"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mrecall"] == pytest.approx(2 / 3) and summary["detector_prompt"] == "zero-shot"


def test_a_released_record_with_an_empty_title_keeps_the_released_space(tmp_path):
    record = {"perspectives": ["P"], "ctxs": [{"text": "Body.", "title": ""}]}
    (item,) = load_retrieved(write_jsonl(tmp_path / "r.jsonl", [record]))
    assert item.documents == ("Body. ",)  # Eval/eval.py: doc['text'] + ' ' + doc['title']


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"id": "q", "question": "Q?"}, "expected moot retrieve output (an object with 'chunks')"),
        (
            {"id": "q", "chunks": [], "ctxs": []},
            "or BERDS retrieval output (an object with 'ctxs')",
        ),
        ({"perspectives": ["P"], "ctxs": [{"title": "T"}]}, "line 1: ctx 0 has no text"),
        ({"perspectives": "P", "ctxs": [{"text": "x"}]}, "'perspectives' must be a list"),
    ],
)
def test_records_in_neither_layout_exit_2_with_one_line(tmp_path, record, problem):
    retrieved = write_jsonl(tmp_path / "retrieved.jsonl", [record])
    out = tmp_path / "out"
    with ScriptedServer() as server, pytest.raises(moot.MootError) as refused:
        moot.eval.berds(retrieved=retrieved, k=1, **judge_options(server, out, "detector"))
    assert server.requests == []
    said = refused_in_one_line(refused.value)
    assert f"{retrieved}, line 1" in said and problem in said
    assert not out.exists()


def test_moot_records_without_perspectives_need_the_perspectives_file(tmp_path):
    retrieved, _, _ = berds_fixture(tmp_path)
    with pytest.raises(InputError, match="arguana_generated/750: no perspectives and no --persp"):
        join_perspectives(load_retrieved(retrieved), retrieved, None, None, 2)


def test_the_one_shot_detector_prompt_is_its_own_run(tmp_path):
    pairs, rows = detector_subset(tmp_path, 3)
    out = tmp_path / "out"
    with ScriptedServer(rules=[Rule(pattern="Statement:", reply="No")]) as server:
        options = {"pairs": pairs, **judge_options(server, out, "detector")}
        moot.eval.detector(**options, detector_prompt="one-shot")
        roles = [[m["role"] for m in r.body["messages"]] for r in server.requests]
        assert roles == [["system", "user", "assistant", "user"]] * 3
        assert server.requests[0].body["messages"][2]["content"] == "No"
        server.clear_log()
        with pytest.raises(moot.MootError):  # zero-shot: another run
            moot.eval.detector(**options)
        assert server.requests == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["detector_prompt"] == "one-shot" and summary["pairs"] == 3
