"""Load test: `moot debate` under faults, SIGKILLed mid-run and rerun, against a clean run.

400 debates of 6 calls (200 topics x 2 stances, 1 argument per stance proposed by debater A, 2
rounds: the proposal call, A, B, A, B, A's conclusion; 2,400 calls) against the scripted server at
0.2 s latency, run twice through the real CLI (``python -m moot debate``) in separate output
folders with separate request caches:

* clean: no faults, run to the end;
* faulty: 25% of chat requests answered 429 or 500 (12.5% each of all requests, drawn from a
  seed, the request body and its arrival count: the same faults whatever the arrival order),
  killed with SIGKILL once half the calls are answered, then rerun with the same command until it
  exits 0.

The server runs in this process (threads that mostly sleep out the latency) and logs every
request. Reported: calls/s (answered calls over wall time), peak RSS of each moot process
(``wait4``), retries (requests answered with a fault: each one is sent again), calls paid twice
(request bodies answered 200 more than once; every one should have been in flight at the kill,
i.e. its first 200 answer left the server at most one latency plus a margin before the kill),
and whether the two ``dataset.jsonl`` files are byte-identical.

Run: ``python benchmarks/bench_load.py`` (a few minutes on 2 cores; ``--debates 40`` for a
smoke run).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import _common

LATENCY = 0.2
CALLS_PER_DEBATE = 6  # each stance's proposal call is shared by 1 debate (1 argument per stance)
ARGUMENTS = '{"arguments": ["Cities that try it see cleaner air and safer streets."]}'
MARGIN = 1.0  # seconds: a 200 answer this close before the kill may not have reached moot


@dataclass
class Process:
    """One `moot debate` process: how it ended and what it used."""

    returncode: int
    seconds: float
    peak_rss_mib: float
    stderr: str


def write_topics(path: Path, count: int) -> None:
    topics = [f"Should city {i} ban private cars from its centre?" for i in range(count)]
    path.write_text(json.dumps(topics), encoding="utf-8")


def debate(
    url: str, topics: Path, out: Path, cache: Path, concurrency: int, kill_after: int = 0
) -> tuple[Process, float | None]:
    """Run `moot debate` once; with `kill_after`, SIGKILL it once that many calls are answered.

    Returns the process and the kill time (``time.time()``), if killed.
    """
    command = [
        sys.executable, "-m", "moot", "debate", "--topics", str(topics), "--out", str(out),
        "--model", "openai/scripted", "--api-base", url, "--arguments-per-stance", "1",
        "--rounds", "2", "--turn-tokens", "64", "--conclusion-tokens", "64",
        "--concurrency", str(concurrency), "--max-concurrency", str(concurrency),
        "--cache", str(cache), "--quiet",
    ]  # fmt: skip
    env = _common.offline_env() | {"OPENAI_API_KEY": "scripted"}
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    killed = None
    if kill_after:
        while process.poll() is None and SERVER.answered() < kill_after:
            time.sleep(0.1)
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            killed = time.time()
    assert process.stderr is not None
    stderr = process.stderr.read()  # until it exits (the pipe closes)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    return Process(process.returncode, seconds, usage.ru_maxrss / 1024, stderr), killed


class Server:
    """The scripted server of the current run and the count of its answered chat calls."""

    def __init__(self) -> None:
        self.server = None

    def answered(self) -> int:
        assert self.server is not None
        return sum(r.status == 200 and r.path.endswith("/chat/completions") for r in self.log())

    def log(self) -> list:
        assert self.server is not None
        return self.server.requests


SERVER = Server()


def served(log: list) -> str:
    """Answered calls/s between the first and the last request: without moot's start-up."""
    times = [r.time for r in log if r.path.endswith("/chat/completions")]
    answered = sum(r.status == 200 for r in log if r.path.endswith("/chat/completions"))
    return f"{answered / (max(times) - min(times) + LATENCY):.1f}/s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--debates", type=int, default=400, help="debates (even; default 400)")
    parser.add_argument("--fault-rate", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=32, help="--concurrency and --max-")
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of calls, then SIGKILL")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    from moot.testing import Fault, Rule, ScriptedServer

    calls = args.debates * CALLS_PER_DEBATE
    half = args.fault_rate / 2  # 429 on this share of all requests, 500 on as many
    faults = [
        Fault("429", times=10**9, rate=half, seed=args.seed),
        Fault("500", times=10**9, rate=half / (1 - half), seed=args.seed + 1),
    ]
    rules = [Rule("list your arguments", ARGUMENTS)]
    print(f"bench_load: moot debate, {args.debates} debates / {calls} calls at {LATENCY:g} s")
    print(f"machine: {_common.machine_note()}")
    with _common.temp_dir("moot-bench-load-") as work:
        topics = work / "topics.json"
        write_topics(topics, args.debates // 2)
        with ScriptedServer(latency=LATENCY, rules=rules) as server:
            SERVER.server = server
            clean, _ = debate(
                server.url, topics, work / "clean", work / "clean.sqlite", args.concurrency
            )
            clean_log = server.requests
        assert clean.returncode == 0, clean.stderr
        runs: list[Process] = []
        with ScriptedServer(latency=LATENCY, rules=rules, faults=faults) as server:
            SERVER.server = server
            out, cache = work / "faulty", work / "faulty.sqlite"
            first, killed = debate(
                server.url, topics, out, cache, args.concurrency, int(calls * args.kill_at)
            )
            runs.append(first)
            while len(runs) < 4:
                run, _ = debate(server.url, topics, out, cache, args.concurrency)
                runs.append(run)
                if run.returncode == 0:
                    break
            log = server.requests
        same = (work / "clean" / "dataset.jsonl").read_bytes() == (
            out / "dataset.jsonl"
        ).read_bytes()

    chat = [r for r in log if r.path.endswith("/chat/completions")]
    paid = [r for r in chat if r.status == 200]
    # a body the kill cut short reaches the server as invalid JSON: not a fault, not retried
    cut = sum(r.outcome == "invalid_request" for r in chat)
    retried = Counter(r.outcome for r in chat if r.status != 200 and r.outcome != "invalid_request")
    bodies = Counter(json.dumps(r.body, sort_keys=True) for r in paid)
    twice = {body for body, count in bodies.items() if count > 1}
    first_paid: dict[str, float] = {}
    for r in paid:
        first_paid.setdefault(json.dumps(r.body, sort_keys=True), r.time)
    in_flight = killed is not None and all(
        killed - LATENCY - MARGIN <= first_paid[body] <= killed for body in twice
    )
    faulty_seconds = sum(r.seconds for r in runs)
    clean_calls = sum(r.status == 200 for r in clean_log if r.path.endswith("/chat/completions"))
    print(f"after: {_common.machine_note()}")
    print()
    rss = f"peak RSS {clean.peak_rss_mib:.0f} MiB"
    print(f"clean run: {clean_calls} calls in {clean.seconds:.1f} s, {rss}")
    for index, run in enumerate(runs):
        what = "killed" if index == 0 and killed else f"exit {run.returncode}"
        rss = f"peak RSS {run.peak_rss_mib:.0f} MiB"
        print(f"faulty run {index + 1}: {what} after {run.seconds:.1f} s, {rss}")
        if run.returncode not in (0, -signal.SIGKILL):
            print("  " + run.stderr.strip().replace("\n", "\n  "))
    print()
    print(
        f"calls/s, clean: {clean_calls / clean.seconds:.1f}"
        f" ({served(clean_log)} from first to last call)"
    )
    print(f"calls/s, faulty (kill + reruns, answered 200): {len(paid) / faulty_seconds:.1f}")
    print(f"peak RSS: {max(r.peak_rss_mib for r in [clean, *runs]):.0f} MiB")
    print(f"retries (requests answered with a fault): {sum(retried.values())} {dict(retried)}"
          f" = {sum(retried.values()) / len(chat):.1%} of {len(chat)} requests")  # fmt: skip
    print(f"requests cut short by the kill (sent half, answered 400): {cut}")
    print(f"calls paid: {len(paid)} for {len(bodies)} distinct requests (clean run: {clean_calls})")
    print(f"calls paid twice: {len(twice)}; all in flight at the kill: {in_flight}"
          f" (at most {args.concurrency} requests were in flight)")  # fmt: skip
    print(f"dataset.jsonl byte-identical to the clean run's: {same}")


if __name__ == "__main__":
    main()
