from __future__ import annotations

import json

import pytest

from moot.core.errors import InputError
from moot.core.view.payload import command_of, read_run


def test_an_earlier_versions_eval_folder_is_told_apart_by_its_claim(tmp_path):
    (tmp_path / ".moot").mkdir()
    (tmp_path / ".moot" / "eval.json").write_text(json.dumps({"evaluation": "quality"}))
    assert command_of(tmp_path) == "moot eval quality"


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
