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

Several moot processes on one machine (shards, parallel commands) share a model's buckets: given
a state file (`state_file`), a `RateLimit` reads its buckets from it and writes them back under
an exclusive ``flock`` at each acquire, charge, settle and follow, so every process draws from
one bucket. A state file that cannot be read is ignored (the buckets start from the flags).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

log = logging.getLogger(__name__)

#: The headers a reply's limits are read from (the transports keep these alone).
HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
#: The longest reset taken as said: a per-minute limit fills within a minute, and a longer one (a
#: daily limit, usage-based accounting, a skewed clock) would hold a run back on one header.
RESET_MOST = 60.0
#: The longest a waiting request sleeps before it looks again: a reply's headers, or another
#: process, may have changed the buckets meanwhile.
RECHECK = 1.0
#: Seconds after which a shared bucket no process has touched is forgotten (`RateLimit._load`).
FORGOTTEN = 60.0
Said = tuple[float, float, float]  # a limit, what is left of it, seconds until it is full
STATE_BYTES = 1024  # a state file's size: its JSON, padded with spaces (two buckets: ~200)
_FIELDS = ("capacity", "rate", "level", "stamp")  # a `Bucket`'s, in a state file
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
        if not math.isnan(self.stamp):  # a clock set back earns nothing
            self.level = min(self.capacity, self.level + max(0.0, now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, amount: float) -> float:
        """Seconds until `amount` fits (a request larger than the bucket waits for it full)."""
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)


class RateLimit:
    """One model's requests and tokens per minute: each request waits until it can be paid.

    Args:
        rpm: Requests per minute (None: unknown until a reply's headers say).
        tpm: Tokens per minute (None: likewise).
        shared: The state file the buckets are shared through with other processes
            (`state_file`); None: this process's alone.
    """

    def __init__(
        self, rpm: int | None = None, tpm: int | None = None, shared: Path | None = None
    ) -> None:
        self.flags = {n: float(v) for n, v in (("requests", rpm), ("tokens", tpm)) if v is not None}
        self.buckets = {name: Bucket(limit, limit / 60.0) for name, limit in self.flags.items()}
        self.shared = shared
        self._fd: int | None = None  # the state file, once opened (`_open`)
        self._turn = asyncio.Lock()  # requests are admitted one at a time, in arrival order

    async def acquire(self, tokens: int) -> None:
        """Wait until one request of `tokens` tokens can be paid, then pay it."""
        async with self._turn:
            while True:
                with self._state():
                    now = time.time()  # the wall clock: the stamps are shared by processes
                    for bucket in self.buckets.values():
                        bucket.refill(now)
                    costs = ((b, self._cost(n, tokens)) for n, b in self.buckets.items())
                    wait = max((bucket.wait(cost) for bucket, cost in costs), default=0.0)
                    if wait <= 0:
                        for name, bucket in self.buckets.items():
                            bucket.level -= self._cost(name, tokens)
                        return
                await asyncio.sleep(min(wait, RECHECK))

    def charge(self, requests: int, tokens: int) -> None:
        """Charge `requests` requests of `tokens` tokens each, sent before the limit was known."""
        with self._state():
            for name, bucket in self.buckets.items():
                bucket.level -= requests * self._cost(name, tokens)

    def settle(self, counted: int, billed: int) -> None:
        """Correct a request's charge by its reply's usage: the prompt `billed` for `counted`.

        Only the prompt's count is corrected (moot's count is an estimate): the reserved
        ``max_tokens`` stay charged, as providers that reserve them keep them (OpenAI); one that
        gives them back says so in its next reply's remaining count (`follow`).
        """
        if counted == billed:
            return
        with self._state():
            bucket = self.buckets.get("tokens")
            if bucket is not None:
                bucket.level = min(bucket.capacity, bucket.level + counted - billed)

    def follow(self, headers: Mapping[str, str]) -> None:
        """Take what a reply's headers say: a lower limit, what is left, the refill rate."""
        now = time.time()
        told = {
            name: said for name in ("requests", "tokens") if (said := _told(headers, name, now))
        }
        if not told:
            return
        with self._state():
            for name, (limit, left, reset) in told.items():
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

    @contextlib.contextmanager
    def _state(self) -> Iterator[None]:
        """The buckets as every process sharing them left them, written back after, locked.

        The state is read and written in place (``pread``/``pwrite`` of `STATE_BYTES`, padded),
        on a file kept open: a few microseconds, where opening and truncating it each time
        cost hundreds. A file that fails (cannot be opened, locked, read or written: a
        read-only folder, a full disk) leaves the buckets this process's own, with a warning: a
        rate limit never stops a run.
        """
        fd = self._open()
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # microseconds: held across no await
                text = os.pread(fd, STATE_BYTES, 0)
            except OSError as exc:
                fd = self._unshared(exc)
            else:
                self._load(text.decode(errors="replace"), time.time())
        try:
            yield
            if fd is not None:
                state = json.dumps({name: asdict(b) for name, b in self.buckets.items()})
                os.pwrite(fd, state.encode().ljust(STATE_BYTES), 0)
        except OSError as exc:  # the write's: the buckets' own work raises none
            self._unshared(exc)
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _open(self) -> int | None:
        """The state file, opened once (None: not shared)."""
        if self._fd is None and self.shared is not None:
            try:
                self.shared.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.shared, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                return self._unshared(exc)
            weakref.finalize(self, os.close, self._fd)
        return self._fd

    def _unshared(self, exc: OSError) -> None:
        """From now on this process's buckets alone: its state file failed (`exc`)."""
        log.warning("rate limits not shared with other processes: %s", exc)
        self.shared = self._fd = None

    def _load(self, text: str, now: float) -> None:
        """Take the buckets in a state file's `text`, within this process's flags.

        A bucket no process has touched for `FORGOTTEN` seconds is forgotten, as the provider's
        per-minute limit forgets (a flag raised since then takes effect). Empty, unreadable or
        strange (no number, a rate that would take over a day to fill the bucket, a debt of
        more than a full bucket): ignored, so the buckets stay as this process has them (at
        first: from its flags).
        """
        found = {}
        try:
            for name, fields in (json.loads(text) if text else {}).items():
                capacity, rate, level, stamp = (float(fields[f]) for f in _FIELDS)
                sane = capacity > 0 and capacity / 86400 <= rate < math.inf
                if name not in ("requests", "tokens") or not sane or not -capacity <= level:
                    raise ValueError(f"{name}: {fields}")
                if not now - stamp > FORGOTTEN:
                    bucket = found[name] = Bucket(capacity, rate)
                    bucket.level, bucket.stamp = min(level, capacity), stamp
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.debug("rate-limit state %s ignored: %s", self.shared, exc)
            return
        for name, limit in self.flags.items():  # a flag lower than the file's limit holds
            bucket = found.get(name)
            if bucket is not None and limit < bucket.capacity:
                bucket.capacity, bucket.rate = limit, min(bucket.rate, limit / 60.0)
                bucket.level = min(bucket.level, limit)
        self.buckets.update(found)


