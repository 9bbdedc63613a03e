"""Labels: each kind's fields and the judge's values, the label record checked, kept, read back."""

from __future__ import annotations

import json

import pytest

from moot.core.errors import InputError
from moot.core.labels import (
    append_label,
    check_label,
    judge_values,
    label_fields,
    read_labels,
)


def verdict(alice, bob, winner="Bob"):
    """A Debatrix dimension's verdict as `moot judge` logs it (docs/schemas.md)."""
    return {
        "weight": 2,
        "allow_tie": True,
        "speeches": [],
        "summaries": [],
        "judgment": "JUDGMENT: ...",
        "debaters": {"Alice": alice, "Bob": bob},
        "winner": winner,
        "winner_failure": None,
    }


def score(n):
    return {"comment": "Clear but thinly supported.", "score": n}


UNREAD = {"parse_failure": True, "raw": "seven-ish", "error": "not an integer", "repaired": True}

JUDGMENT = {
    "id": "effafbd5f6a84f96",
    "debate": "d1",
    "repeat": 0,
    "framework": "debatrix",
    "format": "1v1",
    "judge": "openai/scripted",
    "pro": ["Alice"],
    "con": ["Bob"],
    "status": "complete",
    "reason": None,
    "dimensions": {
        "argument": verdict(score(6), score(8)),  # con by 2 points
        "source": verdict(score(8), score(5)),  # 3 points: a tie on source
        "language": verdict(UNREAD, score(5)),  # unread: no verdict
    },
    "final": verdict(score(6), score(8)) | {"weight": 0},
    "usage": {"calls": 48},
}


def names(fields):
    return [f.name for f in fields]


def test_each_kinds_fields_and_what_its_judge_said():
    fields = label_fields("judge", JUDGMENT, {})
    assert names(fields) == ["winner", "score:argument", "score:source", "score:language"]
    assert fields[0].values == ("Alice", "Bob", "tie")
    assert fields[1].values == (0.0, 0.5, 1.0) and fields[1].scale == (0.0, 1.0)
    assert fields[0].to_json() == {
        "name": "winner",
        "values": ["Alice", "Bob", "tie"],
        "scale": None,
        "ordinal": False,
        "title": "winner",
    }
    assert judge_values("judge", JUDGMENT, {}) == {
        "winner": "Bob",
        "score:argument": 1.0,
        "score:source": 0.5,
    }
    # a judgment that failed: the run's dimensions are labelled, the judge said nothing
    failed = {**JUDGMENT, "status": "error", "dimensions": {}, "final": None}
    summary = {"dimensions": ["argument"]}
    assert names(label_fields("judge", failed, summary)) == ["winner", "score:argument"]
    assert judge_values("judge", failed, summary) == {}
    bp = {**JUDGMENT, "format": "bp", "pro": ["OG", "CG"], "con": ["OO", "CO"]}
    bp["final"] = {**JUDGMENT["final"], "winner": "CG"}
    assert [f.values for f in label_fields("judge", bp, {})] == [("OG", "CG", "OO", "CO")]
    assert judge_values("judge", bp, {}) == {"winner": "CG"}

    judged = {"status": "ok", "judgment": {"ok": True, "value": {"support": 80, "oppose": 20}}}
    assert names(label_fields("controllability", judged, {})) == ["support", "oppose"]
    assert judge_values("controllability", judged, {}) == {"support": 80, "oppose": 20}
    unread = {"status": "ok", "judgment": {"ok": False, "value": None}}
    assert judge_values("controllability", unread, {}) == {}
    pair = {"status": "ok", "outcome": "tie", "inconsistent": True}
    assert label_fields("quality", pair, {})[0].values == ("win", "tie", "loss")
    assert judge_values("quality", pair, {}) == {"outcome": "tie"}
    assert judge_values("quality", {"status": "ok", "outcome": None}, {}) == {}

    for kind in ("da", "detector"):
        ok = {"status": "ok", "judgment": {"ok": True, "label": 0, "replies": ["0"]}}
        assert [f.values for f in label_fields(kind, ok, {})] == [(0, 1)]
        assert judge_values(kind, ok, {}) == {"label": 0}
        assert judge_values(kind, {"status": "error", "error": "HTTP 500"}, {}) == {}

    scores = {str(n): 1 for n in range(1, 16)} | {"9": 2, "15": 0}
    answer = {"object1": "tea", "object2": "coffee", "status": "ok", "score_dict": scores}
    criteria = label_fields("compqa", answer, {})
    assert names(criteria) == [f"criterion:C{n}" for n in range(1, 16)]
    assert criteria[0].values == (0, 1) and criteria[8].values == (0, 1, 2)
    said = judge_values("compqa", answer, {})
    assert said["criterion:C9"] == 2 and said["criterion:C15"] == 0 and len(said) == 15
    assert judge_values("compqa", {**answer, "status": "invalid", "score_dict": None}, {}) == {}
    assert label_fields("debate", {"topic": "t"}, {}) == []


