"""Input files no parser should choke on: lone surrogates, JSON nested 100,000 deep, archives
that unpack without bound, CSV fields past the csv module's limit, FIFOs."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from moot.core.retrieval.index import build_index
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import run_moot

pytestmark = pytest.mark.subprocess

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


def test_readers_refuse_what_would_expand_without_bound_or_never_end(tmp_path: Path):
    """Issue 29, item 15: one line, exit 2, in seconds, and not one request."""
    packed = tmp_path / "topics"
    packed.mkdir()
    # 1 KiB of gzip holding 256 KiB (datasets unpacked a 1 MB one into 8 GB of memory, and died)
    with gzip.open(packed / "topics.jsonl.gz", "wb") as f:
        f.write(b'{"topic": "' + b"a" * 2**18 + b'"}\n')
    wide = tmp_path / "topics.csv"
    wide.write_text('topic\n"' + "a" * 200_000 + '"\n', encoding="utf-8")
    config, router = tmp_path / "config.yaml", tmp_path / "router.yaml"
    os.mkfifo(config)  # reading either would wait for a writer, for ever
    os.mkfifo(router)
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": "Zoos?"}) + "\n", encoding="utf-8")
    bomb, loop = tmp_path / "bomb.yaml", tmp_path / "loop.yaml"  # a billion values; itself
    levels = [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    bomb.write_text("\n".join(['a0: &a0 "lol"', *levels]) + "\n")
    loop.write_text("stages:\n  s: &s\n    command: debate\n    topics: *s\n")
    with ScriptedServer(rules=[Rule(pattern=".", reply="Fine.")]) as server:
        cases = [
            (["debate", "--config", bomb], [f"{bomb}: cannot read config: its aliases expand"]),
            (["run", loop], [f"{loop}: cannot read recipe: a value that holds itself"]),
            (["debate", "--topics", packed, *model(server), "--dry-run"],
             [f"{packed / 'topics.jsonl.gz'}: a compressed file"]),
            (["debate", "--topics", wide, *model(server)],
             [f"{wide}, line 2: unreadable CSV: field larger than field limit"]),
            (["debate", "--config", config], [f"--config {config}: not a regular file"]),
            (["answer", "--questions", questions, "--model", "openai/scripted", "--router",
              router], [f"--router {router}: not a regular file"]),
        ]  # fmt: skip
        for args, words in cases:
            result = run_moot(*args, "--out", tmp_path / "out", timeout=60)
            one_line_exit_2(result, *words)
            assert not (tmp_path / "out").exists()
        assert server.requests == []


def test_every_file_moot_writes_reads_back_whatever_characters_a_model_returned(tmp_path: Path):
    """Issue 29, item 15: JSON leaves U+0085, U+2028 and U+2029 raw in a string, and
    `str.splitlines` ends a line at each: a reply holding one cut its record in two. An escaped
    lone surrogate in a reply's JSON crashed the first write of its record."""
    odd = "a\u2028b\u2029c\x85d"
    arguments = '{"arguments": ["Argument {n} a\\u2028b\\u2029c\\u0085d \\udfff."]}'
    rules = [Rule(pattern="list your arguments", reply=arguments), Rule(".", f"Turn {odd}.")]
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps(["Should zoos be banned?"]), encoding="utf-8")
    out = tmp_path / "debates"
    with ScriptedServer(rules=rules) as server:
        made = run_moot("debate", "--topics", topics, "--out", out, *model(server),
                        "--arguments-per-stance", 1, "--rounds", 1, "--no-cache")  # fmt: skip
        assert made.returncode == 0, made.stderr
        assert "\ufffd." in (out / "debates.jsonl").read_text(encoding="utf-8")  # the surrogate
        judged = run_moot("judge", "--debates", out / "debates.jsonl", "--out",
                          tmp_path / "judged", "--judge", "openai/scripted",
                          "--api-base", server.url, "--dry-run")  # fmt: skip
        assert judged.returncode == 0, judged.stderr
        assert re.search(r"judgments +2 +0 +2", judged.stdout), judged.stdout  # both, whole
        # an index whose chunks hold them, read back by a search
        docs = tmp_path / "docs.jsonl"
        docs.write_text(json.dumps({"id": "d1", "text": f"Zoos {odd} protect."}) + "\n")
        build_index(docs, tmp_path / "index")
        questions = tmp_path / "questions.jsonl"
        questions.write_text(json.dumps({"id": "1", "question": "Zoos?"}) + "\n")
        answered = run_moot("answer", "--questions", questions, "--out", tmp_path / "answers",
                            "--mode", "rag", "--index", tmp_path / "index", *model(server),
                            "--dry-run")  # fmt: skip
        assert answered.returncode == 0, answered.stderr
