"""Debate inputs: moot JSON/JSONL, PanelBench's normalised JSONL and DebateArt folders."""

from __future__ import annotations

import json

import pytest

from moot.core.debates import load_debates
from moot.core.errors import InputError
from tests.conftest import shared_data


def record(**changes) -> dict:
    base = {
        "id": "d1",
        "motion": "Zoos should be abolished",
        "pro": ["Alice"],
        "con": ["Bob"],
        "speeches": [
            {"speaker": "Alice", "content": "Zoos confine animals."},
            {"speaker": "Bob", "content": "Zoos protect species."},
        ],
    }
    return {**base, **changes}


def test_the_normalised_jsonl_and_the_debateart_folder_hold_the_same_debates():
    jsonl = load_debates(shared_data("panelbench", "debateart.jsonl"))
    folder = load_debates(shared_data("panelbench", "DebateArt"))
    assert len(jsonl) == 100
    assert sorted(jsonl, key=lambda d: d.id) == sorted(folder, key=lambda d: d.id)
    finals = [d.gold["final"] for d in jsonl]
    assert (finals.count(0.0), finals.count(0.5), finals.count(1.0)) == (38, 6, 56)


def test_a_single_object_a_list_and_jsonl_are_all_accepted(tmp_path):
    one, many, lines = tmp_path / "one.json", tmp_path / "many.json", tmp_path / "d.jsonl"
    one.write_text(json.dumps(record()))
    many.write_text(json.dumps([record(), record(id="d2")]))
    lines.write_text(json.dumps(record()) + "\n\n" + json.dumps(record(id="d2")) + "\n")
    assert [d.id for d in load_debates(one)] == ["d1"]
    assert [d.id for d in load_debates(many)] == [d.id for d in load_debates(lines)] == ["d1", "d2"]
    (debate,) = load_debates(one)
    assert debate.format == "1v1" and debate.label("Bob") == 1.0 and debate.label("tie") == 0.5


def test_four_bp_teams_make_a_bp_debate(tmp_path):
    speeches = [{"speaker": t, "content": f"{t} speaks."} for t in ("OG", "OO", "CG", "CO")]
    path = tmp_path / "bp.json"
    path.write_text(
        json.dumps(
            record(pro=["OG", "CG"], con=["OO", "CO"], speeches=speeches, gold={"winners": ["CG"]})
        )
    )
    (debate,) = load_debates(path)
    assert debate.format == "bp" and debate.debaters == ("OG", "CG", "OO", "CO")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"gold": {"final": 0.3}}, "gold label 'final' must be 0, 0.5 or 1"),
        ({"format": "lincoln-douglas"}, "unknown format"),
        ({"format": "bp"}, "a BP debate has pro"),
        ({"pro": []}, "'pro' must list at least one debater"),
        ({"speeches": []}, "no speeches"),
    ],
)
def test_invalid_records_name_the_file_and_record(tmp_path, changes, message):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(record()) + "\n" + json.dumps(record(id="d2", **changes)) + "\n")
    with pytest.raises(InputError, match=message) as caught:
        load_debates(path)
    assert str(caught.value).startswith(f"{path}, line 2 (debate 'd2'): ")


def test_duplicate_ids_and_empty_files_are_errors(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps([record(), record()]))
    with pytest.raises(InputError, match="duplicate id"):
        load_debates(path)
    path.write_text("  \n")
    with pytest.raises(InputError, match="file is empty"):
        load_debates(path)
    with pytest.raises(InputError, match="file not found"):
        load_debates(tmp_path / "missing.json")
