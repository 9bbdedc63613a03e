"""A provider's rate limits, as the scripted server enforces them: requests and tokens per window.

Each limit is a bucket that refills continuously (``limit`` per ``window`` seconds) and is charged
at admission: one request, and the request's prompt tokens plus its ``max_tokens`` (providers
reserve a reply's whole budget when they admit it). A request the buckets cannot pay for now is
refused with a 429 that says how long to wait (``retry-after-ms``, ``Retry-After``); every answer
carries OpenAI's headers (``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``,
``x-ratelimit-reset-requests``, and the same for tokens), the resets as OpenAI writes durations
(``20ms``, ``1.5s``, ``6m0s``).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass


@dataclass
class Bucket:
    """`limit` units per `window` seconds, refilled continuously; full at the start."""

    limit: int
    window: float
    level: float = math.nan
    stamp: float = 0.0

    def __post_init__(self) -> None:
        self.level = float(self.limit)

    def refill(self, now: float) -> None:
        """Add what `now` - the last refill earned, up to the limit."""
        if self.stamp:
            self.level = min(self.limit, self.level + (now - self.stamp) * self.limit / self.window)
        self.stamp = now

    def wait(self, amount: float) -> float:
        """Seconds until `amount` fits (0: now; inf: never, more than the whole limit)."""
        if amount > self.limit:
            return math.inf
        return max(0.0, (amount - self.level) * self.window / self.limit)

    def reset(self) -> float:
        """Seconds until the bucket is full again."""
        return (self.limit - self.level) * self.window / self.limit


class RateLimits:
    """Requests and tokens per window, enforced at admission (thread-safe).

    Args:
        rpm: Requests per window (None: no limit).
        tpm: Tokens per window (None: no limit).
        window: The window in seconds (60: a minute; tests scale it down).
    """

    def __init__(self, rpm: int | None, tpm: int | None, window: float = 60.0) -> None:
        self._buckets = {
            name: Bucket(limit, window)
            for name, limit in (("requests", rpm), ("tokens", tpm))
            if limit is not None
        }
        self._lock = threading.Lock()

    def admit(self, tokens: int) -> tuple[float, dict[str, str]]:
        """Charge one request of `tokens` tokens, if the buckets hold them now.

        Returns:
            0 and the reply's headers when admitted; else the seconds to wait (inf: the request
            is larger than the token limit) and the 429's headers. Nothing is charged then.
        """
        cost = {"requests": 1.0, "tokens": float(tokens)}
        with self._lock:
            now = time.monotonic()
            for bucket in self._buckets.values():
                bucket.refill(now)
            wait = max((b.wait(cost[name]) for name, b in self._buckets.items()), default=0.0)
            if not wait:
                for name, bucket in self._buckets.items():
                    bucket.level -= cost[name]
            headers = self._headers()
        if wait and math.isfinite(wait):  # a request larger than the limit never fits
            headers |= {"retry-after-ms": str(math.ceil(wait * 1000))}
            headers |= {"Retry-After": str(math.ceil(wait))}
        return wait, headers

    def _headers(self) -> dict[str, str]:
        headers = {}
        for name, bucket in self._buckets.items():
            headers[f"x-ratelimit-limit-{name}"] = str(bucket.limit)
            headers[f"x-ratelimit-remaining-{name}"] = str(max(0, math.floor(bucket.level)))
            headers[f"x-ratelimit-reset-{name}"] = duration(bucket.reset())
        return headers


def duration(seconds: float) -> str:
    """A duration as OpenAI's rate-limit headers write it: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{math.ceil(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    shown = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{shown}s" if minutes else f"{shown}s"
