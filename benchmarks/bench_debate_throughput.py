"""Debate throughput: `run_debatune` model calls/s against the raw openai SDK's ceiling.

For each server latency (0.5 s and 0.05 s; the scripted server runs in its own process) and each
concurrency C in 1, 8, 32, 64:

* ceiling: the raw ``openai.AsyncOpenAI`` SDK (max_retries=0, moot's connection-pool limits)
  alone, C asyncio workers sending the same request bodies moot sends (recorded from a warm-up
  debate run) with ``chat.completions.create``, back to back, for as many calls as the moot
  point makes (moot POSTs its bodies with its own HTTP client);
* raw/aiohttp: the same bodies POSTed with moot's own HTTP client (`transports.http`, aiohttp),
  their JSON replies decoded and nothing more: the floor of any client on this machine;
* moot: ``run_debatune`` on synthetic topics that carry their arguments (no argument-generation
  calls), 1 argument per stance, 2 rounds, so 5 calls per debate, ``concurrency=C``, spec
  ``max_concurrency=C``, ``ModelClient(cache=None)``, a fresh temporary output folder per point.
  Timed end to end (planning, debates, ``debates.jsonl`` compaction, dataset and manifest writing).

Debates per point: ``max(4, 2C)`` at 0.5 s (5-10 s a point), ``max(16, min(6C, 128))`` at 0.05 s.
At 0.05 s the points are CPU-bound on this 2-core machine (server and client share it) and short, so
each is run twice, raw-moot-moot-raw, and the rates averaged.

The "reference way" is what the DEBATunE reference script does: one call at a time with the
synchronous SDK. Its calls/s gives the speed-up of moot at C=64.

Run: ``python benchmarks/bench_debate_throughput.py`` (``--quick`` for a smoke run: 0.05 s, C=1, 8;
``--point 0.05:32`` for one point).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common

MODEL = "scripted"
CALLS_PER_DEBATE = 5  # rounds=2: A, B, A, B, then A's conclusion


@dataclass
class Point:
    latency: float
    concurrency: int
    debates: int
    raw: list[float]  # calls/s, one per repetition
    moot: list[float]
    finalize: list[float]  # seconds from the last debate's end to run_debatune's return
    cached: list[float] = field(default_factory=list)  # moot as users run it: cache on (misses)
    cpu: dict[str, list[float]] = field(default_factory=dict)  # side: client CPU ms per call
    aiohttp: list[float] = field(default_factory=list)  # raw SDK over moot's HTTP client

    def cpu_ms(self, side: str) -> float:
        return sum(self.cpu[side]) / len(self.cpu[side])

    @property
    def calls(self) -> int:
        return self.debates * CALLS_PER_DEBATE

    @property
    def raw_rate(self) -> float:
        return sum(self.raw) / len(self.raw)

    @property
    def moot_rate(self) -> float:
        return sum(self.moot) / len(self.moot)

    @property
    def machine_rate(self) -> float:
        """The faster raw client's calls/s: what the machine allowed (`_common.verdict`)."""
        return max(self.raw_rate, sum(self.aiohttp) / len(self.aiohttp))

    @property
    def ratio(self) -> float:
        return self.moot_rate / self.raw_rate

    @property
    def cached_ratio(self) -> float:
        return sum(self.cached) / len(self.cached) / self.raw_rate


def synthetic_topics(count: int) -> list[Any]:
    from moot.core.data.topics import Topic

    return [
        Topic(
            f"Synthetic motion {i}: cities should ban private cars from their centres",
            {
                "Affirmative": (f"Argument {i}: car-free centres cut pollution and road deaths.",),
                "Negative": (f"Argument {i}: bans hurt shops, workers and disabled residents.",),
            },
        )
        for i in range(count)
    ]


def debates_for(concurrency: int, latency: float) -> int:
    if latency >= 0.5:
        return max(4, 2 * concurrency)  # 5-10 s a point
    return max(16, min(6 * concurrency, 128))  # 2-5 s a point


