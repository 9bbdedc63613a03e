"""One call per item: `moot generate`'s engine against the raw openai SDK, calls/s and CPU per call.

The scripted server (own process, latency 0.05 s) answers every instruction. For each
concurrency C in 32 and 256, 2,400 calls a side (``--calls``), in one process:

* raw: ``openai.AsyncOpenAI(max_retries=0)`` with its default HTTP client (httpx, with moot's
  connection limits), C asyncio workers sending the request bodies moot sends with
  ``chat.completions.create``, back to back;
* raw/aiohttp: the same bodies POSTed with moot's own HTTP client (`transports.http`, aiohttp),
  their JSON replies decoded and nothing more: the floor of any client on this machine;
* moot: ``answer_instructions`` (what ``moot generate`` runs: the run engine, its progress log,
  the output file) with ``ModelClient(cache=None)``, ``concurrency=C``, spec
  ``max_concurrency=C``, a fresh output folder per run;
* cached: the same with a fresh request cache (every call a miss and a write), as users run it.

Each point runs twice (raw, raw/aiohttp, moot, cached; then the reverse order) and averages. CPU
per call is this process's (the server's is its own). A point whose faster raw client makes
fewer than 300 calls/s is inconclusive: the machine, not the client, is the limit.

Run: ``python benchmarks/bench_generate_throughput.py`` (``--quick``: 400 calls, C=32 only).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import _common

LATENCY = 0.05
SIDES = ("raw", "raw/aiohttp", "moot", "cached")


@dataclass
class Point:
    concurrency: int
    calls: int
    rate: dict[str, list[float]] = field(default_factory=dict)  # side: calls/s per repetition
    cpu: dict[str, list[float]] = field(default_factory=dict)  # side: CPU ms per call

    def mean(self, table: dict[str, list[float]], side: str) -> float:
        return sum(table[side]) / len(table[side])


def instructions(count: int, offset: int) -> list[dict[str, str]]:
    """Distinct instructions, so the request cache never answers."""
    return [
        {
            "topic": f"Motion {offset + i}: cities should ban private cars from their centres",
            "side": "affirmative",
            "argument": "car-free centres cut pollution and road deaths",
            "instruction": f"Write a short argument for motion {offset + i}: cities should ban "
            "private cars from their centres, and answer the strongest objection.",
        }
        for i in range(count)
    ]


async def measure(url: str, levels: list[int], calls: int, reps: int) -> list[Point]:

    from moot.core.llm.cache import RequestCache
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec
    from moot.core.runs import Progress
    from moot.graphs.debatune_generate import answer_instructions

    served = itertools.count()  # every run's instructions are new: no cache hit across runs

    def role(concurrency: int) -> Role:
        spec = parse_spec("openai/scripted", api_base=url, max_concurrency=concurrency)
        return Role("generator", spec, 0.7)

    async def moot_run(concurrency: int, count: int, cache: bool) -> tuple[float, float]:
        items = instructions(count, next(served) * count)
        with _common.temp_dir("moot-bench-generate-") as out:
            store = RequestCache(out / "cache" / "requests.sqlite") if cache else None
            client = ModelClient(cache=store, retry=RetryPolicy(attempts=1))
            start, cpu = time.perf_counter(), time.process_time()
            done = await answer_instructions(
                items,
                out / "answers.json",
                role(concurrency),
                client,
                concurrency=concurrency,
                max_tokens=256,
                progress=Progress(enabled=False),
            )
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if done.failed or client.ledger.total().calls != count:
            raise RuntimeError(f"generate failed: {done.failed} of {count} items")
        return count / seconds, cpu * 1000 / count

    def body(item: dict[str, str]) -> dict[str, Any]:  # what moot sends for an instruction
        return {
            "model": "scripted",
            "messages": [{"role": "user", "content": item["instruction"]}],
            "temperature": 0.7,
            "max_tokens": 256,
            "seed": 0,
        }

    raw_sides = _common.raw_sides(url)

    async def raw_run(side: str, concurrency: int, count: int) -> tuple[float, float]:
        bodies = [body(item) for item in instructions(count, next(served) * count)]
        return await _common.raw_calls(raw_sides[side], bodies, concurrency)

    # warm-up: imports, the SDK's types, connections
    await moot_run(8, 40, cache=True)
    for side in raw_sides:
        await raw_run(side, 8, 40)

    points = []
    for concurrency in levels:
        point = Point(concurrency, calls)
        for rep in range(reps):
            for side in SIDES if rep % 2 == 0 else SIDES[::-1]:
                if side.startswith("raw"):
                    rate, cpu = await raw_run(side, concurrency, calls)
                else:
                    rate, cpu = await moot_run(concurrency, calls, cache=side == "cached")
                point.rate.setdefault(side, []).append(rate)
                point.cpu.setdefault(side, []).append(cpu)
        print(
            f"  C={concurrency:<3d} {calls} calls: "
            + "  ".join(f"{s} {point.mean(point.rate, s):6.1f}/s" for s in SIDES),
            flush=True,
        )
        points.append(point)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 400 calls, C=32")
    parser.add_argument("--calls", type=int, default=2400, help="calls per side and point")
    parser.add_argument("--concurrency", type=int, action="append", help="C (repeatable)")
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    levels = args.concurrency or ([32] if args.quick else [32, 256])
    calls = 400 if args.quick else args.calls
    print(
        "bench_generate_throughput: moot generate's engine vs the raw openai SDK, one call per item"
    )
    print(f"machine: {_common.machine_note()}")
    started = time.perf_counter()
    with _common.scripted_server(LATENCY) as url:
        points = asyncio.run(measure(url, levels, calls, reps=2))
    print(f"after: {_common.machine_note()}; total {time.perf_counter() - started:.0f} s")
    print()
    print(
        f"{'C':>4} {'calls':>6} "
        + " ".join(f"{s + ' calls/s':>19}" for s in SIDES)
        + " "
        + " ".join(f"{'CPU ms ' + s:>18}" for s in SIDES)
    )
    for p in points:
        print(
            f"{p.concurrency:>4d} {p.calls:>6d} "
            + " ".join(f"{p.mean(p.rate, s):>19.1f}" for s in SIDES)
            + " "
            + " ".join(f"{p.mean(p.cpu, s):>18.2f}" for s in SIDES)
        )
    print()
    for p in points:
        raw_rate, raw_cpu = p.mean(p.rate, "raw"), p.mean(p.cpu, "raw")
        # the faster raw client says what the machine allowed (httpx's pool slows raw at C=256)
        fastest = max(raw_rate, p.mean(p.rate, "raw/aiohttp"))
        said = _common.verdict(fastest, p.concurrency, LATENCY)
        print(
            f"latency {LATENCY:g} s, C={p.concurrency}: moot/raw cache off "
            f"{p.mean(p.rate, 'moot') / raw_rate:.3f}, cache on "
            f"{p.mean(p.rate, 'cached') / raw_rate:.3f} (goal >= 0.8); CPU per call moot/raw "
            f"{p.mean(p.cpu, 'moot') / raw_cpu:.2f}, cached/raw "
            f"{p.mean(p.cpu, 'cached') / raw_cpu:.2f}"
            f" (goal <= 1.25); moot/(raw aiohttp) "
            f"{p.mean(p.cpu, 'moot') / p.mean(p.cpu, 'raw/aiohttp'):.2f}"
            + (f" [{said}]" if said else "")
        )


if __name__ == "__main__":
    main()
