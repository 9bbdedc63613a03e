"""Output folders through the CLI: each belongs to the command that made it; one run at a time."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from moot.core.retrieval.index import build_index
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import ARGUMENTS_REPLY, popen_moot, read_jsonl, run_moot, write_topics

pytestmark = pytest.mark.subprocess

SCORE = Rule(r'"score": <an integer from 1 to 10>', '{"comment": "solid", "score": 6}', role="last")
RULES = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY), SCORE]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (names and bytes), to show a refused run touched nothing."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def call(server: ScriptedServer) -> list[object]:
    return ["--api-base", server.url, "--max-retries", 0]


def debate(server: ScriptedServer, tmp_path: Path, out: Path) -> list[object]:
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    return [
        "debate", "--topics", topics, "--out", out, "--model", "openai/scripted",
        "--arguments-per-stance", 1, "--rounds", 1, *call(server),
    ]  # fmt: skip


def judge(server: ScriptedServer, debates: Path, out: Path) -> list[object]:
    return [
        "judge", "--debates", debates, "--out", out, "--judge", "openai/scripted",
        "--framework", "direct", *call(server),
    ]  # fmt: skip


def questions(tmp_path: Path, count: int = 3) -> Path:
    path = tmp_path / "questions.jsonl"
    rows = [{"id": str(i), "question": f"Is policy {i} good?"} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def answer(server: ScriptedServer, tmp_path: Path, out: Path, *extra: object) -> list[object]:
    return [
        "answer", "--questions", questions(tmp_path), "--out", out,
        "--model", "openai/scripted", *call(server), *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A `moot debate` folder, a `moot judge` folder, a `moot index` folder, a user's folder."""
    tmp_path = tmp_path_factory.mktemp("folders")
    with ScriptedServer(rules=RULES) as server:
        made = run_moot(*debate(server, tmp_path, tmp_path / "debate"))
        assert made.returncode == 0, made.stderr
        judged = run_moot(*judge(server, tmp_path / "debate" / "debates.jsonl", tmp_path / "judge"))
        assert judged.returncode == 0, judged.stderr
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "d1", "text": "Zoos protect species."}\n')
    indexed = run_moot("index", "--docs", docs, "--out", tmp_path / "index")
    assert indexed.returncode == 0, indexed.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my thesis draft\n")
    return tmp_path


@pytest.fixture
def folders(made, tmp_path):
    """A copy of `made` this test may change."""
    shutil.copytree(made, tmp_path / "made")
    return tmp_path / "made"


@pytest.mark.parametrize(
    ("command", "target", "owner"),
    [
        ("judge", "debate", "holds the input --debates"),  # its debates.jsonl
        ("debate", "judge", "`moot judge`"),
        ("answer", "index", "`moot index`"),
        ("answer", "debate", "`moot debate`"),
        ("judge", "mine", "files moot did not make"),
        ("debate", "mine", "files moot did not make"),
        ("answer", "mine", "files moot did not make"),
        ("index", "judge", "`moot judge`"),
    ],
)
def test_another_commands_folder_is_refused_and_left_untouched(made, command, target, owner):
    folders = made
    out = folders / target
    before = snapshot(out)
    with ScriptedServer(rules=RULES) as server:
        args = {
            "judge": judge(server, folders / "debate" / "debates.jsonl", out),
            "debate": debate(server, folders, out),
            "answer": answer(server, folders, out),
            "index": ["index", "--docs", folders / "docs.jsonl", "--out", out],
        }[command]
        result = run_moot(*args)
        assert server.requests == []
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"--out {out}" in result.stderr
    assert owner in result.stderr
    assert snapshot(out) == before


def test_the_same_command_reruns_in_its_folder_and_old_folders_are_still_its(folders):
    judge_out = folders / "judge"
    assert json.loads((judge_out / ".moot" / "owner.json").read_text())["command"] == "moot judge"
    assert not (judge_out / ".moot" / "lock").exists()  # released at the end
    with ScriptedServer(rules=RULES) as server:
        debates = folders / "debate" / "debates.jsonl"
        assert run_moot(*judge(server, debates, judge_out)).returncode == 0
        assert run_moot(*debate(server, folders, folders / "debate")).returncode == 0
        # folders of earlier versions carry no owner mark: their claim files say whose they are
        for folder in (judge_out, folders / "debate"):
            (folder / ".moot" / "owner.json").unlink()
        assert run_moot(*judge(server, debates, judge_out)).returncode == 0
        assert run_moot(*debate(server, folders, folders / "debate")).returncode == 0
        refused = run_moot(*debate(server, folders, judge_out))
        assert refused.returncode == 2 and "`moot judge`" in refused.stderr
    rebuilt = run_moot("index", "--docs", folders / "docs.jsonl", "--out", folders / "index")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (folders / "index" / ".moot" / "owner.json").exists()  # kept across the swap


