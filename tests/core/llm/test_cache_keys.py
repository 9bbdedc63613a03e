"""Request-cache keys are pinned: a key that changes invalidates every user's cache.

Each case puts a reply under the key an earlier version wrote (a literal digest, or for a local
model the identity it was built from) and asks for it at an endpoint where nothing listens: a
key built any other way misses, and the call fails instead of answering from the cache.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from moot.core.llm.cache import RequestCache, request_key
from moot.core.llm.models import ModelClient, RetryPolicy
from moot.core.llm.spec import Role, parse_spec

DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing answers
DEAD_TOO = "http://127.0.0.1:7/v1"
HELLO = [{"role": "user", "content": "hello"}]
REPLY = {"text": "cached", "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": 1}
FORMAT = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}

# spec, api_base, request parameters, the key moot has always written for them
PINNED = [
    (
        "openai/x",
        DEAD,
        {},
        "6b387381237d37c03da5cec80ee6654cc553ed01bb2f9fcac1bb584793765c33",
    ),
    (
        "hosted_vllm/llama",
        DEAD,
        {"max_tokens": 8, "seed": 3, "stop": ["\n"]},
        "8d947d4cebf86eaa86290282dd9671bc1dc02499513d4c8aef9fc9b2ab212cd6",
    ),
    (
        "custom_openai/x",  # litellm
        DEAD,
        {"response_format": FORMAT},
        "6bd88bf8b6f36eb3bcef6963d91e2c878ed8838df1343a0fc7e225a3cd9a1235",
    ),
    (
        "openai/x",  # several endpoints: the router
        f"{DEAD},{DEAD_TOO}",
        {"max_tokens": 8},
        "36f34e302f9c3799d3bfc5a086424204ab44c588d2826bac6fd9098681dc8ec8",
    ),
]


def ask(client: ModelClient, role: Role, params: dict) -> str:
    reply = asyncio.run(client.complete(role, HELLO, stage="s", **params))
    assert reply.cached
    return reply.text


@pytest.mark.parametrize(("text", "api_base", "params", "key"), PINNED)
def test_a_remote_models_key_is_unchanged(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    text: str,
    api_base: str,
    params: dict,
    key: str,
) -> None:
    monkeypatch.setenv("MOOT_API_KEY", "sk-not-part-of-the-key")
    cache = RequestCache(tmp_path / "requests.sqlite")
    cache.put(key, REPLY)
    client = ModelClient(cache=cache, retry=RetryPolicy(attempts=1))
    role = Role("judge", parse_spec(text, api_base=api_base, timeout=2), 0.5)
    assert ask(client, role, params) == "cached"
    cache.close()


def test_a_local_models_key_is_its_weights_template_and_request(tmp_path: Path) -> None:
    from tests.tiny import tiny_llama

    folder = tiny_llama(tmp_path / "tiny", ["zoos", "are"])
    weights = folder / "model.safetensors"
    stat = weights.stat()
    identity = f"hf/{folder.resolve()}|model.safetensors:{stat.st_size}:{stat.st_mtime_ns}"
    cache = RequestCache(tmp_path / "requests.sqlite")
    for template in (None, "{{ messages[0]['content'] }}"):
        key = request_key(
            {
                "model": identity + (template or ""),
                "api_base": None,
                "messages": HELLO,
                "params": {"temperature": 0.5, "max_tokens": 4},
            }
        )
        cache.put(key, REPLY)
        spec = parse_spec(f"hf/{folder}", chat_template=template)
        client = ModelClient(cache=cache)
        assert ask(client, Role("judge", spec, 0.5), {"max_tokens": 4}) == "cached"
    cache.close()
