"""The litellm transport takes the same retry path as the OpenAI one (real HTTP via litellm)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from moot.core import ModelCallError, ModelClient, RetryPolicy, Role, parse_spec
from moot.core.llm.transports.litellm import LiteLLM
from moot.testing import Fault, ScriptedServer

FAST = RetryPolicy(initial_wait=0.01, max_wait=0.02)
HELLO = [{"role": "user", "content": "hello"}]


def test_litellm_provider_honours_retry_after_and_never_retries_a_400(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-litellm-SECRET")
    with ScriptedServer() as server:
        # the deadline bounds litellm's own work too: its first call can take seconds
        spec = parse_spec("custom_openai/x", api_base=server.url, api_key_env="MY_KEY", timeout=60)
        assert spec.transport == "litellm"
        client = ModelClient(retry=FAST)
        role = Role("judge", spec)
        server.add_fault(Fault(kind="429", times=1, retry_after=0.3))
        start = time.perf_counter()
        reply = asyncio.run(client.complete(role, HELLO, stage="s", max_tokens=8, seed=1))
        assert reply.text and reply.retries == 1
        assert time.perf_counter() - start >= 0.3

        server.clear_log()
        server.add_fault(Fault(kind="400", times=1))
        try:
            asyncio.run(client.complete(role, HELLO, stage="s", max_tokens=8, seed=2))
        except ModelCallError as exc:
            assert exc.status == 400 and not exc.retryable
            assert "SECRET" not in str(exc)
        else:
            raise AssertionError("a 400 must fail")
        assert len(server.requests) == 1
        assert client.ledger.to_json()["total"]["failures"] == 1


def test_litellm_provider_keeps_the_rate_limit_headers_and_moot_follows_them():
    """litellm keeps a response's headers in its hidden params: the transport reads the
    rate-limit ones there (and only those), and moot paces the model by them."""

    async def run(client: ModelClient, role: Role) -> tuple[Any, float]:
        await client.complete(role, HELLO, stage="s", max_tokens=8)  # its headers: the limit
        started = time.monotonic()
        asks = [[{"role": "user", "content": f"question {n}"}] for n in range(20)]
        await asyncio.gather(*(client.complete(role, m, stage="s", max_tokens=8) for m in asks))
        seconds = time.monotonic() - started
        await asyncio.sleep(0.5)  # the bucket full again
        return await LiteLLM(role.spec, None).send(HELLO, {"max_tokens": 8}), seconds

    with ScriptedServer(rpm=10, limit_window=0.5) as server:
        spec = parse_spec("custom_openai/x", api_base=server.url, timeout=60)
        client = ModelClient(retry=RetryPolicy(attempts=20, initial_wait=0.05, max_wait=0.5))
        reply, seconds = asyncio.run(run(client, Role("asker", spec)))
        refused = sum(r.outcome == "rate_limited" for r in server.requests)
    assert reply.limits["x-ratelimit-limit-requests"] == "10"
    assert reply.limits["x-ratelimit-remaining-requests"] == "9"
    assert all(name.startswith("x-ratelimit-") for name in reply.limits)
    # the first reply's headers tell moot the limit: 10 a half second; the 20 take about a
    # second; without them 11 of the 20 are refused at once. A few may be on a loaded machine,
    # where litellm's own work delays some requests and bunches them.
    assert seconds > 0.4 and refused <= 5, (seconds, refused)
