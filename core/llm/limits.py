"""A model's rate limits, on moot's side: requests and tokens per minute, and the provider's word.

Providers limit requests and tokens per minute and say, in every reply's headers, how much is
left (OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``). A `RateLimit` keeps
one bucket per limit, refilled continuously, and makes each request wait until the buckets can
pay for it: one request, and its prompt tokens plus its whole ``max_tokens`` (what providers
reserve at admission), the prompt's count corrected by the reply's usage. The buckets
start from ``--rpm``/``--tpm`` and follow the headers: a provider's lower limit replaces the
flag's, its remaining count caps the bucket, and the refill rate is read from how long it says
the bucket takes to fill. Missing or negative header values (some proxies send -1) are unknown,
never 0.

A 429 also cuts how many requests go at once (`Gate`: halved on each 429, grown back by one per
round of successes), so ``--concurrency`` is a ceiling, not a promise.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

#: The headers a reply's limits are read from (the transports keep these alone).
HEADER_PREFIXES = ("x-ratelimit-",)
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?")


@dataclass
class Bucket:
    """`capacity` units, refilled at `rate` a second up to it; full at first."""

    capacity: float
    rate: float
    level: float = math.nan
    stamp: float = math.nan

    def __post_init__(self) -> None:
        self.level = self.capacity

    def refill(self, now: float) -> None:
        """Add what the time since the last refill earned, up to the capacity."""
        if not math.isnan(self.stamp):
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, amount: float) -> float:
        """Seconds until `amount` fits (a request larger than the bucket waits for it full)."""
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)


class RateLimit:
    """One model's requests and tokens per minute: each request waits until it can be paid.

    Args:
        rpm: Requests per minute (None: unknown until a reply's headers say).
        tpm: Tokens per minute (None: likewise).
    """

    def __init__(self, rpm: int | None = None, tpm: int | None = None) -> None:
        self.buckets: dict[str, Bucket] = {}
        for name, limit in (("requests", rpm), ("tokens", tpm)):
            if limit is not None:
                self.buckets[name] = Bucket(float(limit), limit / 60.0)
        self._turn = asyncio.Lock()  # requests are admitted one at a time, in arrival order

    async def acquire(self, tokens: int) -> None:
        """Wait until one request of `tokens` tokens can be paid, then pay it."""
        async with self._turn:
            while True:
                now = time.monotonic()
                for bucket in self.buckets.values():
                    bucket.refill(now)
                costs = ((b, self._cost(n, tokens)) for n, b in self.buckets.items())
                wait = max((bucket.wait(cost) for bucket, cost in costs), default=0.0)
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
            for name, bucket in self.buckets.items():
                bucket.level -= self._cost(name, tokens)

    def charge(self, requests: int, tokens: int) -> None:
        """Charge `requests` requests of `tokens` tokens each, sent before the limit was known."""
        for name, bucket in self.buckets.items():
            bucket.level -= requests * self._cost(name, tokens)

    def settle(self, counted: int, billed: int) -> None:
        """Correct a request's charge by its reply's usage: the prompt `billed` for `counted`.

        Only the prompt's count is corrected (moot's count is an estimate): the reserved
        ``max_tokens`` stay charged, as providers that reserve them keep them (OpenAI); one that
        gives them back says so in its next reply's remaining count (`follow`).
        """
        bucket = self.buckets.get("tokens")
        if bucket is not None:
            bucket.level = min(bucket.capacity, bucket.level + counted - billed)

    def follow(self, headers: Mapping[str, str]) -> None:
        """Take what a reply's headers say: a lower limit, what is left, the refill rate."""
        now = time.monotonic()
        for name in ("requests", "tokens"):
            limit = _number(headers.get(f"x-ratelimit-limit-{name}"))
            left = _number(headers.get(f"x-ratelimit-remaining-{name}"))
            reset = duration(headers.get(f"x-ratelimit-reset-{name}"))
            if not limit or left is None:  # a limit of 0 or none: unknown
                continue
            bucket = self.buckets.get(name)
            if bucket is None or limit < bucket.capacity:
                bucket = self.buckets[name] = Bucket(limit, limit / 60.0)
            bucket.refill(now)
            if reset and left < limit:  # what is missing fills in `reset`: the provider's rate
                bucket.rate = (limit - left) / reset
            bucket.level = min(bucket.level, left)

    @staticmethod
    def _cost(name: str, tokens: int) -> float:
        return 1.0 if name == "requests" else float(tokens)


class Gate:
    """How many requests go at once: halved on a 429, grown back by one per round of successes.

    Args:
        ceiling: The most at once (the run's own concurrency bounds it anyway).
    """

    def __init__(self, ceiling: float = math.inf) -> None:
        self.ceiling = ceiling
        self.capacity = ceiling
        self.inside = 0
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.inside < max(1, int(self.capacity)))
            self.inside += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.inside -= 1
            self._changed.notify_all()

    def throttled(self, in_flight: int) -> None:
        """A 429 while `in_flight` requests were out: half as many at once (at least one)."""
        self.capacity = max(1.0, min(self.capacity, in_flight) / 2)

    def succeeded(self) -> None:
        """A reply: one more at once after as many successes as the gate allows."""
        self.capacity = min(self.ceiling, self.capacity + 1 / max(1.0, self.capacity))


def duration(text: str | None) -> float | None:
    """Seconds in a rate-limit reset: OpenAI's ``20ms``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    if not text:
        return None
    text = text.strip()
    if text.endswith("ms") and _number(text[:-2]) is not None:
        return float(text[:-2]) / 1000
    found = _DURATION.fullmatch(text)
    if found is None or not any(found.groups()):
        return None
    hours, minutes, seconds = (float(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def _number(text: str | None) -> float | None:
    """A header's count, or None when missing, unreadable or negative (unknown, never 0)."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 and math.isfinite(value) else None
