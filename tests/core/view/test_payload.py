from __future__ import annotations

import json

import pytest

from moot.cli.main import build_parser
from moot.core.data.folders import outputs
from moot.core.errors import InputError
from moot.core.view.payload import KINDS, STAGES, command_of, read_run


@pytest.fixture(autouse=True)
def _kinds() -> None:
    """Each command registers its output's kind as the CLI builds its parser."""
    build_parser()


def test_every_kind_a_command_registers_is_one_the_page_draws_and_each_is_registered():
    views = {output.view for output in outputs().values()} - {None}
    assert views == {*KINDS, STAGES}
    assert [c for c, o in outputs().items() if o.view == STAGES] == ["moot run"]


def test_an_earlier_versions_eval_folder_is_told_apart_by_its_claim(tmp_path):
    (tmp_path / ".moot").mkdir()
    (tmp_path / ".moot" / "eval.json").write_text(json.dumps({"evaluation": "quality"}))
    assert command_of(tmp_path) == "moot eval quality"


def test_an_earlier_versions_merged_shards_folder_is_a_debate_folder(tmp_path):
    """Its manifest is `moot debate`'s and `moot merge-shards`'s alike: both show as debates."""
    (tmp_path / "manifest.json").write_text(json.dumps({"kind": "debatune"}))
    ok = {"id": "a", "topic": "T", "stance": "Affirmative", "argument": "x", "status": "ok"}
    (tmp_path / "debates.jsonl").write_text(json.dumps(ok) + "\n")
    run = read_run(tmp_path)
    assert (run["command"], run["kind"], len(run["items"])) == ("moot debate", "debate", 1)


def test_a_folder_with_nothing_to_show_is_named_with_its_command(tmp_path):
    (tmp_path / "index.json").write_text("{}")
    with pytest.raises(InputError, match=r"a `moot index` folder: `moot view` shows run folders"):
        command_of(tmp_path)


def test_a_torn_last_line_is_left_out_and_failures_stay_failures(tmp_path):
    (tmp_path / ".moot").mkdir()
    (tmp_path / ".moot" / "owner.json").write_text('{"command": "moot debate"}')
    ok = {"id": "a", "topic": "T", "stance": "Affirmative", "argument": "x", "status": "ok"}
    failed = {**ok, "id": "b", "status": "failed", "error": "HTTP 500"}
    lines = [json.dumps(ok), json.dumps(failed), '{"id": "c", "top']
    (tmp_path / "debates.jsonl").write_text("\n".join(lines))
    run = read_run(tmp_path, "run")
    assert [(i["id"], i["status"], i["failed"], i["error"]) for i in run["items"]] == [
        ("a", "ok", False, None),
        ("b", "failed", True, "HTTP 500"),
    ]
    assert run["summary"] is None and run["kind"] == "debate"


def test_a_berds_question_takes_its_detections_and_a_failed_one_makes_it_a_failure(tmp_path):
    """An earlier version's BERDS folder: scores without the perspectives and documents."""
    (tmp_path / ".moot").mkdir()
    (tmp_path / ".moot" / "owner.json").write_text('{"command": "moot eval berds"}')
    scores = [
        {"id": "q0", "question": "Q0?", "mrecall": 1, "precision": 0.5, "parse_failure": False,
         "incomplete": False, "supported": [True, True]},
        {"id": "q1", "question": "Q1?", "mrecall": None, "precision": None,
         "parse_failure": False, "incomplete": True, "supported": []},
    ]  # fmt: skip
    (tmp_path / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s in scores))

    def detection(question: str, p: int, rank: int, label: int | None) -> dict:
        found = {"id": f"{question}{p}{rank}", "question_id": question, "chunk_id": f"c{rank}",
                 "rank": rank, "perspective_index": p}  # fmt: skip
        if label is None:
            return {**found, "status": "error", "error": "HTTP 500"}
        judgment = {"ok": True, "label": label, "parse_failure": None, "replies": [str(label)]}
        return {**found, "status": "ok", "judgment": judgment}

    judged = [detection("q0", p, r, int(p == r)) for p in (0, 1) for r in (0, 1)]
    judged.append(detection("q1", 0, 1, None))
    (tmp_path / "judgments.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judged))
    first, second = read_run(tmp_path)["items"]
    labels = [[d["judgment"]["label"] for d in row] for row in first["detections"]]
    assert labels == [[1, 0], [0, 1]] and (first["status"], first["score"]) == ("ok", 1)
    assert (second["status"], second["failed"], second["error"]) == ("error", True, "HTTP 500")
    assert second["detections"] == [[None, judged[-1]]]  # the failed detection, in its place