def test_a_second_run_on_the_folder_is_refused_and_a_killed_runs_lock_is_taken_over(tmp_path):
    out = tmp_path / "out"
    # the first run's first call hangs until it is killed
    hang = Fault(kind="hang", times=1, hang_seconds=120)
    with ScriptedServer(rules=[Rule(pattern=".", reply="An answer.")], faults=[hang]) as server:
        args = answer(server, tmp_path, out, "--concurrency", 1)
        assert run_moot("answer", "--help").returncode == 0  # the fork server is up: no delay
        # a fresh interpreter, so its pid is the one the lock names
        first = popen_moot(*args)
        deadline = time.time() + 60
        while time.time() < deadline and not server.arrivals:  # its first call hangs
            time.sleep(0.02)
        started = time.time()
        second = run_moot(*args)
        assert second.returncode == 2 and time.time() - started < 10
        assert second.stderr.count("\n") == 1
        assert f"is in use by `moot answer` (pid {first.pid}, started " in second.stderr
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert (out / ".moot" / "lock").exists()  # left behind, but no longer locked
        rerun = run_moot(*args)
        assert rerun.returncode == 0, rerun.stderr
    assert len(read_jsonl(out / "answers.jsonl")) == 3
    # the refused run asked nothing; only the question in flight at the kill is asked again
    prompts = [r.body["messages"][-1]["content"] for r in server.requests]
    assert [r.outcome for r in server.requests].count("hang") == 1
    assert len(prompts) == 4 and len(set(prompts)) == 3


def test_a_refused_bad_input_leaves_no_folder_behind(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "  "}\n')
    with ScriptedServer(rules=RULES) as server:
        result = run_moot("answer", "--questions", bad, "--out", tmp_path / "o", *call(server))
    assert result.returncode == 2 and not (tmp_path / "o").exists()
    (tmp_path / "empty").mkdir()
    with ScriptedServer(rules=RULES) as server:
        result = run_moot("answer", "--questions", bad, "--out", tmp_path / "empty", *call(server))
    assert result.returncode == 2 and list((tmp_path / "empty").iterdir()) == []


def test_index_folder_built_before_owner_marks_is_still_rebuilt(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"id": "d1", "text": "Zoos protect species."}\n')
    build_index(docs, tmp_path / "index")  # as moot index made it, no owner mark
    shutil.rmtree(tmp_path / "index" / ".moot", ignore_errors=True)
    result = run_moot("index", "--docs", docs, "--out", tmp_path / "index")
    assert result.returncode == 0, result.stderr


