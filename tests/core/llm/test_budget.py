"""`ModelClient`'s budget and cached-input pricing, against the real scripted server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from moot.core.errors import BudgetReached, ConfigError
from moot.core.llm.cache import RequestCache
from moot.core.llm.models import ModelClient
from moot.core.llm.prices import Prices, load_prices
from moot.core.llm.spec import Role, parse_spec
from moot.core.llm.tokens import count_message_tokens
from moot.testing import ScriptedServer

# USD per million tokens: a prompt token costs $0.001, a completion token $0.002
PRICES = {"openai/scripted": {"input": 1000, "output": 2000, "cached_input": 100}}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(cached_prompt_tokens=8) as running:
        yield running


def prices(tmp_path: Path) -> Prices:
    file = tmp_path / "prices.json"
    file.write_text(json.dumps(PRICES))
    return load_prices(file)


def ask(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Give argument number {n} for school uniforms."}]


def chat_requests(server: ScriptedServer) -> int:
    return sum(1 for r in server.requests if r.path == "/v1/chat/completions")


def test_concurrent_calls_never_pass_the_budget_and_refused_calls_are_not_sent(
    server: ScriptedServer, tmp_path: Path
) -> None:
    role = Role("debater_a", parse_spec("openai/scripted", api_base=server.url))
    worst = (count_message_tokens(ask(10)) * 1000 + 20 * 2000) / 1e6  # each call's reservation
    budget = 4.5 * worst
    client = ModelClient(
        cache=RequestCache(tmp_path / "cache.sqlite"), prices=prices(tmp_path), budget=budget
    )
    client.prepare(role.spec)

    async def run_all() -> list[object]:
        calls = [client.complete(role, ask(n), stage="s", max_tokens=20) for n in range(10, 22)]
        return await asyncio.gather(*calls, return_exceptions=True)

    results = asyncio.run(run_all())
    refused = [r for r in results if isinstance(r, BudgetReached)]
    answered = [r for r in results if not isinstance(r, BaseException)]
    assert len(answered) == 4 and len(refused) == 8  # 12 at once: four reservations fit
    spent = client.ledger.spent()
    assert spent is not None and 0 < spent <= budget
    assert chat_requests(server) == 4 == client.ledger.total().calls  # refused: never sent
    assert str(refused[0]) == f"budget reached: spent ${refused[0].spent:.4f} of ${budget:.4f}"

    # once refused, no paid call starts, even one that would fit; a cache hit is free and served
    with pytest.raises(BudgetReached):
        asyncio.run(
            client.complete(role, [{"role": "user", "content": "Hi"}], stage="s", max_tokens=1)
        )
    again = asyncio.run(client.complete(role, ask(10), stage="s", max_tokens=20))
    assert again.cached and chat_requests(server) == 4


def test_cached_prompt_tokens_are_read_counted_and_priced_at_the_cached_rate(
    server: ScriptedServer, tmp_path: Path
) -> None:
    role = Role("judge", parse_spec("openai/scripted", api_base=server.url))
    client = ModelClient(prices=prices(tmp_path))
    reply = asyncio.run(client.complete(role, ask(1), stage="verdict", max_tokens=20))
    assert reply.cached_prompt_tokens == 8 < reply.prompt_tokens
    usage = client.ledger.total()
    assert usage.cached_prompt_tokens == 8
    expected = (reply.prompt_tokens - 8) * 1000 + 8 * 100 + reply.completion_tokens * 2000
    assert usage.cost_usd == pytest.approx(expected / 1e6)


def test_a_call_without_max_tokens_reserves_what_the_context_window_leaves(
    server: ScriptedServer, tmp_path: Path
) -> None:
    spec = parse_spec("openai/scripted", api_base=server.url, context_window=1000)
    used = count_message_tokens(ask(1))
    worst = (used * 1000 + (1000 - used) * 2000) / 1e6  # the reply may fill the window
    client = ModelClient(prices=prices(tmp_path), budget=worst * 0.99)
    with pytest.raises(BudgetReached):
        asyncio.run(client.complete(Role("judge", spec), ask(1), stage="verdict"))
    assert chat_requests(server) == 0

    unbounded = parse_spec("openai/scripted", api_base=server.url)
    client = ModelClient(prices=prices(tmp_path), budget=100.0)
    with pytest.raises(ConfigError, match="no max_tokens .* give --context-window"):
        asyncio.run(client.complete(Role("judge", unbounded), ask(1), stage="verdict"))
    assert chat_requests(server) == 0


def test_an_unpriced_model_with_a_budget_is_refused_before_any_call(
    server: ScriptedServer,
) -> None:
    spec = parse_spec("openai/scripted", api_base=server.url)
    with pytest.raises(ConfigError, match=r"price of openai/scripted.*--prices"):
        ModelClient(budget=1.0).prepare(spec)
    assert chat_requests(server) == 0


def test_a_batch_request_reserves_its_worst_case_at_batch_rates(tmp_path: Path) -> None:
    file = tmp_path / "prices.json"
    file.write_text(json.dumps({"openai/m": {"input": 1000, "output": 2000, "batch_output": 600}}))
    client = ModelClient(prices=load_prices(file), budget=10.0)
    spec = parse_spec("openai/m", api_base="http://127.0.0.1:9/v1")
    assert client._worst_case(spec, 100, 20) == pytest.approx((100 * 1000 + 20 * 2000) / 1e6)
    # in a batch: the input at half (no batch_input given), the output at its batch price
    batched = client._worst_case(spec, 100, 20, batch=True)
    assert batched == pytest.approx((100 * 500 + 20 * 600) / 1e6)
    openai = parse_spec("openai/gpt-4o-mini")  # the cost map's batch rates
    assert client._worst_case(openai, 1000, 100, batch=True) == pytest.approx(
        1000 * 7.5e-08 + 100 * 3e-07
    )
