"""core/data/folders.py: where a default output about a run goes."""

from __future__ import annotations

import json
from pathlib import Path

from moot.core.data.folders import OWNER, beside_runs


def run_folder(path: Path, command: str) -> Path:
    (path / OWNER).parent.mkdir(parents=True)
    (path / OWNER).write_text(json.dumps({"command": command}))
    return path


def test_a_default_sits_beside_the_outermost_run_named_after_the_way_down(tmp_path: Path) -> None:
    loop = run_folder(tmp_path / "loop", "run")
    plain, rag = (
        run_folder(loop / "answer-plain", "answer"),
        run_folder(loop / "answer-rag", "answer"),
    )
    solo = run_folder(tmp_path / "answer", "answer")
    loose = tmp_path / "answers.jsonl"
    assert beside_runs(plain / "answers.jsonl", ".pd") == tmp_path / "loop.answer-plain.pd"
    assert beside_runs(rag / "answers.jsonl", ".pd") == tmp_path / "loop.answer-rag.pd"  # two
    assert beside_runs(solo / "answers.jsonl", ".pd") == tmp_path / "answer.pd"
    assert beside_runs(loose, ".pd") == tmp_path / "answers.pd"
    assert beside_runs(solo, ".panelbench") == tmp_path / "answer.panelbench"
    assert beside_runs(rag, ".panelbench") == tmp_path / "loop.answer-rag.panelbench"