def state_file(folder: Path, identity: str, api_base: str | None, key_variable: str) -> Path:
    """Where the processes calling one model with one key share its buckets: ``folder/<sha>.json``.

    The digest names the model (the transport's identity), its server and the variable holding
    its key (never the key).
    """
    name = json.dumps([identity, api_base, key_variable])
    return folder / f"{hashlib.sha256(name.encode()).hexdigest()}.json"


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


def _told(headers: Mapping[str, str], name: str, now: float) -> Said | None:
    """What a reply says of one limit: its size, what is left, the seconds until it is full.

    From OpenAI's headers or Anthropic's (whose reset is an RFC 3339 time, not a duration); None
    when they do not say (a limit of 0, missing or negative: unknown). Anthropic's ``tokens``
    headers are its most restrictive token limit; without them, its input- and output-token
    limits together, the most restrictive of each figure, as moot charges a request's prompt and
    ``max_tokens`` to one bucket. A reset is read as at most `RESET_MOST` seconds.
    """

    def read(pattern: str, seconds: Callable[[str | None], float | None]) -> Said | None:
        limit, left = (_number(headers.get(pattern % part)) for part in ("limit", "remaining"))
        if not limit or left is None:
            return None
        return limit, left, min(seconds(headers.get(pattern % "reset")) or 0.0, RESET_MOST)

    def until(text: str | None) -> float | None:
        return moment(text, now)

    # Anthropic's first: litellm copies its limit and remaining, not its reset, to OpenAI's names
    said = read(f"anthropic-ratelimit-{name}-%s", until) or read(f"x-ratelimit-%s-{name}", duration)
    if said is None and name == "tokens":
        sides = [
            read(f"anthropic-ratelimit-{side}-tokens-%s", until) for side in ("input", "output")
        ]
        known = [side for side in sides if side is not None]
        if known:
            limits, lefts, resets = zip(*known, strict=True)
            said = min(limits), min(lefts), max(resets)
    return said


def moment(text: str | None, now: float) -> float | None:
    """Seconds from `now` until an RFC 3339 time (Anthropic's resets); None: unreadable."""
    try:
        return max(0.0, datetime.fromisoformat(text).timestamp() - now) if text else None
    except ValueError:
        return None


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
