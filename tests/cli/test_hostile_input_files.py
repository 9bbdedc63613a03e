"""Input files no parser should choke on: lone surrogates, JSON nested 100,000 deep."""

from __future__ import annotations

import json
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


def test_a_repeated_key_in_any_file_moot_reads_is_one_line_and_exit_2(tmp_path: Path):
    """A key given twice (which YAML and json keep the last of, silently) is refused wherever moot
    reads YAML or JSON: a price file (a priced model made free), --config, a router file, an SFT
    config, a JSONL input; each one line naming the file, the line or record, and the key."""
    files = {
        "prices.json": '{\n "openai/scripted": {"input": 2, "output": 8},\n'
        ' "openai/scripted": {"input": 0, "output": 0}\n}\n',
        "config.yaml": "rounds: 2\ntopics: t.json\nrounds: 3\n",
        "router.yaml": "model_list:\n- model_name: openai/scripted\n"
        "  litellm_params: {model: openai/x}\n  model_name: openai/other\n",
        "sft.yaml": "data:\n  train: a.jsonl\nlora:\n  r: 4\n  r: 64\n",
        "questions.jsonl": '{"id": "1", "question": "Zoos?"}\n'
        '{"id": "2", "question": "A?", "question": "B?"}\n',
        "topics.json": '["Should zoos be banned?"]',
    }
    path = {name: tmp_path / name for name in files}
    for name, text in files.items():
        path[name].write_text(text)
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        debate = ["debate", "--topics", path["topics.json"], "--out", tmp_path / "out"]
        cases = {
            "prices.json, line 3: cannot read prices: key 'openai/scripted' repeated": [
                *debate, *model(server), "--prices", path["prices.json"], "--dry-run"
            ],
            "config.yaml, line 3: cannot read config: key 'rounds' repeated": [
                "debate", "--config", path["config.yaml"], "--dry-run"
            ],
            "router.yaml, line 4: cannot read router config: key 'model_name' repeated": [
                *debate, "--model", "openai/scripted", "--router", path["router.yaml"], "--dry-run"
            ],
            "sft.yaml: not valid YAML: line 5: key 'r' repeated": [
                "train", "sft", "--config", path["sft.yaml"]
            ],
            "questions.jsonl, line 2: key 'question' repeated": [
                "answer", "--questions", path["questions.jsonl"], "--out", tmp_path / "answers",
                *model(server), "--dry-run",
            ],
        }  # fmt: skip
        for line, args in cases.items():
            one_line_exit_2(run_moot(*args), f"moot: error: {tmp_path}/{line}")
        assert server.requests == []


def test_every_json_number_form_is_a_number_in_a_price_file(tmp_path: Path):
    """`1e-05` is what json.dumps(0.00001) writes; YAML 1.1 read it (and `2e-1`) as text."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/scripted": {"input": 2e-1, "output": 0.00001}}))
    assert "1e-05" in prices.read_text() and "0.2" in prices.read_text()
    prices.write_text('{"openai/scripted": {"input": 2e-1, "output": 1E-05, "cached_input": 1e1}}')
    topics = tmp_path / "topics.json"
    topics.write_text('["Should zoos be banned?"]')
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        result = run_moot(
            "debate", "--topics", topics, "--out", tmp_path / "out", *model(server),
            "--prices", prices, "--budget", "1", "--dry-run",
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "budget: the estimate fits within --budget $1.0000" in result.stdout