async def measure_latency(
    url: str, latency: float, levels: list[int], reps: int, sizes: dict[int, int]
) -> tuple[list[Point], list[dict[str, Any]]]:

    from moot.core.llm.cache import RequestCache
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec
    from moot.core.runs import Progress
    from moot.graphs.debatune_run import DebateRunConfig, run_debatune

    class LastDone(Progress):
        """A progress bar that draws nothing and remembers when the last item finished."""

        last: float = 0.0

        def advance(self, failed: bool) -> None:
            self.last = time.perf_counter()

    payloads: list[dict[str, Any]] = []

    class Recording(ModelClient):
        async def complete(self, role: Any, messages: Any, **kwargs: Any) -> Any:
            body = {"model": MODEL, "messages": messages, "temperature": role.temperature}
            body.update({k: kwargs[k] for k in ("max_tokens", "seed") if kwargs.get(k) is not None})
            payloads.append(body)
            return await super().complete(role, messages, **kwargs)

    def config(concurrency: int) -> Any:
        spec = parse_spec(f"openai/{MODEL}", api_base=url, max_concurrency=concurrency)
        return DebateRunConfig(
            debater_a=Role("debater_a", spec, 0.7),
            debater_b=Role("debater_b", spec, 0.9),
            rounds=2,
            arguments_per_stance=1,
        )

    async def moot_run(
        concurrency: int, debates: int, client: Any = None, cache: bool = False
    ) -> tuple[float, float, float]:
        stamp = LastDone(enabled=False)  # when the last debate finished: the rest is the tail
        topics = synthetic_topics((debates + 1) // 2)
        with _common.temp_dir("moot-bench-debate-") as out:
            store = RequestCache(Path(out) / "cache" / "requests.sqlite") if cache else None
            client = client or ModelClient(cache=store, retry=RetryPolicy(attempts=1))
            start, cpu = time.perf_counter(), time.process_time()
            summary = await run_debatune(
                topics,
                Path(out),
                config(concurrency),
                client,
                concurrency=concurrency,
                progress=stamp,
            )
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        calls = client.ledger.total().calls
        if not summary.ok or calls != debates * CALLS_PER_DEBATE:
            raise RuntimeError(f"debate run failed: {summary.failures[:3]} ({calls} calls)")
        return calls / seconds, start + seconds - stamp.last, cpu * 1000 / calls

    raw_sides = _common.raw_sides(url)

    async def raw_run(concurrency: int, calls: int, side: str = "raw") -> tuple[float, float]:
        bodies = itertools.islice(itertools.cycle(payloads), calls)
        return await _common.raw_calls(raw_sides[side], bodies, concurrency)

    # Warm-up: imports (langgraph, datasets), connections, and the request bodies for raw.
    await moot_run(4, 8, Recording(cache=None, retry=RetryPolicy(attempts=1)))
    for side in raw_sides:
        await raw_run(8, 40, side)

    points = []
    for concurrency in levels:
        debates = sizes.get(concurrency) or debates_for(concurrency, latency)
        point = Point(latency, concurrency, debates, [], [], [])
        for rep in range(reps):
            order = ("raw", "raw/aiohttp", "moot", "cached")
            for kind in order if rep % 2 == 0 else order[::-1]:
                if kind == "raw":
                    rate, cpu = await raw_run(concurrency, point.calls)
                    point.raw.append(rate)
                elif kind == "raw/aiohttp":
                    rate, cpu = await raw_run(concurrency, point.calls, kind)
                    point.aiohttp.append(rate)
                elif kind == "cached":
                    rate, _, cpu = await moot_run(concurrency, debates, cache=True)
                    point.cached.append(rate)
                else:
                    rate, finalize, cpu = await moot_run(concurrency, debates)
                    point.moot.append(rate)
                    point.finalize.append(finalize)
                point.cpu.setdefault(kind, []).append(cpu)
        print(
            f"  latency {latency:g}s C={concurrency:<3d} {point.calls:5d} calls: "
            f"raw {point.raw_rate:7.1f}/s  moot {point.moot_rate:7.1f}/s  "
            f"ratio {point.ratio:.3f}  with cache {point.cached_ratio:.3f}",
            flush=True,
        )
        points.append(point)
    return points, payloads


def reference_rate(url: str, payloads: list[dict[str, Any]], calls: int) -> float:
    """One call at a time with the synchronous SDK, as the DEBATunE reference script does."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="bench", max_retries=0)
    client.chat.completions.create(**payloads[0])  # connect
    start = time.perf_counter()
    for body in itertools.islice(itertools.cycle(payloads), calls):
        client.chat.completions.create(**body)
    rate = calls / (time.perf_counter() - start)
    client.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 0.05 s, C=1 and 8")
    parser.add_argument(
        "--point",
        action="append",
        metavar="LATENCY:C",
        help="measure only these points (repeatable), e.g. --point 0.05:32",
    )
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    if args.point:
        chosen = [tuple(text.split(":")) for text in args.point]
        latencies = sorted({float(lat) for lat, _ in chosen}, reverse=True)
        plan = [
            (lat, [int(c) for x, c in chosen if float(x) == lat], 1 if lat >= 0.5 else 2, {}, 10)
            for lat in latencies
        ]
    elif args.quick:
        plan = [(0.05, [1, 8], 1, {1: 4, 8: 8}, 6)]
    else:
        plan = [(0.5, [1, 8, 32, 64], 1, {}, 10), (0.05, [1, 8, 32, 64], 2, {}, 40)]
    print("bench_debate_throughput: run_debatune vs raw openai SDK, model calls/s")
    print(f"machine: {_common.machine_note()}")
    started = time.perf_counter()
    points: list[Point] = []
    reference: dict[float, float] = {}
    for latency, levels, reps, sizes, reference_calls in plan:
        with _common.scripted_server(latency) as url:
            found, payloads = asyncio.run(measure_latency(url, latency, levels, reps, sizes))
            points += found
            reference[latency] = reference_rate(url, payloads, reference_calls)
        print(f"  latency {latency:g}s reference way: {reference[latency]:.2f} calls/s", flush=True)
    print(f"after: {_common.machine_note()}; total {time.perf_counter() - started:.0f} s")

    print()
    header = (
        f"{'latency':>8} {'C':>3} {'calls':>6} {'raw calls/s':>12} {'moot calls/s':>13} "
        f"{'moot/raw':>9} {'cached/raw':>11} {'C/latency':>10} {'finalize s':>11} "
        f"{'CPU ms/call raw':>16} {'raw/aiohttp':>12} {'moot':>6} {'cached':>7}"
    )
    print(header)
    for p in points:
        print(
            f"{p.latency:>7g}s {p.concurrency:>3d} {p.calls:>6d} {p.raw_rate:>12.1f} "
            f"{p.moot_rate:>13.1f} {p.ratio:>9.3f} {p.cached_ratio:>11.3f} "
            f"{p.concurrency / p.latency:>10.0f} "
            f"{sum(p.finalize) / len(p.finalize):>11.2f} "
            f"{p.cpu_ms('raw'):>16.2f} {p.cpu_ms('raw/aiohttp'):>12.2f} "
            f"{p.cpu_ms('moot'):>6.2f} {p.cpu_ms('cached'):>7.2f}"
        )
    print("(finalize s: end of the last debate to run_debatune's return; included in moot calls/s)")
    print()
    for latency in reference:
        mine = [p for p in points if p.latency == latency]
        goal = 0.95 if latency >= 0.5 else 0.8
        for p in mine:
            said = _common.verdict(p.machine_rate, p.concurrency, p.latency)
            print(
                f"latency {latency:g} s, C={p.concurrency}: moot/raw cache off {p.ratio:.3f}, "
                f"cache on {p.cached_ratio:.3f} (goal >= {goal}); CPU per call moot/raw "
                f"{p.cpu_ms('moot') / p.cpu_ms('raw'):.2f}, cached/raw "
                f"{p.cpu_ms('cached') / p.cpu_ms('raw'):.2f} (goal <= 1.25); moot/(raw "
                f"aiohttp) {p.cpu_ms('moot') / p.cpu_ms('raw/aiohttp'):.2f}"
                + (f" [{said}]" if said else "")
            )
    for latency, ref in reference.items():
        top = max((p for p in points if p.latency == latency), key=lambda p: p.concurrency)
        print(
            f"speed-up over the reference way (sequential calls, {ref:.2f} calls/s) at "
            f"latency {latency:g} s, C={top.concurrency}: {top.moot_rate / ref:.1f}x"
        )


if __name__ == "__main__":
    main()
