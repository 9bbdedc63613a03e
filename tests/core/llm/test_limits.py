"""Rate limits on moot's side: buckets, the provider's headers, and fewer at once after a 429."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import pytest

from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.llm.limits import RESET_MOST, Bucket, Gate, RateLimit, duration
from moot.testing import ScriptedServer


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20ms", 0.02), ("1s", 1.0), ("1.5s", 1.5), ("6m0s", 360.0), ("1h2m3.5s", 3723.5)],
)
def test_reset_durations_read_as_openai_writes_them(text, seconds):
    assert duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [None, "", "soon", "-1", "2025-08-21T12:40:59Z"])
def test_an_unreadable_reset_is_unknown(text):
    assert duration(text) is None


def test_a_request_waits_until_the_bucket_pays_for_it_and_its_prompt_is_billed_as_counted():
    async def run() -> tuple[float, float]:
        rate = RateLimit()
        rate.buckets["tokens"] = Bucket(100.0, 1000.0)  # 100 tokens, refilled in 0.1 s
        await rate.acquire(80)
        started = time.monotonic()
        await rate.acquire(80)  # 60 more tokens: 60 ms
        waited = time.monotonic() - started
        level = rate.buckets["tokens"].level
        rate.settle(30, 20)  # its prompt, counted 30, was billed 20: 10 back, max_tokens kept
        return waited, rate.buckets["tokens"].level - level

    waited, back = asyncio.run(run())
    assert 0.05 <= waited < 0.5
    assert back == pytest.approx(10, abs=2)


def test_the_providers_headers_lower_the_limit_cap_the_bucket_and_set_the_rate():
    rate = RateLimit(rpm=600)
    rate.follow(
        {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "10",
            "x-ratelimit-reset-requests": "5s",  # 50 missing come back in 5 s: 10 a second
            "x-ratelimit-limit-tokens": "-1",  # unknown (a proxy's), never 0
            "x-ratelimit-remaining-tokens": "0",
        }
    )
    requests = rate.buckets["requests"]
    assert (requests.capacity, requests.level, requests.rate) == (60, 10, 10)
    assert "tokens" not in rate.buckets


def test_a_429_halves_the_requests_at_once_and_replies_grow_them_back():
    gate = Gate(ceiling=32)
    gate.throttled(in_flight=32)
    assert gate.capacity == 16
    gate.throttled(in_flight=16)
    assert gate.capacity == 8
    for _ in range(8):  # a round of replies at 8 at once: one more
        gate.succeeded()
    assert 8.9 < gate.capacity < 9.1


def test_moot_follows_a_servers_limit_and_barely_meets_a_429():
    """The server allows 10 requests per 0.5 s; moot learns it from the first reply's headers."""

    async def run(url: str) -> tuple[float, int]:
        client = ModelClient(retry=RetryPolicy(attempts=5, initial_wait=0.05, max_wait=0.5))
        role = Role("asker", parse_spec("openai/scripted", api_base=url))

        async def ask(n: int) -> str:
            messages = [{"role": "user", "content": f"question {n}"}]
            return (await client.complete(role, messages, stage="ask", max_tokens=8)).text

        await ask(-1)  # the headers of its reply tell moot the limit
        started = time.monotonic()
        answers = await asyncio.gather(*(ask(n) for n in range(30)))
        assert all(answers)
        return time.monotonic() - started, client.ledger.total().retries

    with ScriptedServer(rpm=10, limit_window=0.5) as server:
        seconds, retries = asyncio.run(run(server.url))
        refused = sum(r.outcome == "rate_limited" for r in server.requests)
    # 9 left after the first, then 20 a second: the other 21 take about a second
    assert seconds > 0.8
    assert refused == retries and refused <= 3, refused


