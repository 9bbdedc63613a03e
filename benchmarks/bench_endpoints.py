"""Several endpoints of one model: calls/s against N replicas vs one, and how the calls spread.

Each replica is a scripted server in its own process that answers `--slots` requests at once,
each after `--latency` seconds (a vLLM replica's finite batch, roughly); the others queue. The
client is `ModelClient`, as every command uses it: `--sessions` debates run `--concurrency` at a
time, each making `--turns` calls in a row inside `moot.core.llm.endpoints.sticky` (as the run
engine does for each item). The same workload runs against one replica (one ``--api-base``) and
against `--replicas` of them (``--api-base A,B,C``: a litellm Router), in the same process, in
alternating order over `--rounds` rounds. It prints calls/s for each, their ratio, the calls each
replica answered, and how many debates touched more than one replica (0 is the goal).

Run: ``python benchmarks/bench_endpoints.py`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import statistics
import time

import _common


async def workload(urls: list[str], args: argparse.Namespace) -> tuple[float, float, dict, int]:
    """Calls/s, client CPU ms per call, calls per endpoint, debates on more than one endpoint.

    Each debate's calls are their own ledger stage, so the ledger says where each debate went.
    The CPU time is this process's (the servers run in their own): what the client spends per
    call, which the machine's other tenants do not inflate as they do the wall time.
    """
    from moot.core.llm.endpoints import sticky
    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec

    client = ModelClient(cache=None, retry=RetryPolicy(attempts=3))
    role = Role("bench", parse_spec("openai/scripted", api_base=urls), 0.7)
    warm = [{"role": "user", "content": "Warm up."}]
    await client.complete(role, warm, stage="warm-up", max_tokens=8)  # imports, connections
    limit = asyncio.Semaphore(args.concurrency)

    async def debate(session: int) -> None:
        async with limit:
            with sticky(f"debate-{session}"):
                history = f"Debate {session}: open the case."
                for turn in range(args.turns):
                    messages = [{"role": "user", "content": f"{history} Turn {turn}."}]
                    stage = f"debate-{session}"
                    reply = await client.complete(role, messages, stage=stage, max_tokens=32)
                    history += " " + reply.text[:80]

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(debate(s) for s in range(args.sessions)))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    endpoints: collections.Counter = collections.Counter()
    wandering = 0
    for (_, stage, _), usage in client.ledger.entries.items():
        if stage != "warm-up":
            endpoints.update(usage.endpoints)
            wandering += len(usage.endpoints) > 1
    calls = args.sessions * args.turns
    return calls / seconds, 1000 * cpu / calls, dict(endpoints), wandering


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--sessions", type=int, default=48)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.sessions, args.rounds, args.latency = 16, 1, 0.2
    _common.offline_env()
    _common.guard_loopback()
    print(_common.machine_note())
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(_common.scripted_server(args.latency, slots=args.slots))
            for _ in range(args.replicas)
        ]
        rates: dict[str, list[float]] = {"one": [], "several": []}
        cpus: dict[str, list[float]] = {"one": [], "several": []}
        spread: collections.Counter = collections.Counter()
        wandering = 0
        for round_ in range(args.rounds):
            order = ("one", "several") if round_ % 2 == 0 else ("several", "one")
            for mode in order:
                chosen = urls[:1] if mode == "one" else urls
                rate, cpu, endpoints, moved = asyncio.run(workload(chosen, args))
                rates[mode].append(rate)
                cpus[mode].append(cpu)
                if mode == "several":
                    spread.update(endpoints)
                    wandering += moved
                shown = f"{rate:7.1f} calls/s, client CPU {cpu:5.1f} ms/call"
                print(f"round {round_} {mode:8s} {shown} {endpoints}")
    one, several = (statistics.median(rates[m]) for m in ("one", "several"))
    print(
        f"replicas={args.replicas} latency={args.latency}s slots={args.slots} "
        f"concurrency={args.concurrency} sessions={args.sessions} turns={args.turns}"
    )
    print(f"one endpoint: {one:.1f} calls/s (median of {args.rounds})")
    print(f"{args.replicas} endpoints: {several:.1f} calls/s; ratio {several / one:.2f}x")
    one_cpu, several_cpu = (statistics.median(cpus[m]) for m in ("one", "several"))
    print(
        f"client CPU per call: {one_cpu:.1f} ms direct, {several_cpu:.1f} ms through the Router "
        f"({several_cpu / one_cpu:.2f}x)"
    )
    total = sum(spread.values())
    shares = ", ".join(f"{100 * n / total:.0f}%" for n in spread.values())
    print(f"share per endpoint over all rounds: {shares}")
    print(f"debates on more than one endpoint: {wandering} of {args.sessions * args.rounds}")


if __name__ == "__main__":
    main()
