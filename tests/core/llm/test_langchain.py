from __future__ import annotations

import pytest

from moot.core import chat_model
from moot.core.errors import ConfigError
from moot.core.llm.spec import parse_spec
from moot.testing import Rule, ScriptedServer

SECRET = "sk-test-LANGCHAIN42"


def test_a_spec_becomes_a_langchain_chat_model_on_the_same_server(monkeypatch):
    monkeypatch.setenv("MOOT_TEST_KEY", SECRET)
    rules = [Rule("uniforms", "uniforms level the field")]
    with ScriptedServer(api_key=SECRET, rules=rules) as server:
        spec = parse_spec("openai/scripted", api_base=server.url, api_key_env="MOOT_TEST_KEY")
        model = chat_model(spec, temperature=0.0, max_tokens=16)
        reply = model.invoke("Give one argument for school uniforms.")
        requests = server.requests
    assert reply.content == "uniforms level the field"
    assert len(requests) == 1 and requests[0].authorized
    assert requests[0].body["model"] == "scripted"
    body = requests[0].body
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 16
    assert SECRET not in repr(model)


def test_a_spec_it_cannot_serve_is_refused():
    with pytest.raises(ConfigError, match="one endpoint"):
        chat_model(parse_spec("anthropic/claude-x"))
    many = "http://127.0.0.1:1/v1,http://127.0.0.1:2/v1"
    with pytest.raises(ConfigError, match="one endpoint"):
        chat_model(parse_spec("openai/m", api_base=many))
