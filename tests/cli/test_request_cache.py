"""One request cache shared by `moot` processes that start at the same moment (issue 36)."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moot.core.llm.cache import RequestCache
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import ARGUMENTS_REPLY, popen_moot, read_jsonl, run_moot, write_topics

pytestmark = pytest.mark.subprocess

RUNS = 4
TRIALS = 3


@contextlib.contextmanager
def held(path: Path, seconds: float = 1.0) -> Iterator[None]:
    """A fifth process's write lock on `path` while the runs start, let go after `seconds`.

    On a new file this is a process in the middle of creating the cache: SQLite refuses the
    others' switch to WAL at once, without waiting (today's main failed every run so), and
    once the lock goes the runs meet at the creation together.
    """
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
        time.sleep(seconds)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def debate(server: ScriptedServer, topics: Path, out: Path, cache: Path) -> list[object]:
    return [
        "debate", "--topics", topics, "--out", out, "--cache", cache,
        "--model", "openai/scripted", "--api-base", server.url,
        "--arguments-per-stance", 1, "--rounds", 1, "--max-retries", 0,
    ]  # fmt: skip


def test_runs_started_together_share_a_new_then_an_existing_cache(tmp_path: Path) -> None:
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    with ScriptedServer(rules=rules) as server:
        for trial in range(TRIALS):
            cache = tmp_path / f"shared-{trial}.cache"
            topics = [
                write_topics(tmp_path / f"topics-{trial}-{n}.json", [f"Is rule {trial}.{n} fair?"])
                for n in range(RUNS)
            ]
            for state in ("new", "existing"):
                server.clear_log()
                outs = [tmp_path / f"{state}-{trial}-{n}" for n in range(RUNS)]
                with held(cache):
                    runs = [
                        popen_moot(*debate(server, t, out, cache))
                        for t, out in zip(topics, outs, strict=True)
                    ]
                for run in runs:
                    _, err = run.communicate(timeout=300)
                    assert run.returncode == 0, f"trial {trial}, {state} cache: {err}"
                for out in outs:  # both stances of the one argument, debated and saved
                    debates = read_jsonl(out / "debates.jsonl")
                    assert [d["status"] for d in debates] == ["ok", "ok"]
                    assert len(read_jsonl(out / "dataset.jsonl")) == 2
                if state == "new":  # the runs' topics differ: every request is paid once
                    paid = len(server.requests)
                    assert paid > 0 and len(RequestCache(cache)) == paid
                else:  # new folders, the same debates: every reply from the cache, held once
                    assert server.requests == [] and len(RequestCache(cache)) == paid


def test_a_cache_that_cannot_be_opened_is_one_line_before_any_request(tmp_path: Path) -> None:
    topics = write_topics(tmp_path / "topics.json", ["Is tea better than coffee?"])
    (tmp_path / "folder.cache").mkdir()
    (tmp_path / "text.cache").write_text("not a database\n")
    (tmp_path / "a-file").write_text("")
    cases = {
        "folder.cache": "a folder, not a request cache file",
        "text.cache": "cannot open as a request cache (file is not a database)",
        "a-file/requests.sqlite": "cannot make its folder (",
    }
    with ScriptedServer() as server:
        for n, (name, problem) in enumerate(cases.items()):
            cache, out = tmp_path / name, tmp_path / f"out-{n}"
            result = run_moot(*debate(server, topics, out, cache))
            assert result.returncode == 2, result.stderr
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"moot: error: {cache}: {problem}")
            assert server.requests == [] and not out.exists()