FIELDS = {
    "effafbd5f6a84f96": label_fields("judge", JUDGMENT, {}),
    "a.json:index 0": label_fields("compqa", {}, {}),
}


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"item": "nope", "field": "winner", "value": "Bob"}, 'no item "nope" in this run'),
        (
            {"item": "effafbd5f6a84f96", "field": "criterion:C1", "value": 1},
            'item effafbd5f6a84f96 has no field "criterion:C1" (winner, score:argument, ',
        ),
        (
            {"item": "effafbd5f6a84f96", "field": "winner", "value": "Carol"},
            'winner takes one of "Alice", "Bob", "tie", not "Carol"',
        ),
        (
            {"item": "effafbd5f6a84f96", "field": "score:source", "value": 0.7},
            "score:source takes one of 0.0, 0.5, 1.0, not 0.7",
        ),
        (
            {"item": "a.json:index 0", "field": "criterion:C1", "value": True},
            "criterion:C1 takes one of 0, 1, not true",
        ),
        (
            {"item": "a.json:index 0", "field": "criterion:C9", "value": "2"},
            'criterion:C9 takes one of 0, 1, 2, not "2"',
        ),
        ({"item": "a.json:index 0", "field": "criterion:C9"}, "no 'value'"),
        ({"item": "a.json:index 0", "field": "x", "value": 1, "path": "/etc"}, "unknown key"),
    ],
)
def test_a_wrong_item_field_or_value_is_refused_in_one_line(record, problem):
    with pytest.raises(ValueError) as caught:
        check_label(record, FIELDS)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_labels_are_appended_over_sittings_and_read_back_latest_first_torn_line_skipped(tmp_path):
    item = "effafbd5f6a84f96"
    label = check_label({"item": item, "field": "winner", "value": "Bob"}, FIELDS)
    append_label(tmp_path, "ann", label)
    source = check_label({**label, "field": "score:source", "value": 1}, FIELDS)
    append_label(tmp_path, "ann", source)
    # a later sitting changes the winner: the first line stays, the latest is the label
    append_label(tmp_path, "ann", {**label, "value": "Alice", "note": "Alice rebutted"})
    append_label(tmp_path, "bo.b", label)
    path = tmp_path / "labels" / "ann.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["value"] for r in lines] == ["Bob", 1.0, "Alice"]
    assert {r["labeller"] for r in lines} == {"ann"} and lines[0]["time"].endswith("Z")

    with path.open("a") as f:
        f.write('{"item": "effafbd5f6a84f96", "fie')  # a crash tore the last append
    found = read_labels(tmp_path / "labels", FIELDS)
    assert [(r["labeller"], r["field"], r["value"]) for r in found] == [
        ("ann", "score:source", 1.0),
        ("ann", "winner", "Alice"),
        ("bo.b", "winner", "Bob"),
    ]
    assert found[1]["note"] == "Alice rebutted"
    append_label(tmp_path, "ann", label)  # the torn tail is cut: the file reads whole
    assert len(path.read_text().splitlines()) == 4
    assert read_labels(tmp_path / "labels", FIELDS)[-2]["value"] == "Bob"

    with pytest.raises(ValueError, match="labeller's name"):
        append_label(tmp_path, "../x", label)
    (tmp_path / "labels" / "cy.jsonl").write_text(json.dumps({**lines[0], "item": "gone"}) + "\n")
    with pytest.raises(InputError, match=r"cy.jsonl, line 1: no item \"gone\" in this run"):
        read_labels(tmp_path / "labels", FIELDS)
    (tmp_path / "labels" / "cy.jsonl").write_text("not json\n" + json.dumps(lines[0]) + "\n")
    with pytest.raises(InputError, match="cy.jsonl, line 1: not a JSON label record"):
        read_labels(tmp_path / "labels")
    with pytest.raises(InputError, match="no labels folder"):
        read_labels(tmp_path / "nowhere")
