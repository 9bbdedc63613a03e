"""Judge throughput (items/s): `moot eval controllability` machinery vs the reference's batches.

The scripted server (own process, 50 ms latency) answers every controllability prompt with
"100 0". moot = `evaluate_controllability` (the run engine, cache off) at concurrency 1
and 32. Reference way = the DEBATunE script's: batches of 3 requests sent with `asyncio.gather`,
each batch awaited before the next (raw openai SDK). Prints items/s and the ratios last.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import _common

LATENCY = 0.05
BATCH = 3  # the reference's default batch size for controllability


def synthetic(count: int) -> list:
    from moot.core.data.responses import Response

    return [
        Response(
            f"Topic {i // 6}",
            "affirmative" if i % 2 == 0 else "negative",
            f"argument {i}",
            f"Argue for argument {i}",
            f"Response number {i} argues its side at length.",
        )
        for i in range(count)
    ]


async def moot_rate(url: str, responses: list, concurrency: int) -> float:
    from moot.core import ModelClient, RetryPolicy, Role, parse_spec
    from moot.graphs.debatune_eval import evaluate_controllability
    from moot.graphs.judging import Judging

    role = Role("judge", parse_spec("openai/judge", api_base=url, max_concurrency=64), 0.0)
    client = ModelClient(cache=None, retry=RetryPolicy(attempts=1))
    with _common.temp_dir("moot-bench-judge-") as out:
        start = time.perf_counter()
        result = await evaluate_controllability(responses, Judging(out, role, client, concurrency))
        seconds = time.perf_counter() - start
    if result.summary["parse_failures"] or result.errors:
        raise RuntimeError(f"judging failed: {result.summary}")
    return len(responses) / seconds


async def reference_rate(url: str, responses: list) -> float:
    import openai

    from moot.agents.debatune_judges import CONTROLLABILITY
    from moot.prompts import render

    client = openai.AsyncOpenAI(base_url=url, api_key="bench", max_retries=0)
    bodies = [
        [
            {"role": "system", "content": render(CONTROLLABILITY.system)},
            {
                "role": "user",
                "content": render(CONTROLLABILITY.prompt, topic=r.topic, arguments=r.response),
            },
        ]
        for r in responses
    ]
    start = time.perf_counter()
    for i in range(0, len(bodies), BATCH):
        await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="judge", messages=m, temperature=0.0, max_tokens=512
                )
                for m in bodies[i : i + BATCH]
            )
        )
    seconds = time.perf_counter() - start
    await client.close()
    return len(bodies) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few items")
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    from moot.testing import Rule

    count = 48 if args.quick else 480
    print("bench_judge_throughput: controllability judging, items/s, 50 ms server latency")
    print(f"machine: {_common.machine_note()}")
    responses = synthetic(count)
    rules = [Rule(pattern="how many percent", reply="100 0\nSupportive.")]
    with _common.scripted_server(LATENCY, rules=rules) as url:
        asyncio.run(moot_rate(url, responses[:12], 4))  # warm-up: imports, connections
        reference = asyncio.run(reference_rate(url, responses))
        serial = asyncio.run(moot_rate(url, responses[: max(24, count // 8)], 1))
        parallel = asyncio.run(moot_rate(url, responses, 32))
    print(f"after: {_common.machine_note()}")
    print(f"reference way (batches of {BATCH} awaited in turn): {reference:7.1f} items/s")
    print(f"moot, concurrency 1:                           {serial:7.1f} items/s")
    print(f"moot, concurrency 32:                          {parallel:7.1f} items/s")
    print(f"ratio moot C=1 / reference: {serial / reference:.2f}")
    print(f"ratio moot C=32 / reference: {parallel / reference:.2f}")


if __name__ == "__main__":
    main()
