"""Debate inputs: moot JSON/JSONL, PanelBench's normalised JSONL and DebateArt folders."""

from __future__ import annotations

import json

import pytest

from moot.core.data.debates import load_debates
from moot.core.errors import InputError
from tests.cli.helpers import BP_LONG, write_bp_competition
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


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"id": None}, "'id' must be text or an integer, got null"),
        ({"id": True}, "'id' must be text or an integer, got a boolean"),
        ({"id": ["x"]}, "'id' must be text or an integer, got a list"),
        ({"id": 1.5}, "'id' must be text or an integer, got a decimal number"),
        ({"id": " "}, "empty 'id'"),
        ({"motion": 5}, "'motion' must be text, got a number"),
        ({"info_slide": {"a": 1}}, "'info_slide' must be text, got an object"),
        ({"speeches": [{"speaker": "Alice", "content": 42}]}, "'content' must be text, got a"),
        ({"speech_order": 3}, "'speech_order' must be a list, got a number"),
        ({"gold": {"dimensions": ["argument"]}}, "gold 'dimensions' must be an object"),
    ],
)
def test_wrong_types_are_named_as_such(tmp_path, changes, message):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(record(**changes)) + "\n")
    with pytest.raises(InputError, match=message):
        load_debates(path)


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


def write_debateart(folder, name, gold_rows=None):
    motion = {
        "motion": "Zoos should be abolished",
        "pro_side": [{"name": "Alice"}],
        "con_side": [{"name": "Bob"}],
        "speech_order": ["Alice", "Bob"],
    }
    speeches = [
        {"debater_name": "Alice", "content": "Zoos confine animals."},
        {"debater_name": "Bob", "content": "Zoos protect species."},
    ]
    for sub in ("motion", "speech", "gold"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "motion" / f"{name}.yml").write_text(json.dumps(motion))  # JSON is YAML
    (folder / "speech" / f"{name}.yml").write_text(json.dumps(speeches))
    if gold_rows is not None:
        lines = ["dart_id,is_many_round,is_long,vote_count,label", *gold_rows]
        (folder / "gold" / "final.csv").write_text("\n".join(lines) + "\n")


def test_a_debateart_folder_matches_gold_labels_by_the_number_ending_the_file_name(tmp_path):
    write_debateart(tmp_path, "zoos_0042", ["42,False,False,3,1.0"])
    (debate,) = load_debates(tmp_path)
    assert debate.id == "zoos_0042" and debate.gold["final"] == 1.0
    assert debate.gold["vote_count"] == 3


def test_a_bad_debateart_speech_file_is_named_not_its_motion_file(tmp_path):
    write_debateart(tmp_path, "zoos")
    (tmp_path / "speech" / "zoos.yml").write_bytes(b"- \xff\xfe")
    with pytest.raises(InputError, match=r"speech/zoos\.yml: cannot read YAML"):
        load_debates(tmp_path)
    (tmp_path / "speech" / "zoos.yml").write_text("speaker: Alice")
    with pytest.raises(InputError, match=r"speech/zoos\.yml: expected a list of speeches"):
        load_debates(tmp_path)


def test_a_debateart_file_name_without_a_number_is_fine_without_gold_and_an_error_with_it(
    tmp_path,
):
    write_debateart(tmp_path / "plain", "zoos")
    (debate,) = load_debates(tmp_path / "plain")
    assert debate.gold == {}
    write_debateart(tmp_path / "gold", "zoos", ["42,False,False,3,1.0"])
    with pytest.raises(InputError, match=r"zoos\.yml.*must end in _<dart_id>"):
        load_debates(tmp_path / "gold")


def debatune_record(**changes) -> dict:
    """A record of `moot debate`'s debates.jsonl (docs/schemas.md)."""
    base = {
        "id": "32995daf93df4780",
        "topic": "Should zoos be banned?",
        "stance": "Negative",
        "argument": "Zoos save species.",
        "status": "ok",
        "error": None,
        "transcript": [
            {"speaker": "A", "side": "Negative", "round": 0, "text": "Zoos breed rare animals."},
            {"speaker": "B", "side": "Affirmative", "round": 0, "text": "Cages cause stress."},
            {"speaker": "A", "side": "Negative", "round": 1, "text": "Stress is managed."},
            {"speaker": "B", "side": "Affirmative", "round": 1, "text": "Not in small zoos."},
        ],
        "conclusion": "Zoos are needed to save species.",
        "models": {"debater_a": "openai/m", "debater_b": "openai/m"},
        "rounds": 2,
        "shard": "0/1",
    }
    return {**base, **changes}


