"""The machine refuses a file moot writes (issue 29, item 11): a full disk, too many open files.

Each run ends in one line naming the file and the error, exit 1, with every finished record kept;
the next run resumes and asks for nothing already logged. The disk is made full with a resource
limit on the moot process alone (``RLIMIT_FSIZE``: a write past that file size fails, as on a full
disk), which needs no privilege and fails at the same write every time; ``RLIMIT_NOFILE`` leaves
it few file descriptors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.data.records import ResultLog
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import ARGUMENTS_REPLY, read_jsonl, run_moot, write_topics

pytestmark = pytest.mark.subprocess

#: Every file moot writes stops at 40 kB: past SQLite's 32 kB shared-memory file, so the request
#: cache and a debate's checkpoints fill up after some writes (their write-ahead logs grow by
#: 4 kB pages), not as they open.
FULL = {"RLIMIT_FSIZE": 40_000}
KEPT = "what finished is kept; rerun the same command to resume once the cause is fixed"


def asked(server: ScriptedServer) -> list[str]:
    """The last message of every chat request the server answered."""
    return [r.body["messages"][-1]["content"] for r in server.requests if r.body]


def one_line(result, path: Path | None, problem: str | None) -> None:
    line = result.stderr
    assert result.returncode == 1 and line.count("\n") == 1 and KEPT in line, line
    assert path is None or line.startswith(f"moot: cannot write {path}: "), line
    assert problem is None or f": {problem}; " in line, line


def test_answers_stopped_by_a_full_disk_or_no_file_descriptor_resume_from_their_log(tmp_path):
    rows = [{"id": str(i), "question": f"Is policy {i} good?"} for i in range(10)]
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answer = "It is debated: some say yes, others no. " * 40  # 1.6 kB a record
    with ScriptedServer(rules=[Rule(pattern=".", reply=answer)]) as server:
        call = ["--model", "openai/scripted", "--api-base", server.url, "--concurrency", 1]
        cache, log = tmp_path / "c.sqlite", tmp_path / "log" / "answers.jsonl"
        cases = [  # (folder, options, limits, the file named, the error)
            ("cache", ["--cache", cache], FULL, cache, None),  # SQLite's words
            ("log", ["--no-cache"], {"RLIMIT_FSIZE": 16_000}, log, "File too large"),
            (
                "fds",
                ["--cache", tmp_path / "fds.sqlite"],
                {"RLIMIT_NOFILE": 11},  # the answers log's open is the first without one
                None,
                "Too many open files",
            ),
        ]
        for name, options, limits, path, problem in cases:
            out = tmp_path / name
            args = ["answer", "--questions", questions, "--out", out, *call, *options, "--quiet"]
            server.clear_log()
            one_line(run_moot(*args, limits=limits), path, problem)
            kept = [r["question"] for r in ResultLog(out / "answers.jsonl").records()]
            assert len(kept) < len(rows) and len(asked(server)) <= len(kept) + 1, name
            assert kept or name == "fds", name  # the disk filled mid-run
            server.clear_log()
            resumed = run_moot(*args)
            assert resumed.returncode == 0, (name, resumed.stderr)
            records = read_jsonl(out / "answers.jsonl")
            assert sorted(r["id"] for r in records) == sorted(r["id"] for r in rows), name
            assert {r["status"] for r in records} == {"ok"}
            assert not set(kept) & set(asked(server)), name  # nothing finished is asked again


def test_a_debate_whose_checkpoints_fill_the_disk_is_one_line_and_resumes(tmp_path):
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY), Rule(".", "A turn. " * 50)]
    with ScriptedServer(rules=rules) as server:
        args = [
            "debate", "--topics", topics, "--out", tmp_path / "out", "--model", "openai/scripted",
            "--api-base", server.url, "--arguments-per-stance", 1, "--rounds", 2,
            "--no-cache", "--quiet",  # no cache: a checkpoint after every turn
        ]  # fmt: skip
        one_line(run_moot(*args, limits=FULL), tmp_path / "out/.moot/checkpoints.sqlite", None)
        assert len(read_jsonl(tmp_path / "out" / "arguments.jsonl")) == 2  # both sides' lists
        assert sum("list your arguments" in text for text in asked(server)) == 2
        server.clear_log()
        resumed = run_moot(*args)
        assert not any("list your arguments" in text for text in asked(server))  # kept
    assert resumed.returncode == 0, resumed.stderr
    assert {r["status"] for r in read_jsonl(tmp_path / "out" / "debates.jsonl")} == {"ok"}
