"""Per-call overhead of `ModelClient.complete` over the raw ``openai.AsyncOpenAI`` SDK.

The scripted server (latency 0) runs in its own process, so its threads do not share the client's
GIL. Calls are sequential (one in flight). After a warm-up, rounds interleave the modes (order
reversed every other round, so drift on the shared machine hits every mode alike):

* ``raw``        ``AsyncOpenAI(max_retries=0).chat.completions.create``, the body moot sends
* ``cache off``  ``ModelClient(cache=None).complete``
* ``cache miss`` ``ModelClient(cache=RequestCache(tmp))``, a unique seed per call: lookup + write
* ``cache hit``  the same client re-asking cached requests (no HTTP at all)

Each figure is the median over rounds of the mean per-call time; the overhead is the median of the
per-round paired differences (moot minus raw in the same round).

Run: ``python benchmarks/bench_model_overhead.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable

import _common

MODEL = "scripted"
TEMPERATURE = 0.7
MAX_TOKENS = 256
# About the size of a debate turn's request (system prompt + instructions + a short history).
MESSAGES = [
    {
        "role": "system",
        "content": "You are a skilled debater on the Affirmative side of the topic 'Cities should "
        "ban private cars from their centres'. Argue with explanations and evidence. " * 3,
    },
    {
        "role": "user",
        "content": "Your argument: car-free centres cut air pollution and traffic deaths. "
        "Open the debate: explain the argument, give evidence, and anticipate objections. " * 4,
    },
]

MODES = ("raw", "cache off", "cache miss", "cache hit")


async def run(rounds: int, calls: int, warmup: int) -> dict[str, list[float]]:
    import openai

    from moot.core.cache import RequestCache
    from moot.core.models import ModelClient, RetryPolicy
    from moot.core.spec import Role, parse_spec

    with _common.scripted_server(0.0) as url, _common.temp_dir("moot-bench-cache-") as tmp:
        raw = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
        role = Role("bench", parse_spec(f"openai/{MODEL}", api_base=url), TEMPERATURE)
        policy = RetryPolicy(attempts=1)
        off = ModelClient(cache=None, retry=policy)
        cache = RequestCache(tmp / "requests.sqlite")
        cached = ModelClient(cache=cache, retry=policy)
        fresh = itertools.count(1_000_000)  # unique seeds: never in the cache
        hit_seeds = list(range(calls))  # requested once in warm-up, then always hits

        async def call_raw(seed: int) -> None:
            await raw.chat.completions.create(
                model=MODEL,
                messages=MESSAGES,
                temperature=TEMPERATURE,
                max_tokens=MAX_TOKENS,
                seed=seed,
            )

        async def call_off(seed: int) -> None:
            await off.complete(role, MESSAGES, stage="bench", max_tokens=MAX_TOKENS, seed=seed)

        async def call_cached(seed: int) -> bool:
            reply = await cached.complete(
                role, MESSAGES, stage="bench", max_tokens=MAX_TOKENS, seed=seed
            )
            return reply.cached

        async def timed(fn: Callable[[int], Awaitable[object]], seeds: list[int]) -> float:
            start = time.perf_counter()
            for seed in seeds:
                await fn(seed)
            return (time.perf_counter() - start) / len(seeds)

        # Warm-up: connections, imports, the hit set, code paths.
        await timed(call_raw, [next(fresh) for _ in range(warmup)])
        await timed(call_off, [next(fresh) for _ in range(warmup)])
        await timed(call_cached, [next(fresh) for _ in range(warmup)])
        for seed in hit_seeds:
            await call_cached(seed)
        assert all([await call_cached(s) for s in hit_seeds[:5]]), "cache hits expected"

        results: dict[str, list[float]] = {mode: [] for mode in MODES}
        for number in range(rounds):
            order = MODES if number % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                if mode == "raw":
                    per_call = await timed(call_raw, [next(fresh) for _ in range(calls)])
                elif mode == "cache off":
                    per_call = await timed(call_off, [next(fresh) for _ in range(calls)])
                elif mode == "cache miss":
                    per_call = await timed(call_cached, [next(fresh) for _ in range(calls)])
                else:
                    per_call = await timed(call_cached, hit_seeds)
                results[mode].append(per_call)
            line = "  ".join(f"{m} {results[m][-1] * 1e3:.3f}" for m in MODES)
            print(f"round {number + 1}/{rounds} (ms/call): {line}", flush=True)

        hits = cached.ledger.total().cache_hits
        expected = len(hit_seeds) * rounds + 5
        assert hits == expected, f"expected {expected} cache hits, ledger says {hits}"
        await raw.close()
        cache.close()
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds x 30 calls")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=300, help="calls per mode per round")
    args = parser.parse_args()
    rounds, calls, warmup = (2, 30, 20) if args.quick else (args.rounds, args.calls, 100)
    _common.offline_env()
    _common.guard_loopback()
    print(f"bench_model_overhead: {rounds} rounds x {calls} sequential calls per mode")
    print(f"machine: {_common.machine_note()}")
    results = asyncio.run(run(rounds, calls, warmup))
    print(f"after: {_common.machine_note()}")

    med = {mode: _common.median(values) * 1e3 for mode, values in results.items()}
    raw = results["raw"]

    def paired_diff(mode: str) -> float:
        return _common.median([m - r for m, r in zip(results[mode], raw, strict=True)]) * 1e3

    def paired_ratio(mode: str) -> float:
        return _common.median([m / r for m, r in zip(results[mode], raw, strict=True)])

    print()
    print(f"per-call ms, median of {rounds} rounds x {calls} calls:")
    print(f"  raw openai SDK              {med['raw']:.3f} ms")
    print(f"  moot cache off              {med['cache off']:.3f} ms")
    print(f"  moot cache on, miss + write {med['cache miss']:.3f} ms")
    print(f"  moot cache on, hit          {med['cache hit']:.3f} ms (no HTTP)")
    print(f"overhead per call (cache miss + write): {paired_diff('cache miss'):+.3f} ms")
    print(f"overhead per call (cache off): {paired_diff('cache off'):+.3f} ms (goal <= 1 ms)")
    print(f"ratio moot cache off / raw: {paired_ratio('cache off'):.3f}")
    print(f"ratio moot cache miss / raw: {paired_ratio('cache miss'):.3f}")
    print(f"ratio moot cache hit / raw: {paired_ratio('cache hit'):.3f}")


if __name__ == "__main__":
    main()
