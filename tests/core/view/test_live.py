"""`moot view --serve`'s following of a run: what is new in its log since the page's cursor."""

from __future__ import annotations

import json
import os

import pytest

from moot.cli.main import build_parser
from moot.core.view.live import LiveRuns, follow, parse_cursors


@pytest.fixture(autouse=True)
def _kinds() -> None:
    build_parser()  # each command registers its output's kind


def line(id_: str, status: str = "ok") -> str:
    record = {"id": id_, "topic": f"T {id_}", "stance": "Affirmative", "status": status}
    return json.dumps(record) + "\n"


def test_a_log_is_followed_line_by_line_and_a_half_written_line_waits(tmp_path):
    log = tmp_path / "log.jsonl"
    assert follow(log, 0, 0) == ({}, 0, 0)  # no log yet: nothing, from the start
    log.write_text(line("a") + "not json\n" + line("b")[:10])
    found, ino, offset = follow(log, 0, 0)
    assert list(found) == ["a"] and offset == len(line("a") + "not json\n")
    with log.open("a") as f:
        f.write(line("b")[10:] + line("a", "failed"))
    found, ino, offset = follow(log, ino, offset)
    assert [(k, r["status"]) for k, r in found.items()] == [("b", "ok"), ("a", "failed")]
    assert offset == log.stat().st_size and follow(log, ino, offset)[0] == {}
    compacted = tmp_path / "new.jsonl"  # the engine compacts atomically: another inode
    compacted.write_text(line("a") + line("b"))
    os.replace(compacted, log)
    assert follow(log, ino, offset) == (None, log.stat().st_ino, 0)
    assert follow(log, log.stat().st_ino, offset)[0] is None  # shorter than the cursor: cut


def test_the_served_runs_send_what_is_new_and_a_run_whole_when_it_was_rewritten(tmp_path):
    run = tmp_path / "run"
    (run / ".moot").mkdir(parents=True)
    (run / ".moot" / "owner.json").write_text('{"command": "moot debate"}')
    live = LiveRuns([run])  # a run that has logged nothing yet is shown, empty
    [first] = live.payload()["runs"]
    assert first["items"] == [] and first["cursor"]["offset"] == 0
    (run / "debates.jsonl").write_text(line("a") + line("b", "failed") + '{"id": "c"')
    (run / ".moot" / "progress.json").write_text('{"stage": "debates", "done": 1}')
    [update] = live.update([first["cursor"]])["runs"]
    assert [(i["id"], i["failed"]) for i in update["items"]] == [("a", False), ("b", True)]
    assert update["progress"] == {"stage": "debates", "done": 1} and "reset" not in update
    with (run / "debates.jsonl").open("a") as f:
        f.write(', "status": "ok"}\n' + line("b"))
    [again] = live.update([update["cursor"]])["runs"]
    assert [(i["id"], i["status"]) for i in again["items"]] == [("c", "ok"), ("b", "ok")]
    assert live.update([again["cursor"]])["runs"][0]["items"] == []
    (run / "manifest.json").write_text('{"kind": "debatune"}')  # another file: the run whole
    [whole] = live.update([again["cursor"]])["runs"]
    assert whole["reset"] and [i["id"] for i in whole["items"]] == ["a", "b", "c"]
    assert whole["summary"] == {"kind": "debatune"}
    (run / "debates.jsonl").write_text(line("a"))  # a log cut shorter: read whole again
    [cut] = live.update([whole["cursor"]])["runs"]
    assert cut["reset"] and [i["id"] for i in cut["items"]] == ["a"]
    assert live.update([{**cut["cursor"], "name": "other"}]) == {"reload": True}


@pytest.mark.parametrize(
    "text",
    ["", "{", "{}", '[{"name": "r"}]', '[{"name": "r", "ino": "1", "offset": 0, "also": ""}]'],
)
def test_a_cursor_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="cursor: expected a list of"):
        parse_cursors(text)