def test_anthropics_headers_are_read_with_their_rfc3339_resets():
    now = time.time()
    at = datetime.fromtimestamp(now + 5, tz=UTC).isoformat().replace("+00:00", "Z")
    later = datetime.fromtimestamp(now + 3600, tz=UTC).isoformat()
    rate = RateLimit()
    rate.follow(
        {
            "anthropic-ratelimit-requests-limit": "60",
            "anthropic-ratelimit-requests-remaining": "10",
            "anthropic-ratelimit-requests-reset": at,  # 50 missing come back in 5 s
            # no combined tokens limit: the input and output limits, the most restrictive of each
            "anthropic-ratelimit-input-tokens-limit": "4000",
            "anthropic-ratelimit-input-tokens-remaining": "3000",
            "anthropic-ratelimit-input-tokens-reset": later,  # an hour: read as RESET_MOST
            "anthropic-ratelimit-output-tokens-limit": "8000",
            "anthropic-ratelimit-output-tokens-remaining": "-1",  # unknown: this one is not read
        }
    )
    requests, tokens = rate.buckets["requests"], rate.buckets["tokens"]
    assert (requests.capacity, requests.level) == (60, 10)
    assert requests.rate == pytest.approx(10, rel=0.05)
    assert (tokens.capacity, tokens.level, tokens.rate) == (4000, 3000, 1000 / RESET_MOST)
    combined = {"anthropic-ratelimit-tokens-limit": "2000"} | {
        "anthropic-ratelimit-tokens-remaining": "500",
        "anthropic-ratelimit-tokens-reset": "not a time",
    }
    rate.follow(combined)  # its most restrictive token limit, when it says it
    assert (rate.buckets["tokens"].capacity, rate.buckets["tokens"].level) == (2000, 500)


def test_two_limits_sharing_a_state_file_draw_from_one_bucket(tmp_path):
    path = tmp_path / "limits" / "model.json"

    async def run() -> list[float]:
        first, second = RateLimit(tpm=100, shared=path), RateLimit(tpm=100, shared=path)
        await first.acquire(70)
        await second.acquire(20)  # 10 left for both
        first.settle(30, 20)  # 10 back
        return [first.buckets["tokens"].level, second.buckets["tokens"].level]

    first, second = asyncio.run(run())
    assert first == pytest.approx(20, abs=1)  # it read the second's charge before its own
    assert second == pytest.approx(10, abs=1)
    assert json.loads(path.read_text())["tokens"]["level"] == pytest.approx(20, abs=1)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"tokens": {"capacity": 100}}',
        '{"tokens": {"capacity": 100, "rate": 0, "level": 0, "stamp": 0}}',
        '{"tokens": {"capacity": 100, "rate": 1, "level": -1e12, "stamp": 0}}',
        '["tokens"]',
    ],
)
def test_a_corrupt_state_file_starts_fresh_from_the_flags(tmp_path, text):
    path = tmp_path / "model.json"
    path.write_text(text)
    rate = RateLimit(tpm=6000, shared=path)
    started = time.monotonic()
    asyncio.run(rate.acquire(100))  # a full bucket of 6000: no wait
    assert time.monotonic() - started < 0.5
    assert json.loads(path.read_text())["tokens"]["level"] == pytest.approx(5900, abs=5)


def test_a_state_file_that_cannot_be_written_leaves_the_limit_to_this_process(tmp_path):
    (tmp_path / "limits").write_text("a file, not a folder")
    rate = RateLimit(tpm=6000, shared=tmp_path / "limits" / "model.json")
    asyncio.run(rate.acquire(100))
    assert rate.shared is None and rate.buckets["tokens"].level == pytest.approx(5900, abs=5)


def test_a_state_file_untouched_for_a_minute_is_forgotten(tmp_path):
    path = tmp_path / "model.json"
    old = {"capacity": 100, "rate": 1000 / 60, "level": -50, "stamp": time.time() - 61}
    path.write_text(json.dumps({"tokens": old}))
    rate = RateLimit(tpm=6000, shared=path)  # raised since: the old limit of 100 is gone
    asyncio.run(rate.acquire(100))
    assert rate.buckets["tokens"].capacity == 6000
