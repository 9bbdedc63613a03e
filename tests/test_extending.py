"""docs/extending.md's judge, pipeline, dry run and command run as written (scripted server)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from moot.cli.runtime import execute
from moot.core.errors import ConfigError
from moot.testing import ScriptedServer

PAGE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"
SERVER_IN_THE_PAGE = "http://127.0.0.1:8000/v1"


def test_the_judge_and_the_pipeline_run_and_the_pipeline_resumes(tmp_path, monkeypatch, capsys):
    page = PAGE.read_text(encoding="utf-8")
    sections = [
        page.split(f"\n## {title}\n")[1].split("\n## ")[0] for title in ("A judge", "A pipeline")
    ]
    blocks = [b for section in sections for b in re.findall(r"```python\n(.*?)```", section, re.S)]
    assert len(blocks) == 3  # the judge, the pipeline, the pipeline's dry run
    monkeypatch.chdir(tmp_path)
    with ScriptedServer() as server:  # it answers a request's JSON schema with a valid value
        scope: dict = {}
        for block in blocks:
            exec(compile(block.replace(SERVER_IN_THE_PAGE, server.url), str(PAGE), "exec"), scope)  # noqa: S102
        assert len(server.requests) == 3  # the judge's one call, then the two answers' once: the
        # dry run sent none
    printed = capsys.readouterr().out
    assert "2 calls planned, at most 400 output tokens" in printed
    assert "'verdict': {'relevant':" in printed and "1 call" in printed
    assert "2 judged now" in printed and "2 done before; 0 calls" in printed
    records = (tmp_path / "runs" / "relevance" / "judgments.jsonl").read_text().splitlines()
    assert len(records) == 2


def test_the_command_runs_as_written(tmp_path, monkeypatch, capsys):
    page = PAGE.read_text(encoding="utf-8")
    section = page.split("\n## A command\n")[1].split("\n## ")[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}  # compiled as a script of its own: not under this module's __future__
    exec(compile(block, str(PAGE), "exec", dont_inherit=True), scope)  # noqa: S102
    assert capsys.readouterr().out == "['2 lines']\n"
    parser = scope["root"]
    with pytest.raises(SystemExit):
        parser.parse_args(["count", "--lines", "notes.txt", "--skip", "-1"])
    assert "argument --skip: must be an integer of 0 or more, got -1" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="^--lines missing.txt: file not found$"):
        execute(parser.parse_args(["count", "--lines", "missing.txt"]))
