"""Parsing and validating ``provider/model`` spec strings."""

from __future__ import annotations

import pytest

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, Role, parse_spec

VLLM = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("text", "api_base", "provider", "model", "transport"),
    [
        ("openai/x", None, "openai", "x", "openai"),
        ("openai/gpt-4o-mini", None, "openai", "gpt-4o-mini", "openai"),
        ("local/smollm2", None, "local", "smollm2", "embedded"),
        ("ollama_chat/llama3", None, "ollama_chat", "llama3", "litellm"),
        ("hosted_vllm/x", VLLM, "hosted_vllm", "x", "openai"),
        ("openai/llama3", "https://proxy.example/v1", "openai", "llama3", "openai"),
        ("  openai/x  ", None, "openai", "x", "openai"),
    ],
)
def test_accepts(
    text: str, api_base: str | None, provider: str, model: str, transport: str
) -> None:
    spec = parse_spec(text, api_base=api_base)
    assert (spec.provider, spec.model, spec.api_base) == (provider, model, api_base)
    assert spec.transport == transport
    assert spec.name == f"{provider}/{model}"


def test_model_name_may_contain_slashes() -> None:
    spec = parse_spec("hosted_vllm/meta-llama/Llama-3-8B", api_base=VLLM)
    assert spec.model == "meta-llama/Llama-3-8B"
    assert spec.name == "hosted_vllm/meta-llama/Llama-3-8B"


def test_options_are_applied_and_none_ignored() -> None:
    spec = parse_spec("openai/x", api_base=VLLM, timeout=3.0, max_concurrency=None)
    assert spec.timeout == 3.0
    assert spec.max_concurrency == ModelSpec("openai", "x").max_concurrency


@pytest.mark.parametrize(
    ("text", "api_base"),
    [
        ("gpt4", None),
        ("foo/bar", None),
        ("local/unknown", None),
        ("hosted_vllm/x", None),
        ("openai/", None),
        ("/x", None),
        ("local/smollm2", VLLM),
    ],
)
def test_rejects_naming_the_spec(text: str, api_base: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(text, api_base=api_base)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("bad", ["ftp://host/v1", "localhost:8000", "not a url", "http://"])
def test_rejects_bad_api_base_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("openai/x", api_base=bad)
    assert repr(bad) in str(info.value)


def test_a_bad_api_base_is_named_without_its_credentials() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("openai/x", api_base="htp://user:S3CRET@127.0.0.1:9/v1")
    assert "'htp://127.0.0.1:9/v1'" in str(info.value) and "S3CRET" not in str(info.value)


def test_bad_api_base_message_names_the_spec() -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec("openai/x", api_base="ftp://host/v1")
    assert "openai/x" in str(info.value)


def test_describe_never_includes_key_env_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    spec = parse_spec("openai/x", api_base=VLLM, api_key_env="MY_KEY", context_window=4096)
    described = Role("judge", spec, 0.2).describe()
    assert described == {
        "role": "judge",
        "spec": "openai/x",
        "api_base": VLLM,
        "context_window": 4096,
        "temperature": 0.2,
    }


def test_a_key_given_as_the_key_variable_is_refused_and_not_shown() -> None:
    """A careless `--api-key-env sk-...`: the message would otherwise print the key itself."""
    key = "sk-proj-abcdefghijklmnop"
    with pytest.raises(ConfigError) as caught:
        parse_spec("openai/gpt-4o-mini", api_key_env=key)
    assert key not in str(caught.value) and "not a key" in str(caught.value)
    assert parse_spec("openai/gpt-4o-mini", api_key_env="MY_KEY_2").api_key_env == "MY_KEY_2"
