"""moot from Python (`moot.api`): the guide's examples, the command tree, errors and results."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

import moot
from moot.testing import Fault, Rule, ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "python.md"
SERVER_IN_THE_GUIDE = "http://127.0.0.1:8000/v1"


def test_the_python_guide_runs(tmp_path, monkeypatch, capsys):
    """Every example of docs/python.md, in order, against a scripted server."""
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 6
    shutil.copytree(ROOT / "examples" / "protocols", tmp_path / "examples" / "protocols")
    monkeypatch.chdir(tmp_path)
    judge = Rule(pattern="supporting versus opposing proportion", reply="100 0\nSupportive.")
    with ScriptedServer(rules=[judge]) as server:
        namespace: dict = {}
        for block in blocks:
            sent = len(server.requests)
            exec(
                compile(block.replace(SERVER_IN_THE_GUIDE, server.url), str(GUIDE), "exec"),
                namespace,
            )  # noqa: S102
            if "dry_run=True" in block:  # a dry run sends nothing and writes nothing
                assert len(server.requests) == sent
                assert not (tmp_path / "runs" / "bigger").exists()
                assert namespace["plan"].plan.calls > 0
            if "a_notebook_cell" in block:  # a sync call inside a running loop, resumed
                assert namespace["again"].ok
                assert len(server.requests) == sent
    out = capsys.readouterr()
    assert "done" in out.out and "unknown keyword 'rouds'" in out.out
    assert out.err == ""  # a command called from Python prints nothing of its own
    result = namespace["result"]
    assert result.notes  # its warnings are in its result instead
    shown = result._repr_html_()  # a notebook shows the summary, outputs and the view page
    assert "moot debate</b>: done" in shown and "dataset.jsonl" in shown
    assert "<iframe srcdoc=" in shown and "Should zoos be banned?" in result.view()
    assert (tmp_path / "runs" / "a" / "dataset.jsonl").is_file()
    assert (tmp_path / "runs" / "b" / "dataset.jsonl").is_file()


def test_every_command_is_a_function_and_async_twin():
    from tests.cli.helpers import command_parsers

    commands = set(command_parsers())
    assert len(commands) >= 25
    for words in commands:
        owner = moot
        for word in words[:-1]:
            owner = getattr(owner, word)
        name = words[-1].replace("-", "_")
        assert getattr(owner, name).__module__ == "moot.api", words  # not a namesake
        assert asyncio.iscoroutinefunction(getattr(owner, f"a{name}")), words
    # the flags are the signature, with their defaults: what a notebook's tooltip shows
    parameters = inspect.signature(moot.debate).parameters
    assert parameters["arguments_per_stance"].default == 3
    assert parameters["topics"].default is inspect.Parameter.empty
    assert "constrained" in inspect.signature(moot.eval.quality).parameters  # not no_constrained
    assert "arguments_per_stance: " in moot.debate.__doc__
    assert list(inspect.signature(moot.run).parameters)[0] == "recipe"


def test_refused_calls_raise_one_line_before_anything_runs(tmp_path, monkeypatch, scripted_server):
    monkeypatch.chdir(tmp_path)
    Path("topics.json").write_text('["Zoos?"]', encoding="utf-8")
    model = {"model": "openai/m", "api_base": scripted_server.url}
    cases = [
        ({"topics": "topics.json", "out": "o", "rounds": "two"}, "keyword 'rounds': must be"),
        (
            {"topics": "topics.json", "out": "o", "argument_per_stance": 1},
            "unknown keyword 'argument_per_stance' (did you mean 'arguments_per_stance'?)",
        ),
        ({"out": "o"}, "moot.debate(): missing keyword 'topics'"),
        ({"topics": "missing.json", "out": "o"}, "missing.json: "),
        ({"topics": "topics.json", "out": "o", "shard": "3/2"}, "shard"),
    ]
    for options, expected in cases:
        with pytest.raises(moot.MootError) as caught:
            moot.debate(**options, **model)
        assert expected in str(caught.value)
        assert "\n" not in str(caught.value)
    with pytest.raises(moot.ConfigError, match="no such moot command"):
        moot.call("debat")
    with pytest.raises(moot.ConfigError, match="keyword arguments only"):
        moot.debate("topics.json")
    assert scripted_server.requests == []
    assert not Path("o").exists()


def test_a_run_whose_items_failed_raises_with_its_result_and_a_rerun_resumes(
    tmp_path, monkeypatch, scripted_server
):
    monkeypatch.chdir(tmp_path)
    Path("topics.json").write_text('["Zoos?", "Cats?"]', encoding="utf-8")
    options = {
        "topics": "topics.json",
        "out": "debates",
        "arguments_per_stance": 1,
        "rounds": 0,
        "model": "openai/m",
        "api_base": scripted_server.url,
        "max_retries": 0,
    }
    scripted_server.add_fault(Fault("400", times=1, match="Cats"))
    with pytest.raises(moot.RunFailed) as caught:
        moot.debate(**options)
    failed = caught.value.result
    assert failed.status == "failed" and failed.exit_code == 1
    assert any("failed" in message for message in failed.messages)
    assert "Cats" in str(caught.value) or "1 of" in str(caught.value)
    done = moot.debate(**options)  # the fault is spent: the rest is done, nothing redone
    assert done.ok and (done.tallies[0].skipped, done.tallies[0].done) == (3, 1)
    assert {record["topic"] for record in done.records()} == {"Zoos?", "Cats?"}
    assert done.to_dataset().num_rows == len(done.records())


def test_a_recipe_runs_from_python_with_each_stage_result(tmp_path, scripted_server):
    (tmp_path / "topics.json").write_text('["Zoos?"]', encoding="utf-8")
    recipe = tmp_path / "loop.yaml"
    recipe.write_text(
        "stages:\n"
        "  debate:\n"
        "    command: debate\n"
        "    topics: topics.json\n"
        "    arguments-per-stance: 1\n"
        "    rounds: 0\n"
        "    model: openai/m\n"
        f"    api-base: {scripted_server.url}\n",
        encoding="utf-8",
    )
    result = moot.run(recipe, out=tmp_path / "run")
    assert result.ok and list(result.stages) == ["debate"]
    assert result.lines[0] == "stage debate: moot debate"  # what the command line says
    again = moot.run(recipe, out=tmp_path / "run")
    assert again.lines[0].startswith("stage debate: done before")
    assert result.stages["debate"].records()
    assert result.ledger.total().calls == len(scripted_server.requests) > 0
    assert result.outputs["report"].is_file()


def _slow_debates(tmp_path: Path, server: ScriptedServer) -> dict:
    """A debate run whose first replies take 0.2 s each: long enough to interrupt."""
    (tmp_path / "topics.json").write_text('["Zoos?", "Cats?", "Dogs?"]', encoding="utf-8")
    server.add_fault(Fault("hang", times=8, hang_seconds=0.2))
    return {
        "topics": tmp_path / "topics.json",
        "out": tmp_path / "debates",
        "arguments_per_stance": 1,
        "rounds": 1,
        "model": "openai/m",
        "api_base": server.url,
        "concurrency": 1,
    }


def _moot_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("moot ")]


def test_an_interrupted_call_in_a_running_loop_stops_its_command_and_resumes(
    tmp_path, scripted_server
):
    """A notebook's interrupt stops the command as Ctrl-C does: nothing runs on, all resumes."""
    options = _slow_debates(tmp_path, scripted_server)

    async def a_notebook_cell() -> None:
        moot.debate(**options)

    threading.Thread(target=_interrupt_at, args=(scripted_server, 3), daemon=True).start()
    loop = asyncio.new_event_loop()  # as Jupyter's: an interrupt is a KeyboardInterrupt there
    with pytest.raises(KeyboardInterrupt):  # (asyncio.run's first Ctrl-C only cancels its task)
        loop.run_until_complete(a_notebook_cell())
    loop.close()
    assert _moot_threads() == []  # the command stopped, its folder let go of
    done = moot.debate(**options)  # resumes: what finished is not asked for again
    assert done.ok and done.tallies[0].skipped >= 1


