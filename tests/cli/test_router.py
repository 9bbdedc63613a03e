"""``--router FILE``: a litellm Router config names a model's endpoints, through real HTTP.

Two scripted servers, each wanting its own key, are the two deployments of one model group in a
Router config whose keys are ``os.environ/NAME`` references. One `moot answer` run spreads its
questions over both, each with its key; `moot models check` checks each in turn (the file given
in ``--config``); a file moot cannot honour is refused in one line naming the file and the key.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import moot_env, read_jsonl, run_moot

pytestmark = pytest.mark.subprocess

KEYS = {"ROUTER_KEY_A": "rk-a-SECRET-1", "ROUTER_KEY_B": "rk-b-SECRET-2"}
MODEL = "openai/llama"  # the group's name, the spec moot is given


def router_config(*urls: str, **settings: object) -> dict:
    """A Router config with one deployment per URL, keyed by ROUTER_KEY_A, ROUTER_KEY_B ..."""
    deployments = [
        {
            "model_name": MODEL,
            "litellm_params": {
                "model": "openai/scripted",  # what the servers are asked for
                "api_base": url,
                "api_key": f"os.environ/{var}",
            },
        }
        for url, var in zip(urls, KEYS, strict=False)
    ]
    return {"model_list": deployments, "routing_strategy": "simple-shuffle", **settings}


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("router")
    questions = tmp / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Is question {i} fair?"} for i in range(12)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = moot_env(**KEYS)
    reply = [Rule(".", "Fine.")]
    with (
        ScriptedServer(rules=reply, api_key=KEYS["ROUTER_KEY_A"], latency=0.02) as a,
        ScriptedServer(rules=reply, api_key=KEYS["ROUTER_KEY_B"], latency=0.02) as b,
    ):
        router = write(tmp / "router.yaml", router_config(a.url, b.url, cooldown_time=5))
        answered = run_moot(
            "answer", "--questions", questions, "--out", tmp / "out", "--model", MODEL,
            "--router", router, "--concurrency", 4, "--no-cache", env=env,
        )  # fmt: skip
        served = {a.url: list(a.requests), b.url: list(b.requests)}
        a.clear_log()
        b.clear_log()
        config = write(tmp / "check.yaml", {"router": str(router)})
        checked = run_moot("models", "check", MODEL, "--config", config, env=env)
        check_served = [len(a.requests), len(b.requests)]
    yield {
        "answered": answered,
        "checked": checked,
        "check_served": check_served,
        "served": served,
        "out": tmp / "out",
        "router": router,
    }


def test_the_questions_spread_over_the_deployments_each_with_its_key(run):
    answered = run["answered"]
    assert answered.returncode == 0, answered.stderr
    answers = read_jsonl(run["out"] / "answers.jsonl")
    assert len(answers) == 12 and {a["answer"] for a in answers} == {"Fine."}
    for url, requests in run["served"].items():
        assert len(requests) >= 2, f"{url} took {len(requests)} requests: not spread"
        # the deployment's own key (the server refuses any other) and its own model name
        assert all(r.authorized and r.outcome == "ok" for r in requests)
        assert {r.body["model"] for r in requests} == {"scripted"}
        # sent by moot's own OpenAI transport, the Router asked only where: its body (model
        # first, `OpenAI.body`), not litellm's (messages first)
        assert {tuple(r.body)[:2] for r in requests} == {("model", "messages")}


def test_the_ledger_counts_the_calls_of_each_deployment(run):
    summary = json.loads((run["out"] / "summary.json").read_text())
    served = {url: len(requests) for url, requests in run["served"].items()}
    assert summary["ledger"]["total"]["endpoints"] == served


def test_models_check_takes_the_router_from_config_and_checks_each_deployment(run):
    checked = run["checked"]
    assert checked.returncode == 0, checked.stderr
    oks = [line.split(": ok")[0] for line in checked.stdout.splitlines() if ": ok" in line]
    assert oks == [f"{MODEL} at {url}" for url in run["served"]]
    assert run["check_served"] == [1, 1]


def test_no_key_reaches_an_output(run):
    texts = [run[name].stdout + run[name].stderr for name in ("answered", "checked")]
    texts += [p.read_text() for p in run["out"].rglob("*") if p.is_file()]
    assert not any(key in text for key in KEYS.values() for text in texts)


URL = "http://127.0.0.1:9/v1"


def test_a_router_file_moot_cannot_honour_is_one_line_exit_2(tmp_path):
    # every other refusal: tests/core/llm/test_router_file.py
    path = write(tmp_path / "router.yaml", {**router_config(URL), "num_retries": 3})
    result = run_moot("models", "check", MODEL, "--router", path, env=moot_env(**KEYS))
    assert result.returncode == 2
    assert result.stderr == (
        f"moot: error: {path}: num_retries: not accepted: moot retries each call itself "
        "(--max-retries): give 0 or leave it out\n"
    )


def test_a_dry_run_says_the_keys_come_from_the_file(tmp_path):
    path = write(tmp_path / "router.yaml", router_config(URL, "http://127.0.0.1:9/v2"))
    result = run_moot("models", "check", MODEL, "--router", path, "--dry-run", env=moot_env(**KEYS))
    assert result.returncode == 0, result.stderr
    assert f"key: {MODEL}: the keys in {path} (read, set)" in result.stdout
    assert not any(key in result.stdout + result.stderr for key in KEYS.values())


def test_router_with_api_base_is_refused(tmp_path):
    path = write(tmp_path / "router.yaml", router_config(URL))
    result = run_moot("models", "check", MODEL, "--router", path, "--api-base", URL)
    assert result.returncode == 2
    refusal = f"--router {path} names the endpoints: give no --api-base"
    assert result.stderr == f"moot: error: {refusal}\n"


def test_the_deployments_rpm_and_tpm_are_moots_limit_for_the_model(tmp_path):
    """Each deployment's ``rpm``/``tpm`` count, together, as the model's ``--rpm``/``--tpm``
    (moot waits for them; litellm's Router would refuse a request over one with a 429)."""
    config = router_config(URL, "http://127.0.0.1:9/v2")
    for deployment, rpm in zip(config["model_list"], (2, 4), strict=True):
        deployment["litellm_params"]["rpm"] = rpm
    path = write(tmp_path / "router.yaml", config)
    questions = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Is question {i} fair?"} for i in range(12)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["answer", "--questions", questions, "--out", tmp_path / "out", "--model", MODEL]
    args += ["--router", path, "--dry-run"]
    for flags, minutes in (([], 2.0), (["--rpm", 3], 4.0), (["--rpm", 12], 2.0)):
        result = run_moot(*args, *flags, env=moot_env(**KEYS))
        assert result.returncode == 0, result.stderr
        # 12 calls at 2 + 4 a minute; a lower --rpm holds instead
        assert f"limits: {MODEL} needs about {minutes:.1f} min" in result.stdout, flags


def test_deployments_of_another_provider_are_sent_by_litellms_router(tmp_path):
    """A provider moot's OpenAI transport does not speak (Anthropic's ``/v1/messages``): the
    Router sends the requests itself, spread over both deployments, each with its key."""
    questions = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Is question {i} fair?"} for i in range(8)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    reply = [Rule(".", "Fine.")]
    with (
        ScriptedServer(rules=reply, api_key=KEYS["ROUTER_KEY_A"]) as a,
        ScriptedServer(rules=reply, api_key=KEYS["ROUTER_KEY_B"]) as b,
    ):
        origins = [s.url.removesuffix("/v1") for s in (a, b)]  # litellm appends /v1/messages
        config = router_config(*origins)
        for deployment in config["model_list"]:
            deployment["model_name"] = deployment["litellm_params"]["model"] = "anthropic/claude-x"
        router = write(tmp_path / "router.yaml", config)
        result = run_moot(
            "answer", "--questions", questions, "--out", tmp_path / "out", "--model",
            "anthropic/claude-x", "--router", router, "--concurrency", 4, "--no-cache",
            env=moot_env(**KEYS),
        )  # fmt: skip
        served = {url: list(s.requests) for url, s in zip(origins, (a, b), strict=True)}
    assert result.returncode == 0, result.stderr
    assert {r["answer"] for r in read_jsonl(tmp_path / "out" / "answers.jsonl")} == {"Fine."}
    for requests in served.values():
        assert requests and {(r.path, r.authorized, r.outcome) for r in requests} == {
            ("/v1/messages", True, "ok")
        }
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ledger"]["total"]["endpoints"] == {u: len(r) for u, r in served.items()}
