"""``--router FILE``: what a litellm Router config may hold, and how a refusal reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from moot.core.errors import InputError
from moot.core.llm.router_file import load_router
from moot.core.llm.spec import key_needs, parse_spec

MODEL = "openai/llama"


def config(**settings: object) -> dict:
    deployments = [
        {
            "model_name": MODEL,
            "litellm_params": {"model": "openai/m", "api_base": url, "api_key": "os.environ/RK"},
        }
        for url in ("http://a:1/v1", "http://b:1/v1")
    ]
    return {"model_list": deployments, **settings}


def write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "router.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_group_keeps_its_deployments_keys_resolved_and_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("RK", "rk-SECRET")
    other = {
        "model_name": "openai/other",
        "litellm_params": {"model": "x/y", "api_base": "http://c"},
    }
    data = config(routing_strategy="least-busy", cooldown_time=5, allowed_fails=0, num_retries=0)
    data["model_list"].append(other)
    group = load_router(write(tmp_path, data), MODEL)
    assert group.api_bases == ("http://a:1/v1", "http://b:1/v1")
    assert [d["api_key"] for d in group.deployments] == ["rk-SECRET"] * 2
    assert group.secrets() == ["rk-SECRET"] * 2
    assert group.settings == {
        "routing_strategy": "least-busy",
        "cooldown_time": 5.0,
        "allowed_fails": 0,
    }
    assert group.only(1).api_bases == ("http://b:1/v1",)
    assert group == load_router(write(tmp_path, data), MODEL)  # one Router for every role
    spec = parse_spec(MODEL, api_base=list(group.api_bases), router=group)
    assert spec.describe()["router"] == str(tmp_path / "router.yaml")  # in manifests' roles
    assert "rk-SECRET" not in repr(spec) + key_needs(spec)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"num_retries": 3}, "num_retries: not accepted: moot retries each call itself"),
        ({"retry_after": 5}, "retry_after: not accepted: moot's retry loop waits itself"),
        ({"fallbacks": [{MODEL: ["x/y"]}]}, "fallbacks: not accepted: another model would answer"),
        ({"cache_responses": True}, "cache_responses: not accepted: moot's request cache"),
        ({"redis_host": "cache.example"}, "redis_host: unknown key"),
        ({"routing_strategy": "round-robin"}, "routing_strategy: input should be 'simple-shuffle'"),
        ({"cooldown_time": 0}, "cooldown_time: input should be greater than 0"),
        ({"allowed_fails": -1}, "allowed_fails: input should be greater than or equal to 0"),
        ({"deployment": {"timeout": 5}}, "litellm_params.timeout: not accepted: moot's --timeout"),
        ({"deployment": {"max_retries": 2}}, "litellm_params.max_retries: not accepted: moot"),
        ({"deployment": {"max_parallel_requests": 4}}, "max_parallel_requests: not accepted"),
        ({"deployment": {"foo": 1}}, "model_list.0.litellm_params.foo: unknown key"),
        ({"deployment": {"api_base": "ftp://x"}}, "invalid api_base 'ftp://x' for 'openai/llama'"),
        ({"deployment": {"api_base": "http://b:1/v1"}}, "api_base 'http://b:1/v1' is given twice"),
        ({"deployment": {"api_key": "os.environ/UNSET_RK"}}, "api_key: UNSET_RK is not set"),
        ({"model_list": [{"model_name": MODEL}]}, "model_list.0.litellm_params: missing"),
        ({"model_list": []}, "model_list: list should have at least 1 item"),
        ({"model": "openai/other"}, "no deployment has model_name 'openai/other' (it has: "),
    ],
)
def test_what_moot_cannot_honour_is_refused_naming_the_key(tmp_path, monkeypatch, change, problem):
    monkeypatch.setenv("RK", "rk-SECRET")
    data = config()
    data["model_list"][0]["litellm_params"].update(change.pop("deployment", {}))
    model = change.pop("model", MODEL)
    path = write(tmp_path, {**data, **change})
    with pytest.raises(InputError) as raised:
        load_router(path, model)
    assert str(raised.value).startswith(f"{path}: ") and problem in str(raised.value)
    assert "rk-SECRET" not in str(raised.value)


@pytest.mark.parametrize("text", ["[1, 2]", "model_list: [", ""])
def test_a_file_that_is_no_mapping_is_refused(tmp_path, text):
    path = tmp_path / "router.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"router.yaml(, line 1)?: "):
        load_router(path, MODEL)
