"""Secrets never reach what moot writes (issue 29, items 12 and 13), through real processes.

A recipe's endpoint with a password, and a key a server echoes in its replies under a variable
named like no key (``VLLM_KEY``): each process's every file, the request cache and the page
`moot view` writes are searched for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import moot_env, read_jsonl, run_moot, write_topics

pytestmark = pytest.mark.subprocess

PASSWORD = "pw-in-a-recipe-0123"
KEY = "vllm-echoed-key-0123456789"


def files_holding(secret: str, *folders: Path) -> list[str]:
    """The files under `folders` (SQLite's too) whose bytes hold `secret`."""
    return [
        str(path)
        for folder in folders
        for path in folder.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]


def test_a_recipe_s_endpoint_credentials_reach_no_record(tmp_path):
    """Item 12: the run's manifest, claims and page go through the one scrubber."""
    test = tmp_path / "test.jsonl"
    sides = {"Affirmative": {"arguments": ["Harm"]}, "Negative": {"arguments": ["Funds"]}}
    topic = {"topic": "Should zoos be banned?", **sides}
    test.write_text(json.dumps(topic) + "\n", encoding="utf-8")
    rules = [Rule("supporting versus opposing proportion", "100 0\nAll on one side.")]
    out = tmp_path / "out"
    with ScriptedServer(rules=rules) as server:
        shown, url = server.url, server.url.replace("http://", f"http://moot:{PASSWORD}@")
        remote = {"api-base": url, "max-retries": 0}
        stages = {
            "answers": {"command": "generate", "dataset": str(test), "model": "openai/a", **remote},
            "judged": {"command": "eval controllability", "responses": "{answers}",
                       "judge": "openai/judge", **remote},
        }  # fmt: skip
        recipe = tmp_path / "loop.yaml"
        recipe.write_text(yaml.safe_dump({"stages": stages}), encoding="utf-8")
        env = moot_env(MOOT_CACHE_DIR=str(tmp_path / "cache"))
        result = run_moot("run", recipe, "--out", out, env=env)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["stages"]["judged"]["options"]["api-base"] == shown  # as messages show
    assert (out / "view.html").is_file() and (out / "judged" / ".moot" / "eval.json").is_file()
    assert files_holding(PASSWORD, out) == []
    assert PASSWORD not in result.stdout + result.stderr


def test_a_key_the_server_echoes_reaches_no_file_whatever_its_variable_s_name(tmp_path):
    """Item 13: every reply is cleaned of the keys moot sent where it enters."""
    arguments = json.dumps({"arguments": [f"Argument {{n}} with {KEY} inside."]})
    rules = [Rule("list your arguments", arguments), Rule(".", f"My key is Bearer {KEY}.")]
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    out, cache, page = tmp_path / "out", tmp_path / "cache", tmp_path / "page.html"
    env = moot_env(VLLM_KEY=KEY, MOOT_CACHE_DIR=str(cache))
    with ScriptedServer(rules=rules, api_key=KEY) as server:
        result = run_moot(
            "debate", "--topics", topics, "--out", out, "--model", "openai/scripted",
            "--api-base", server.url, "--api-key-env", "VLLM_KEY", "--arguments-per-stance", 1,
            "--rounds", 1, env=env,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert all(r.authorized for r in server.requests)  # the key was sent, and echoed
    shown = run_moot("view", out, "--out", page, env=env)  # a process that sent no key
    assert shown.returncode == 0, shown.stderr
    debates = read_jsonl(out / "debates.jsonl")
    assert debates and all("[redacted]" in json.dumps(d) for d in debates)
    assert files_holding(KEY, out, cache, tmp_path) == []
