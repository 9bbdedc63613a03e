"""Files a dry run takes as written (`moot run --dry-run`): read through the one input reader."""

from __future__ import annotations

import pytest

from moot.core.data.planned import is_planned, planned_files
from moot.core.data.records import read_records
from moot.core.data.responses import load_responses
from moot.core.errors import InputError

ANSWER = {
    "topic": "Zoos?",
    "side": "affirmative",
    "argument": "Harm",
    "instruction": "Argue it.",
    "raw_output": "word word",
    "response": "word word",
}


def test_a_planned_file_is_read_as_its_records_and_only_inside_the_block(tmp_path):
    out = tmp_path / "run" / "generate.json"
    with planned_files() as planned:
        planned.add_file(out, [ANSWER])
        assert [r for _, r in read_records(out)] == [ANSWER]
        assert load_responses(tmp_path / "run" / ".." / "run" / "generate.json")[0].response == (
            "word word"
        )  # by name, however spelled
        assert not out.exists()  # nothing written
    with pytest.raises(InputError, match="file not found"):
        list(read_records(out))


def test_a_planned_folder_holds_any_path_but_no_records(tmp_path):
    sft = tmp_path / "run" / "sft"
    assert not is_planned(sft / "adapter")
    with planned_files() as planned:
        planned.add_folder(sft)
        assert is_planned(sft) and is_planned(sft / "adapter")
        assert not is_planned(tmp_path / "run" / "sft-other")
        with pytest.raises(InputError, match="file not found"):  # its contents are unknown
            list(read_records(sft / "adapter" / "config.json"))
    assert not is_planned(sft / "adapter")
