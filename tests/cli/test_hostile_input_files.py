"""Input files no parser should choke on: lone surrogates, JSON nested 100,000 deep."""

from __future__ import annotations

from pathlib import Path

import pytest

from moot.core.retrieval.index import build_index
from moot.core.testing.scripted_server import Rule, ScriptedServer
from tests.cli.helpers import run_moot

DEEP = "[" * 100_000
LONE = '"\\ud800"'  # a JSON escape of half a UTF-16 pair: Python reads it, UTF-8 cannot hold it


def one_line_exit_2(result, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def model(server: ScriptedServer) -> list[object]:
    return ["--model", "openai/scripted", "--api-base", server.url, "--max-retries", 0]


@pytest.mark.parametrize("command", ["debate", "judge", "answer"])
def test_a_lone_surrogate_in_an_input_file_is_one_line_and_exit_2(tmp_path, command):
    path = tmp_path / "input.jsonl"
    if command == "debate":
        path = tmp_path / "topics.json"
        path.write_text(f'["Should zoos be banned?", {LONE}]')
        args = ["debate", "--topics", path]
        where = "index 1"
    elif command == "judge":
        path.write_text(f'{{"id": "d1", "motion": "Zoos", "speeches": [{{"text": {LONE}}}]}}\n')
        args = ["judge", "--debates", path]
        where = "line 1"
    else:
        path.write_text(
            '{"id": "1", "question": "Fine?"}\n' + f'{{"id": "2", "question": {LONE}}}\n'
        )
        args = ["answer", "--questions", path]
        where = "line 2"
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        if command == "judge":
            result = run_moot(*args, "--out", tmp_path / "out", "--judge", "openai/scripted",
                              "--api-base", server.url)  # fmt: skip
        else:
            result = run_moot(*args, "--out", tmp_path / "out", *model(server))
        assert server.requests == []
    one_line_exit_2(result, f"{path}, {where}: a lone surrogate (\\ud800)")
    assert not (tmp_path / "out").exists()


def test_deeply_nested_json_in_any_input_is_one_line_and_exit_2(tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(DEEP)
    config = tmp_path / "config.yaml"
    config.write_text(DEEP)
    good_topics = tmp_path / "good.json"
    good_topics.write_text('["Should zoos be banned?"]')
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        result = run_moot("debate", "--topics", topics, "--out", tmp_path / "a", *model(server))
        one_line_exit_2(result, str(topics), "nested too deeply")
        result = run_moot("debate", "--config", config)
        one_line_exit_2(result, str(config), "nested too deeply")
        # a run's claim, read on resume
        run = tmp_path / "run"
        (run / ".moot").mkdir(parents=True)
        (run / ".moot" / "run.json").write_text(DEEP)
        result = run_moot("debate", "--topics", good_topics, "--out", run, *model(server))
        one_line_exit_2(result, str(run / ".moot" / "run.json"), "nested too deeply")
        # an owner mark
        (run / ".moot" / "run.json").unlink()
        (run / ".moot" / "owner.json").write_text(DEEP)
        result = run_moot("debate", "--topics", good_topics, "--out", run, *model(server))
        one_line_exit_2(result, str(run / ".moot" / "owner.json"), "nested too deeply")
        # an index
        docs = tmp_path / "docs.jsonl"
        docs.write_text('{"id": "d1", "text": "Zoos protect species."}\n')
        build_index(docs, tmp_path / "index")
        (tmp_path / "index" / "index.json").write_text(DEEP)
        questions = tmp_path / "questions.jsonl"
        questions.write_text('{"id": "1", "question": "Zoos?"}\n')
        result = run_moot(
            "answer", "--questions", questions, "--out", tmp_path / "answers", "--mode", "rag",
            "--index", tmp_path / "index", *model(server),
        )  # fmt: skip
        one_line_exit_2(result, str(tmp_path / "index"), "nested too deeply")
        assert server.requests == []


def test_a_lone_surrogate_in_a_config_file_is_refused(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text('topics: "\\ud800"\n')
    result = run_moot("debate", "--config", config)
    one_line_exit_2(result, str(config), "lone surrogate")
