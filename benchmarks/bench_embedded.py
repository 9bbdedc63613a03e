"""The embedded model (``local/smollm2``, llama.cpp via xllamacpp): tokens/s and the README demo.

1. The README demo, timed as a subprocess (first, while no other model is loaded in this process)::

       moot debate --topics <2 topics> --out <tmp> --arguments-per-stance 1 --rounds 2 \\
           --turn-tokens 160 --conclusion-tokens 320 --no-cache --quiet

2. Tokens/s of one 128-token completion through ``ModelClient(cache=None).complete`` (median of 3),
   and of N concurrent completions (aggregate), N = the embedded server's parallel slots
   (``--slots``, default ``embedded.MAX_SLOTS``), which decode together.

Baseline, interleaved with (2) run by run: the same request sent bare to the same xllamacpp server,
``Server.handle_chat_completions(body)`` in a worker thread (no HTTP, no moot). The ratio
moot/bare is moot's overhead on the embedded path (HTTP + client + model layer).

tokens/s = completion tokens / wall time of the call (prompt processing included; the prompt is
the same for every run, so llama.cpp's prompt cache treats both paths alike).

Run: ``python benchmarks/bench_embedded.py`` (``--quick``: 32-token completions, 1 run each, and a
1-topic, 1-round demo instead of the README one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import _common

TOPICS = [
    "Cities should ban private cars from their centres",
    "Homework should be abolished in primary schools",
]
MESSAGES = [
    {"role": "system", "content": "You are a skilled debater. Argue with evidence."},
    {
        "role": "user",
        "content": "Write a long, detailed essay of at least 500 words arguing that cities should "
        "ban private cars from their centres. Cover air quality, safety, commerce and transport.",
    },
]
TEMPERATURE = 0.7


def run_demo(quick: bool) -> dict[str, Any]:
    """Time the README demo as a subprocess; returns wall time, exit code and ledger totals."""
    with _common.temp_dir("moot-bench-demo-") as tmp:
        topics = tmp / "topics.json"
        topics.write_text(json.dumps(TOPICS[:1] if quick else TOPICS), encoding="utf-8")
        out = tmp / "out"
        sizes = ["--rounds", "1", "--turn-tokens", "32", "--conclusion-tokens", "32"]
        if not quick:
            sizes = ["--rounds", "2", "--turn-tokens", "160", "--conclusion-tokens", "320"]
        cmd = [
            sys.executable,
            "-m",
            "moot",
            "debate",
            "--topics",
            str(topics),
            "--out",
            str(out),
            "--arguments-per-stance",
            "1",
            *sizes,
            "--no-cache",
            "--quiet",
        ]
        print("demo: moot " + " ".join(cmd[3:]).replace(str(tmp), "<tmp>"), flush=True)
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, env=_common.offline_env(), capture_output=True, text=True, timeout=1800
        )
        seconds = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"demo failed ({proc.returncode}): {proc.stderr[-2000:]}")
        manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        total = manifest["ledger"]["total"]
        counts = manifest.get("counts", {})
        return {
            "seconds": seconds,
            "returncode": proc.returncode,
            "calls": total["calls"],
            "completion_tokens": total["completion_tokens"],
            "prompt_tokens": total["prompt_tokens"],
            "debates_ok": counts.get("debates_ok", "?"),
            "debates": counts.get("debates_planned", counts.get("debates", "?")),
        }


async def measure(max_tokens: int, runs: int, slots: int) -> dict[str, list[float]]:
    """Interleaved tokens/s samples: single and `slots` concurrent, moot and bare."""
    from moot.core.llm import embedded
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec

    spec = parse_spec("local/smollm2", timeout=600.0)
    role = Role("bench", spec, TEMPERATURE)
    client = ModelClient(cache=None, retry=RetryPolicy(attempts=1), concurrency=slots)
    client.prepare(spec)  # starts the embedded server with `slots` parallel slots
    endpoint = embedded.start_embedded(spec.model)
    server = getattr(embedded, "_server", None)
    if not hasattr(server, "handle_chat_completions"):
        raise RuntimeError("moot.core.llm.embedded._server changed: no bare xllamacpp baseline")
    print(
        f"embedded server: {endpoint.api_base} ({endpoint.slots} slots of "
        f"{endpoint.context_window} tokens)",
        flush=True,
    )

    async def via_moot(seed: int) -> int:
        reply = await client.complete(
            role, MESSAGES, stage="bench", max_tokens=max_tokens, seed=seed
        )
        return reply.completion_tokens

    def bare_sync(seed: int) -> int:
        body = {
            "model": spec.model,
            "messages": MESSAGES,
            "temperature": TEMPERATURE,
            "max_tokens": max_tokens,
            "seed": seed,
        }
        reply = server.handle_chat_completions(body)
        if "error" in reply or "usage" not in reply:
            raise RuntimeError(f"bare xllamacpp request failed: {str(reply)[:300]}")
        return int(reply["usage"]["completion_tokens"])

    async def bare(seed: int) -> int:
        return await asyncio.to_thread(bare_sync, seed)

    async def rate(fn: Any, seeds: list[int]) -> float:
        start = time.perf_counter()
        tokens = await asyncio.gather(*(fn(seed) for seed in seeds))
        return sum(tokens) / (time.perf_counter() - start)

    # Warm-up: weights paged in, every slot used once, HTTP connections open.
    await rate(via_moot, [900 + i for i in range(slots)])
    await rate(bare, [900 + i for i in range(slots)])

    many = f"{slots} concurrent"
    samples: dict[str, list[float]] = {
        "moot single": [],
        "bare single": [],
        f"moot {many}": [],
        f"bare {many}": [],
    }
    for number in range(runs):
        order = ("moot", "bare") if number % 2 == 0 else ("bare", "moot")
        for kind in order:
            fn = via_moot if kind == "moot" else bare
            samples[f"{kind} single"].append(await rate(fn, [number]))
            print(f"  run {number + 1} {kind} single: {samples[f'{kind} single'][-1]:.1f} tok/s")
        for kind in order:
            fn = via_moot if kind == "moot" else bare
            value = await rate(fn, [100 * (i + 1) + number for i in range(slots)])
            samples[f"{kind} {many}"].append(value)
            print(f"  run {number + 1} {kind} {many}: {value:.1f} tok/s", flush=True)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run (short completions)")
    parser.add_argument("--skip-demo", action="store_true", help="only the tokens/s part")
    parser.add_argument("--slots", type=int, default=None, help="parallel slots (default: most)")
    args = parser.parse_args()
    from moot.core.llm.embedded import slots_for

    slots = slots_for(args.slots)
    _common.offline_env()
    _common.guard_loopback()
    max_tokens, runs = (32, 1) if args.quick else (128, 3)
    print(f"bench_embedded: local/smollm2, {max_tokens}-token completions, {runs} runs")
    print(f"machine: {_common.machine_note()}", flush=True)
    demo = None if args.skip_demo else run_demo(args.quick)
    if demo:
        print(f"  demo: {demo['seconds']:.1f} s", flush=True)
    print(f"machine: {_common.machine_note()}", flush=True)
    samples = asyncio.run(measure(max_tokens, runs, slots))
    print(f"after: {_common.machine_note()}")

    med = {name: statistics.median(values) for name, values in samples.items()}

    def paired(kind: str) -> float:
        pairs = zip(samples[f"moot {kind}"], samples[f"bare {kind}"], strict=True)
        return statistics.median([m / b for m, b in pairs])

    print()
    print(f"{'':26}{'moot tok/s':>12}{'bare tok/s':>12}{'moot/bare':>11}")
    many = f"{slots} concurrent"
    for kind in ("single", many):
        print(
            f"{kind + ' ' + str(max_tokens) + '-token':26}"
            f"{med['moot ' + kind]:>12.1f}{med['bare ' + kind]:>12.1f}{paired(kind):>11.3f}"
        )
    print("(median of runs; bare = xllamacpp Server.handle_chat_completions, same server)")
    print(f"ratio moot/bare tokens/s (single): {paired('single'):.3f}")
    print(f"ratio moot/bare tokens/s ({many}): {paired(many):.3f}")
    print(f"embedded tokens/s, single {max_tokens}-token completion: {med['moot single']:.1f}")
    print(f"embedded tokens/s, {many} (aggregate): {med['moot ' + many]:.1f}")
    if demo:
        label = "smoke demo (1 topic, 1 round)" if args.quick else "README demo"
        print(
            f"{label} wall time: {demo['seconds']:.1f} s "
            f"({demo['debates_ok']}/{demo['debates']} debates ok, {demo['calls']} calls, "
            f"{demo['completion_tokens']} completion tokens = "
            f"{demo['completion_tokens'] / demo['seconds']:.1f} tok/s, exit {demo['returncode']})"
        )


if __name__ == "__main__":
    main()
