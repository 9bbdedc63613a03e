"""Debatrix judging throughput: `judge_debates` model calls/s against the raw openai SDK's ceiling.

The PanelBench DebateArt debates (``../shared/data/panelbench/debateart.jsonl``; without it the
script prints a skip message and exits 2) judged by the ``debatrix`` framework (3 dimensions, the
paper's two-call debater scoring, schema-constrained extraction) against the scripted server in
its own process, whose rules answer every speech analysis, judgment and panel with the same
300-word text numbered by the server (`bench_judge_prompts.judge_rules`), so no two requests are
the same and the request cache never answers; extractions get schema JSON or a short sentence.
At concurrency C = 32 (``concurrency=C`` debates, spec ``max_concurrency=C``):

* raw: the raw ``openai.AsyncOpenAI`` SDK (max_retries=0) alone, C asyncio workers sending the
  request bodies moot sent in a warm-up run of the same debates (recorded), in the same order,
  back to back;
* raw/aiohttp: the same bodies POSTed with moot's own HTTP client (`transports.http`, aiohttp),
  their JSON replies decoded and nothing more: the floor of any client on this machine;
* moot: ``judge_debates`` with ``ModelClient(cache=None)`` (every super-step checkpointed), a
  fresh temporary output folder per run, timed end to end (claim, checkpoints, judgments log,
  reports, summary);
* cached: the same with a fresh request cache (every call a miss + write; checkpoints when a
  judgment stops), as users run it.

Each at 0.05 s latency (the first 40 debates, ``--debates``, run twice: raw-moot-cached, then
cached-moot-raw, rates averaged; CPU-bound on 2 shared cores) and at 0.5 s (16 debates:
latency-bound on a quiet machine; a judgment is a chain of about 20 calls in a row, 3 at a time,
so with fewer debates moot cannot keep 32 requests in flight as the raw workers, who ignore that
order, do).
Besides calls/s it prints this process's CPU time per call (the server runs in its own), which the
machine's other tenants inflate far less than the wall time. moot/raw is printed last.

Run: ``python benchmarks/bench_debatrix_throughput.py`` (~3 min; ``--quick`` for a smoke run of
a few debates); ``--profile FILE`` writes a cProfile of one moot run (cache off) at 0.05 s.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common
from bench_judge_prompts import DATA, debateart, judge_rules

MODEL = "scripted"
CONCURRENCY = 32


@dataclass
class Point:
    latency: float
    debates: int
    calls: int
    rates: dict[str, list[float]] = field(default_factory=dict)  # calls/s per run
    cpu: dict[str, list[float]] = field(default_factory=dict)  # client CPU ms per call

    def add(self, kind: str, rate: float, cpu_ms: float) -> None:
        self.rates.setdefault(kind, []).append(rate)
        self.cpu.setdefault(kind, []).append(cpu_ms)

    def rate(self, kind: str) -> float:
        return sum(self.rates[kind]) / len(self.rates[kind])

    def cpu_ms(self, kind: str) -> float:
        return sum(self.cpu[kind]) / len(self.cpu[kind])

    def ratio(self, kind: str) -> float:
        return self.rate(kind) / self.rate("raw")


async def measure(
    url: str, debates: list[Any], latency: float, reps: int, profile: Path | None
) -> Point:
    """One latency's point: a recording warm-up, then `reps` rounds of raw, moot and cached."""

    from moot.agents.debatrix_judges import FRAMEWORKS
    from moot.core.llm.cache import RequestCache
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec
    from moot.graphs.debatrix_run import JudgeSettings, judge_debates

    spec = parse_spec(f"openai/{MODEL}", api_base=url, max_concurrency=CONCURRENCY)
    settings = JudgeSettings(Role("judge", spec, 0.0), FRAMEWORKS["debatrix"], constrained=True)
    payloads: list[dict[str, Any]] = []

    class Recording(ModelClient):
        """Records each request body as the OpenAI transport sends it."""

        async def complete(self, role: Any, messages: Any, **kwargs: Any) -> Any:
            body = {"model": MODEL, "messages": messages, "temperature": role.temperature}
            for name in ("max_tokens", "seed", "response_format"):
                if kwargs.get(name) is not None:
                    body[name] = kwargs[name]
            payloads.append(body)
            return await super().complete(role, messages, **kwargs)

    async def moot_run(client: Any, cache: bool = False) -> tuple[float, float, int]:
        with _common.temp_dir("moot-bench-debatrix-") as out:
            if cache:
                client.cache = RequestCache(out / "cache" / "requests.sqlite")
            start, cpu = time.perf_counter(), time.process_time()
            summary = await judge_debates(
                debates, out / "run", settings, client, concurrency=CONCURRENCY
            )
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        calls = client.ledger.total().calls
        if summary.count("complete") != len(debates) or summary.parse_failures:
            raise RuntimeError(
                f"judging failed: {summary.count('complete')}/{len(debates)} complete, "
                f"{summary.parse_failures} parse failures"
            )
        return calls / seconds, 1000 * cpu / calls, calls

    def fresh() -> Any:
        return ModelClient(cache=None, retry=RetryPolicy(attempts=1))

    raw_sides = _common.raw_sides(url)

    async def raw_run(side: str) -> tuple[float, float]:
        return await _common.raw_calls(raw_sides[side], payloads, CONCURRENCY)

    # warm-up: imports (langgraph, tiktoken), connections, and the request bodies for raw
    await moot_run(Recording(cache=None, retry=RetryPolicy(attempts=1)))
    point = Point(latency, len(debates), len(payloads))
    for rep in range(reps):
        order = ("raw", "raw/aiohttp", "moot", "cached")
        for kind in order if rep % 2 == 0 else order[::-1]:
            if kind.startswith("raw"):
                point.add(kind, *await raw_run(kind))
                continue
            rate, cpu_ms, calls = await moot_run(fresh(), cache=kind == "cached")
            if calls != point.calls:
                raise RuntimeError(f"{kind}: {calls} calls, the warm-up made {point.calls}")
            point.add(kind, rate, cpu_ms)
    if profile is not None:
        profiler = cProfile.Profile()
        profiler.enable()
        await moot_run(fresh())
        profiler.disable()
        profiler.dump_stats(profile)
    return point


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smoke run: a few debates")
    parser.add_argument("--data", type=Path, default=DATA, help="PanelBench DebateArt JSONL")
    parser.add_argument("--debates", type=int, default=40, help="debates judged at 0.05 s")
    parser.add_argument("--slow-debates", type=int, default=16, help="debates judged at 0.5 s")
    parser.add_argument("--reps", type=int, default=2, help="rounds at 0.05 s")
    parser.add_argument("--profile", type=Path, help="write a cProfile of a moot run at 0.05 s")
    args = parser.parse_args()
    debates = debateart(args.data, "bench_debatrix_throughput")
    if debates is None:
        return 2
    if args.quick:
        plan = [(0.05, debates[:6], 1), (0.5, debates[:4], 1)]
    else:
        plan = [(0.05, debates[: args.debates], args.reps), (0.5, debates[: args.slow_debates], 1)]
    print(f"bench_debatrix_throughput: judge_debates (debatrix) vs raw openai SDK, C={CONCURRENCY}")
    print(f"machine: {_common.machine_note()}")
    started = time.perf_counter()
    points = []
    for latency, chosen, reps in plan:
        profile = args.profile if latency < 0.5 else None
        with _common.scripted_server(latency, rules=judge_rules(numbered=True)) as url:
            point = asyncio.run(measure(url, chosen, latency, reps, profile))
        points.append(point)
        print(
            f"  latency {latency:g}s {point.debates} debates, {point.calls} calls: "
            + "  ".join(f"{k} {point.rate(k):.1f}/s" for k in point.rates),
            flush=True,
        )
    print(f"after: {_common.machine_note()}; total {time.perf_counter() - started:.0f} s")
    print()
    print(
        f"{'latency':>8} {'debates':>8} {'calls':>6} {'raw calls/s':>12} {'moot calls/s':>13} "
        f"{'cached calls/s':>15} {'CPU ms/call raw':>16} {'raw/aiohttp':>12} {'moot':>6} "
        f"{'cached':>7} "
        f"{'ideal C/latency':>16}"
    )
    for p in points:
        print(
            f"{p.latency:>7g}s {p.debates:>8d} {p.calls:>6d} {p.rate('raw'):>12.1f} "
            f"{p.rate('moot'):>13.1f} {p.rate('cached'):>15.1f} {p.cpu_ms('raw'):>16.2f} "
            f"{p.cpu_ms('raw/aiohttp'):>12.2f} {p.cpu_ms('moot'):>6.2f} {p.cpu_ms('cached'):>7.2f} "
            f"{CONCURRENCY / p.latency:>16.0f}"
        )
    print()
    for p in points:
        fastest = max(p.rate("raw"), p.rate("raw/aiohttp"))  # what the machine allowed
        said = _common.verdict(fastest, CONCURRENCY, p.latency)
        print(
            f"moot/raw at latency {p.latency:g} s, C={CONCURRENCY}: cache off "
            f"{p.ratio('moot'):.3f}, cache on {p.ratio('cached'):.3f} (goal >= 0.8 at 0.05 s); "
            f"CPU per call moot/raw {p.cpu_ms('moot') / p.cpu_ms('raw'):.2f}, cached/raw "
            f"{p.cpu_ms('cached') / p.cpu_ms('raw'):.2f} (goal <= 1.25); moot/(raw "
            f"aiohttp) {p.cpu_ms('moot') / p.cpu_ms('raw/aiohttp'):.2f}"
            + (f" [{said}]" if said else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