def test_a_moot_debate_record_is_a_1v1_debate_named_by_side(tmp_path):
    path = tmp_path / "debates.jsonl"
    affirmative = debatune_record(
        id="e1",
        stance="Affirmative",
        argument="Cages cause stress.",
        transcript=[
            {"speaker": "A", "side": "Affirmative", "round": 0, "text": "Cages cause stress."},
            {"speaker": "B", "side": "Negative", "round": 0, "text": "Zoos breed rare animals."},
        ],
    )
    path.write_text(json.dumps(debatune_record()) + "\n" + json.dumps(affirmative) + "\n")
    debates = load_debates(path)
    assert debates.skipped == 0
    negative, positive = debates
    assert negative.motion == "Should zoos be banned?"
    assert (negative.pro, negative.con) == (("Affirmative",), ("Negative",))
    # debater A holds the stance: in a Negative record A is con and speaks first
    assert [(s.speaker, s.content) for s in negative.speeches] == [
        ("Negative", "Zoos breed rare animals."),
        ("Affirmative", "Cages cause stress."),
        ("Negative", "Stress is managed."),
        ("Affirmative", "Not in small zoos."),
    ]
    assert negative.info_slide == "Negative argument: Zoos save species."
    assert all("needed to save" not in s.content for s in negative.speeches)  # no conclusion
    assert [s.speaker for s in positive.speeches] == ["Affirmative", "Negative"]
    assert positive.info_slide == "Affirmative argument: Cages cause stress."
    assert positive.label("Negative") == 1.0


def test_failed_debates_are_skipped_and_counted_and_the_last_line_of_an_id_wins(tmp_path):
    path = tmp_path / "debates.jsonl"
    failed = debatune_record(id="f1", status="failed", error="HTTP 500", conclusion=None)
    lines = [
        failed,
        debatune_record(id="d1", status="failed", transcript=[]),  # an interrupted run ...
        debatune_record(id="d1"),  # ... that finished d1 on its rerun
        debatune_record(id="d2"),
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    debates = load_debates(path)
    assert [d.id for d in debates] == ["d1", "d2"] and debates.skipped == 1
    path.write_text(json.dumps(failed) + "\n")
    with pytest.raises(InputError, match="no debate to judge: all 1 debate records have a status"):
        load_debates(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"stance": "Positive"}, "'stance' must be 'Affirmative' or 'Negative', got 'Positive'"),
        ({"topic": 3}, "'topic' must be text, got a number"),
        ({"transcript": []}, "no speeches"),
        ({"transcript": [{"speaker": "C", "text": "Hi."}]}, "turn 1: expected"),
        (
            {"transcript": [{"speaker": "A", "side": "Affirmative", "text": "Hi."}]},
            "turn 1: debater A is Negative, not 'Affirmative'",
        ),
        ({"transcript": [{"speaker": "B", "text": " "}]}, "speech 1 by 'Affirmative' is empty"),
    ],
)
def test_invalid_moot_debate_records_name_the_record(tmp_path, changes, message):
    path = tmp_path / "debates.jsonl"
    path.write_text(json.dumps(debatune_record(**changes)) + "\n")
    with pytest.raises(InputError, match=message) as caught:
        load_debates(path)
    assert str(caught.value).startswith(f"{path}, line 1 (debate '32995daf93df4780'): ")


def test_a_bp_competition_folder_in_the_released_layout_is_read_as_bp(tmp_path):
    write_bp_competition(tmp_path, {3: "OG,CG", 20: "OO"})
    first, second = load_debates(tmp_path)
    assert (first.id, first.format, second.id) == ("bp_003", "bp", "bp_020")
    assert first.pro == ("OG", "CG") and first.con == ("OO", "CO")
    assert [s.speaker for s in first.speeches] == ["OG", "OO", "OG", "OO", "CG", "CO", "CG", "CO"]
    assert first.gold == {"winners": ["OG", "CG"]} and second.gold == {"winners": ["OO"]}


def test_a_normalised_bp_record_with_the_released_team_names_is_bp(tmp_path):
    speeches = [{"speaker": BP_LONG[t], "content": f"{t} speaks."} for t in BP_LONG]
    path = tmp_path / "bp.json"
    pro, con = [BP_LONG["OG"], BP_LONG["CG"]], [BP_LONG["OO"], BP_LONG["CO"]]
    gold = {"winners": f"{BP_LONG['OO']},CO"}
    path.write_text(json.dumps(record(pro=pro, con=con, speeches=speeches, gold=gold)))
    (debate,) = load_debates(path)
    assert debate.format == "bp" and debate.debaters == ("OG", "CG", "OO", "CO")
    assert debate.gold["winners"] == ["OO", "CO"]


def test_a_bp_gold_row_without_a_label_names_the_line(tmp_path):
    write_bp_competition(tmp_path, {3: "OG"})
    (tmp_path / "gold" / "gold.csv").write_text("bp_id,label\n3,\n")
    with pytest.raises(
        InputError, match=r"gold\.csv, line 2: expected a numeric bp_id and a label"
    ):
        load_debates(tmp_path)
    (tmp_path / "gold" / "gold.csv").write_text("bp_id,label\n3,XX\n")
    with pytest.raises(InputError, match=r"gold winners must be teams"):
        load_debates(tmp_path)