def _interrupt_at(server: ScriptedServer, requests: int) -> None:
    """Ctrl-C (a notebook's interrupt) once the server has had `requests` requests."""
    while len(server.requests) < requests:
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)


def test_a_cancelled_async_call_stops_its_command(tmp_path, scripted_server):
    options = _slow_debates(tmp_path, scripted_server)

    async def cancel_it() -> None:
        task = asyncio.create_task(moot.adebate(**options))
        while len(scripted_server.requests) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_it())
    assert _moot_threads() == []
    assert moot.debate(**options).ok


def test_a_config_file_gives_values_under_the_keywords(tmp_path, monkeypatch, scripted_server):
    monkeypatch.chdir(tmp_path)
    Path("topics.json").write_text('["Zoos?"]', encoding="utf-8")
    Path("debate.yaml").write_text(
        f"model: openai/m\napi-base: {scripted_server.url}\nrounds: 3\narguments-per-stance: 1\n",
        encoding="utf-8",
    )
    result = moot.debate(config="debate.yaml", topics="topics.json", out="d", rounds=0)
    assert result.ok and scripted_server.requests  # the file's model and server were used
    assert {r["rounds"] for r in result.records("debates")} == {0}  # the keyword won
    Path("bad.yaml").write_text("rouds: 2\n", encoding="utf-8")
    with pytest.raises(moot.InputError, match=r"bad.yaml: unknown option 'rouds'"):
        moot.debate(config="bad.yaml", topics="topics.json", out="d")


def test_a_refusal_names_no_key_the_process_knows(tmp_path, monkeypatch):
    """As the command line prints it: a notebook's output is shared as readily as a terminal's."""
    monkeypatch.setenv("MY_API_KEY", "sk-secret-123456789")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(moot.InputError) as caught:
        moot.debate(topics="sk-secret-123456789.json", out="d")
    assert str(caught.value) == "[redacted].json: file not found"