def test_no_output_lies_inside_an_input_or_another_run_or_holds_a_run(folders, tmp_path):
    """Issue 29, item 10: every output path of every command, checked before any work.

    The reported case: `moot answer --out idx/answers --index idx` was accepted, and a later
    `moot index --out idx` exited 0 and deleted the paid answers.
    """
    index, judged, debate = folders / "index", folders / "judge", folders / "debate"
    debates = debate / "debates.jsonl"
    progress = tmp_path / ".r.jsonl.progress.jsonl"  # what retrieve keeps beside --out r.jsonl
    progress.write_text('{"id": "1", "question": "Is it?"}\n')
    before = snapshot(folders), progress.read_bytes()
    with ScriptedServer(rules=RULES) as server:
        retrieve = ["retrieve", "--index", index, "--model", "openai/scripted", *call(server)]
        cases = [
            (
                answer(server, tmp_path, index / "answers", "--mode", "rag", "--index", index),
                f"--out {index / 'answers'} lies inside the input --index {index}",
            ),
            (answer(server, tmp_path, index / "answers"), "`moot index`'s run folder"),
            (
                answer(server, tmp_path, tmp_path / "a", "--cache", judged / "c.sqlite"),
                f"--cache {judged / 'c.sqlite'} lies inside {judged}, `moot judge`'s run folder",
            ),
            (judge(server, debates, debate / "judged"), "`moot debate`'s run folder"),
            (
                [*retrieve, "--questions", questions(tmp_path), "--out", judged / "r.jsonl"],
                "`moot judge`'s run folder",
            ),
            (  # the progress log beside --out FILE would be written over its input
                [*retrieve, "--questions", progress, "--out", tmp_path / "r.jsonl"],
                f"--out {progress} is the input --questions {progress}",
            ),
            (
                ["view", debate, "--out", debates],
                f"--out {debates} lies inside the input RUN {debate}",
            ),
        ]
        for args, problem in cases:
            result = run_moot(*args, "--query-expansion" if args[0] == "retrieve" else "--quiet")
            assert result.returncode == 2, (args, result.stderr)
            assert result.stderr.count("\n") == 1 and problem in result.stderr, result.stderr
        assert server.requests == []
    assert (snapshot(folders), progress.read_bytes()) == before
    assert not (tmp_path / "a").exists() and not (tmp_path / "r.jsonl").exists()

    # a run folder moved into another (or made by an earlier version) is never swept away
    with ScriptedServer(rules=RULES) as server:
        made = run_moot(*answer(server, tmp_path, tmp_path / "answers"))
        assert made.returncode == 0, made.stderr
    (tmp_path / "answers").rename(index / "answers")
    kept = snapshot(index / "answers")
    rebuilt = run_moot("index", "--docs", folders / "docs.jsonl", "--out", index)
    assert rebuilt.returncode == 2 and rebuilt.stderr.count("\n") == 1
    assert (
        f"--out {index} holds " in rebuilt.stderr and "`moot answer`'s run folder" in rebuilt.stderr
    )
    assert snapshot(index / "answers") == kept


def test_folders_an_earlier_version_wrote_resume_view_and_refuse_other_settings(folders):
    """Issue 30, item 3: `RunFolder` writes the claims earlier versions wrote, byte for byte.

    Each folder is made as an earlier version left it: its claim written as that version's
    writer wrote it (`write_json`: ``json.dumps(claim, indent=2, ensure_ascii=False)``), and no
    owner mark. A rerun is still its command's and finishes with no call; `moot view` still shows
    it; other settings are still refused, touching nothing.
    """
    rules = [*RULES, Rule(pattern=".", reply="An answer.")]
    with ScriptedServer(rules=rules) as server:
        debates = folders / "debate" / "debates.jsonl"
        cases = [  # the folder, its claim, its command, the same command with other settings
            ("debate", "run", debate(server, folders, folders / "debate"), ["--rounds", 2]),
            (
                "judge",
                "judge",
                judge(server, debates, folders / "judge"),
                ["--framework", "debatrix"],
            ),
            (
                "answer",
                "eval",
                answer(server, folders, folders / "answer"),
                ["--prompt", "detailed"],
            ),
        ]
        first = run_moot(*cases[2][2])
        assert first.returncode == 0, first.stderr
        for name, claim, args, other in cases:
            folder = folders / name
            text = (folder / ".moot" / f"{claim}.json").read_text(encoding="utf-8")
            written = json.loads(text)
            assert text == json.dumps(written, indent=2, ensure_ascii=False) + "\n"
            if claim == "run":  # `moot debate`'s: {identity, shard}, in that order
                assert list(written) == ["identity", "shard"] and written["shard"] == "0/1"
            (folder / ".moot" / "owner.json").unlink()
            calls = len(server.requests)
            rerun = run_moot(*args)
            assert rerun.returncode == 0, rerun.stderr
            assert len(server.requests) == calls, name  # nothing redone
            assert (folder / ".moot" / f"{claim}.json").read_text(encoding="utf-8") == text
            page = folders / f"{name}.html"
            shown = run_moot("view", folder, "--out", page)
            assert shown.returncode == 0, shown.stderr
            before = snapshot(folder)
            refused = run_moot(*args, *other)
            assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
            assert f"{folder}" in refused.stderr and "use a new --out" in refused.stderr
            assert len(server.requests) == calls and snapshot(folder) == before
