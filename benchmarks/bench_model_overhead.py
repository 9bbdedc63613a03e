"""Per-call overhead of `ModelClient.complete` over the raw ``openai.AsyncOpenAI`` SDK.

The scripted server (latency 0) runs in its own process, so its threads do not share the client's
GIL. Calls are sequential (one in flight). After a warm-up, rounds interleave the modes (order
reversed every other round, so drift on the shared machine hits every mode alike):

* ``raw``        ``AsyncOpenAI(max_retries=0).chat.completions.create``, the body moot sends
* ``cache off``  ``ModelClient(cache=None).complete``
* ``cache miss`` ``ModelClient(cache=RequestCache(tmp))``, a unique seed per call: lookup + write
* ``cache hit``  the same client re-asking cached requests (no HTTP at all)

Every call is timed. A round's figure for a mode is the median of its per-call times (robust to
the other tenants of a shared machine preempting a few calls); the reported figure is the median
over rounds, and the overhead is the median of the per-round paired differences (moot minus raw in
the same round). Means are printed too.

A last, network-free section times `complete` against a stub transport registered for the
``stub/`` prefix (moot's own CPU per call; skipped where moot has no transport registry).

Run: ``python benchmarks/bench_model_overhead.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
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
Rounds = dict[str, list[list[float]]]  # mode -> rounds -> per-call seconds


async def run_http(rounds: int, calls: int, warmup: int) -> Rounds:
    import openai

    from moot.core.llm.cache import RequestCache
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec

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

        async def timed(fn: Callable[[int], Awaitable[object]], seeds: list[int]) -> list[float]:
            durations = []
            clock = time.perf_counter
            for seed in seeds:
                start = clock()
                await fn(seed)
                durations.append(clock() - start)
            return durations

        # Warm-up: connections, imports, code paths, and the set of requests that will hit.
        await timed(call_raw, [next(fresh) for _ in range(warmup)])
        await timed(call_off, [next(fresh) for _ in range(warmup)])
        await timed(call_cached, [next(fresh) for _ in range(warmup)])
        for seed in hit_seeds:
            await call_cached(seed)
        assert all([await call_cached(s) for s in hit_seeds[:5]]), "cache hits expected"

        results: Rounds = {mode: [] for mode in MODES}
        for number in range(rounds):
            order = MODES if number % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                if mode == "raw":
                    durations = await timed(call_raw, [next(fresh) for _ in range(calls)])
                elif mode == "cache off":
                    durations = await timed(call_off, [next(fresh) for _ in range(calls)])
                elif mode == "cache miss":
                    durations = await timed(call_cached, [next(fresh) for _ in range(calls)])
                else:
                    durations = await timed(call_cached, hit_seeds)
                results[mode].append(durations)
            line = "  ".join(
                f"{m} {statistics.median(results[m][-1]) * 1e3:.3f}"
                f"/{statistics.fmean(results[m][-1]) * 1e3:.3f}"
                for m in MODES
            )
            print(f"round {number + 1}/{rounds} ms/call median/mean: {line}", flush=True)

        hits = cached.ledger.total().cache_hits
        expected = len(hit_seeds) * rounds + 5
        assert hits == expected, f"expected {expected} cache hits, ledger says {hits}"
        await raw.close()
        cache.close()
        return results


async def run_stub(calls: int) -> dict[str, float] | None:
    """Microseconds per `complete` with a do-nothing transport: moot's own cost, no network."""
    from moot.core.llm import models, spec
    from moot.core.llm.cache import RequestCache

    if not hasattr(spec, "register_transport"):
        return None

    @spec.register_transport
    class Stub(spec.Transport):
        name, prefixes = "stub", ("stub",)
        identity, api_base = "stub", None

        @classmethod
        def connect(cls, model: object, concurrency: object = None) -> Stub:
            return cls()

        async def send(self, messages: object, params: object) -> object:
            return spec.Reply("stub reply", "stop", {"prompt_tokens": 100, "completion_tokens": 20})

    role = spec.Role("bench", spec.parse_spec("stub/model"), TEMPERATURE)
    out: dict[str, float] = {}
    with _common.temp_dir("moot-bench-stub-") as tmp:
        cache = RequestCache(tmp / "stub.sqlite")
        for name, client_cache in (("cache off", None), ("cache miss", cache)):
            client = models.ModelClient(cache=client_cache, retry=models.RetryPolicy(attempts=1))
            seeds = itertools.count()
            samples = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(calls):
                    await client.complete(
                        role, MESSAGES, stage="bench", max_tokens=MAX_TOKENS, seed=next(seeds)
                    )
                samples.append((time.perf_counter() - start) / calls)
            out[name] = min(samples) * 1e6  # min: the machine's other tenants only add time
        cache.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds x 30 calls")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100, help="calls per mode per round")
    args = parser.parse_args()
    rounds, calls, warmup = (2, 30, 20) if args.quick else (args.rounds, args.calls, 100)
    _common.offline_env()
    _common.guard_loopback()
    print(f"bench_model_overhead: {rounds} rounds x {calls} sequential calls per mode")
    print(f"machine: {_common.machine_note()}")
    results = asyncio.run(run_http(rounds, calls, warmup))
    stub = asyncio.run(run_stub(200 if args.quick else 2000))
    print(f"after: {_common.machine_note()}")

    def per_round(mode: str, stat: Callable[[list[float]], float]) -> list[float]:
        return [stat(durations) for durations in results[mode]]

    med = {m: _common.median(per_round(m, statistics.median)) * 1e3 for m in MODES}
    mean = {m: _common.median(per_round(m, statistics.fmean)) * 1e3 for m in MODES}
    raw_rounds = per_round("raw", statistics.median)

    def paired_diff(mode: str) -> float:
        moot_rounds = per_round(mode, statistics.median)
        return _common.median([m - r for m, r in zip(moot_rounds, raw_rounds, strict=True)]) * 1e3

    def paired_ratio(mode: str) -> float:
        moot_rounds = per_round(mode, statistics.median)
        return _common.median([m / r for m, r in zip(moot_rounds, raw_rounds, strict=True)])

    print()
    print(f"per-call ms (median per call; median of {rounds} rounds x {calls} calls; mean):")
    print(f"  raw openai SDK              {med['raw']:.3f} ms   (mean {mean['raw']:.3f})")
    print(
        f"  moot cache off              {med['cache off']:.3f} ms   (mean {mean['cache off']:.3f})"
    )
    print(
        f"  moot cache on, miss + write {med['cache miss']:.3f} ms   "
        f"(mean {mean['cache miss']:.3f})"
    )
    print(
        f"  moot cache on, hit          {med['cache hit']:.3f} ms   "
        f"(mean {mean['cache hit']:.3f}; no HTTP)"
    )
    if stub is None:
        print("moot's own CPU per call (stub transport): skipped (private hook changed)")
    else:
        print(
            f"moot's own CPU per call (stub transport, no HTTP): cache off "
            f"{stub['cache off']:.0f} us, cache miss + write {stub['cache miss']:.0f} us"
        )
    print(f"overhead per call (cache miss + write): {paired_diff('cache miss'):+.3f} ms")
    print(f"overhead per call (cache off): {paired_diff('cache off'):+.3f} ms (goal <= 1 ms)")
    print(f"ratio moot cache off / raw: {paired_ratio('cache off'):.3f}")
    print(f"ratio moot cache miss / raw: {paired_ratio('cache miss'):.3f}")
    print(f"ratio moot cache hit / raw: {paired_ratio('cache hit'):.3f}")


if __name__ == "__main__":
    main()
