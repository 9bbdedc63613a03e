"""Rate limits: how much of a provider's token limit moot uses, and how often it meets a 429.

The scripted server (its own process) enforces a token limit the way providers do
(`moot.testing.limits`): each request charged its prompt tokens plus its ``max_tokens`` at
admission from a bucket that refills continuously, a 429 with ``retry-after-ms`` when it cannot
pay, and OpenAI's ``x-ratelimit-*`` headers on every answer. Its window is scaled down (``--window``
seconds instead of 60) so a run of a few hundred requests crosses several windows.

Two sides send the same requests, C at a time:

* fixed: the raw ``openai.AsyncOpenAI`` SDK (``max_retries=0``), C workers, each retrying a 429
  after the server's ``retry-after-ms`` (what a client with a fixed ``--concurrency`` and a
  polite retry does);
* moot: `ModelClient` (no ``--tpm`` given: it follows the server's headers alone), C at a time.

For each side: the share of the token limit used in the steady state (tokens admitted beyond the
bucket's first fill, over the run's seconds, against the refill rate), the share of requests
answered with a 429, and the client's CPU per admitted request. The goal (issue 32): moot uses at
least 0.9 of the limit with at most 2% of its requests refused.

Run: ``python benchmarks/bench_limits.py`` (about a minute; ``--quick``: fewer requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import _common

MAX_TOKENS = 100


@dataclass
class Side:
    """What one side did."""

    name: str
    answered: int = 0
    refused: int = 0
    seconds: float = 0.0
    cpu: float = 0.0


def messages(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Question number {n}: is a limit a promise?"}]


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fixed(url: str, count: int, concurrency: int) -> Side:
    """The raw SDK at a fixed concurrency, retrying each 429 after the server's wait."""
    import httpx
    import openai

    side = Side("fixed")
    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    queue = iter(range(count))

    async def worker() -> None:
        for n in queue:
            body = {"model": "scripted", "messages": messages(n), "max_tokens": MAX_TOKENS}
            while True:
                try:
                    await client.post("/chat/completions", body=body, cast_to=httpx.Response)
                    side.answered += 1
                    break
                except openai.RateLimitError as exc:
                    side.refused += 1
                    wait = exc.response.headers.get("retry-after-ms")
                    await asyncio.sleep(float(wait) / 1000 if wait else 0.1)

    start, used = time.perf_counter(), cpu()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    side.seconds, side.cpu = time.perf_counter() - start, cpu() - used
    await client.close()
    return side


async def moot_side(url: str, count: int, concurrency: int) -> Side:
    """`ModelClient` following the server's headers, the same requests, C at a time.

    Its limit is shared through a state file, as the command line's (`moot.core.llm.limits`).
    """
    from moot.core import ModelClient, RetryPolicy, Role, parse_spec

    side = Side("moot")
    retry = RetryPolicy(attempts=20, initial_wait=0.05, max_wait=1.0)
    role = Role("asker", parse_spec("openai/scripted", api_base=url))
    queue = iter(range(count))
    with tempfile.TemporaryDirectory() as folder:
        client = ModelClient(retry=retry, limits=Path(folder))

        async def worker() -> None:
            for n in queue:
                await client.complete(role, messages(n), stage="ask", max_tokens=MAX_TOKENS)

        start, used = time.perf_counter(), cpu()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        side.seconds, side.cpu = time.perf_counter() - start, cpu() - used
    total = client.ledger.total()
    side.answered, side.refused = total.calls, total.retries
    return side


def report(side: Side, tpm: int, window: float, per_request: int) -> tuple[float, float]:
    """Print a side's figures; return its share of the limit and its share of 429s."""
    rate = tpm / window  # tokens a second
    steady = max(0, side.answered * per_request - tpm) / side.seconds  # beyond the first fill
    share, refused = steady / rate, side.refused / (side.answered + side.refused)
    print(
        f"  {side.name:5}  {side.answered} answered, {side.refused} refused (429) in "
        f"{side.seconds:.1f} s: {share:.3f} of the token limit, {refused:.1%} 429s, "
        f"{1000 * side.cpu / side.answered:.2f} ms CPU per answered request"
    )
    return share, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    parser.add_argument("--window", type=float, default=5.0, help="the limit's window, seconds")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    from moot.core.llm.tokens import count_message_tokens

    per_request = count_message_tokens(messages(100)) + MAX_TOKENS  # about equal for every n
    tpm = 40 * per_request  # 40 requests per window: a few windows' worth of requests
    count = 120 if args.quick else 400
    print(f"machine: {_common.machine_note()}")
    print(
        f"token limit {tpm} per {args.window:g} s ({tpm / args.window:.0f} tokens/s, about "
        f"{per_request} per request); {count} requests, {args.concurrency} at a time"
    )
    results = {}
    for run in (fixed, moot_side):  # each against a fresh server: a full bucket at its start
        with _common.scripted_server(0.02, tpm=tpm, limit_window=args.window) as url:
            side = asyncio.run(run(url, count, args.concurrency))
        results[side.name] = report(side, tpm, args.window, per_request)
    share, refused = results["moot"]
    goal = "met" if share >= 0.9 and refused <= 0.02 else "not met"
    print(f"moot: {share:.3f} of the limit with {refused:.1%} 429s (goal >= 0.9 and <= 2%: {goal})")
    print(json.dumps({name: {"share": s, "refused": r} for name, (s, r) in results.items()}))


if __name__ == "__main__":
    main()
