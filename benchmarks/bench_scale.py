"""Cost as the work grows: `moot debate` on 400 and on 4,000 debates (issue 19, target 3).

Each point is one ``moot debate`` process (``python -m moot``, as a user runs it) against the
scripted server at latency 0 in its own process: synthetic topics that carry their arguments (no
argument calls), 1 argument per stance, 1 round, so 3 calls per debate (A, B, A's conclusion),
``--concurrency 32``, a fresh ``--out``; once with ``--no-cache`` and once with a fresh request
cache (``--cache`` in the point's folder).

Why a process per point and not ``run_debatune`` in process: peak RSS is a per-process high-water
mark (the 400-debate run's peak would hide in the 4,000-debate one's), and the rerun of a finished
run is what a user waits for at the shell, start-up and imports included. Figures per point:

* calls/s: the ledger's calls over the run's own seconds (``manifest.json`` ``runs[-1].seconds``:
  planning, debates, log compaction, dataset; not the interpreter's start-up, a constant that
  would flatter the larger run);
* peak RSS: the process's ``ru_maxrss`` (``os.wait4`` on that child alone);
* rerun: wall seconds of the same command again on the finished 4,000-debate folder (all
  skipped), start-up included.

Printed last: calls/s 4000/400 (target >= 0.9), peak RSS 4000/400 (target <= 1.2), rerun seconds
(target < 2), for cache off and on.

Run: ``python benchmarks/bench_scale.py`` (``--quick``: 40 and 400 debates; ``--cache off``
or ``on``: one mode). The full run is 26,400 calls: on 2 shared cores at load ~20, 40 min.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _common

CALLS_PER_DEBATE = 3  # rounds=1: A, B, then A's conclusion
CONCURRENCY = 32


@dataclass
class Point:
    debates: int
    cache: bool
    calls: int
    run_seconds: float  # the run's own time, from the manifest
    wall: float  # the process, start-up included
    peak_mb: float

    @property
    def rate(self) -> float:
        return self.calls / self.run_seconds


def write_topics(path: Path, debates: int) -> Path:
    """`debates` / 2 topics, each with one given argument per stance."""
    topics = [
        {
            "topic": f"Synthetic motion {i}: cities should ban private cars from their centres",
            "Affirmative": {"arguments": [f"Argument {i}: car-free centres cut road deaths."]},
            "Negative": {"arguments": [f"Argument {i}: bans hurt shops and disabled residents."]},
        }
        for i in range(debates // 2)
    ]
    path.write_text(json.dumps(topics), encoding="utf-8")
    return path


def moot_debate(url: str, topics: Path, out: Path, cache: Path | None) -> tuple[float, float]:
    """Run ``moot debate`` once; its wall seconds and peak RSS in MB (fails loudly)."""
    cmd = [
        sys.executable,
        "-m",
        "moot",
        "debate",
        "--topics",
        str(topics),
        "--out",
        str(out),
        "--model",
        "openai/scripted",
        "--api-base",
        url,
        "--arguments-per-stance",
        "1",
        "--rounds",
        "1",
        "--turn-tokens",
        "48",
        "--conclusion-tokens",
        "48",
        "--concurrency",
        str(CONCURRENCY),
        "--max-retries",
        "0",
        "--quiet",
        *(["--cache", str(cache)] if cache else ["--no-cache"]),
    ]
    log = out.with_name(out.name + ".stderr")
    with log.open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    if proc.returncode != 0:
        raise RuntimeError(f"moot debate exited {proc.returncode}: {log.read_text()[-2000:]}")
    return wall, usage.ru_maxrss / 1024  # Linux: KiB


def run_point(url: str, folder: Path, debates: int, cache: bool) -> Point:
    topics = write_topics(folder / f"topics-{debates}.json", debates)
    name = f"out-{debates}-{'cache' if cache else 'nocache'}"
    out = folder / name
    wall, peak = moot_debate(url, topics, out, folder / f"{name}.sqlite" if cache else None)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    calls = manifest["ledger"]["total"]["calls"]
    if calls != debates * CALLS_PER_DEBATE or manifest["counts"]["failures"]:
        raise RuntimeError(f"{name}: {calls} calls, {manifest['counts']}")
    point = Point(debates, cache, calls, manifest["runs"][-1]["seconds"], wall, peak)
    print(
        f"  {debates:5d} debates, cache {'on ' if cache else 'off'}: {point.rate:7.1f} calls/s "
        f"({calls} calls in {point.run_seconds:.1f} s, wall {wall:.1f} s), "
        f"peak RSS {peak:.0f} MB   [{_common.machine_note()}]",
        flush=True,
    )
    return point


def rerun(url: str, folder: Path, debates: int, cache: bool, times: int = 3) -> list[float]:
    """Wall seconds of `times` reruns of the finished run (everything skipped)."""
    name = f"out-{debates}-{'cache' if cache else 'nocache'}"
    topics, out = folder / f"topics-{debates}.json", folder / name
    seconds = []
    for _ in range(times):
        wall, _peak = moot_debate(url, topics, out, folder / f"{name}.sqlite" if cache else None)
        seconds.append(wall)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if manifest["ledger"]["total"]["calls"]:
        raise RuntimeError(f"{name}: the rerun made calls: {manifest['ledger']['total']}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 40 and 400 debates")
    parser.add_argument(
        "--cache", choices=("off", "on", "both"), default="both", help="which modes to run"
    )
    args = parser.parse_args()
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.cache]
    _common.offline_env()
    small, large = (40, 400) if args.quick else (400, 4000)
    print(f"bench_scale: moot debate at {small} and {large} debates, latency 0, C={CONCURRENCY}")
    print(f"machine: {_common.machine_note()}")
    started = time.perf_counter()
    points: dict[tuple[int, bool], Point] = {}
    reruns: dict[bool, list[float]] = {}
    with _common.scripted_server(0.0) as url, _common.temp_dir("moot-bench-scale-") as folder:
        for cache in modes:
            for debates in (small, large):
                points[debates, cache] = run_point(url, folder, debates, cache)
            reruns[cache] = rerun(url, folder, large, cache)
            print(
                f"  rerun of the finished {large}-debate run, cache {'on' if cache else 'off'}: "
                + ", ".join(f"{s:.2f} s" for s in reruns[cache]),
                flush=True,
            )
    print(f"after: {_common.machine_note()}; total {time.perf_counter() - started:.0f} s")
    print()
    print(f"{'debates':>8} {'cache':>6} {'calls':>6} {'calls/s':>8} {'run s':>7} {'peak MB':>8}")
    for (debates, cache), p in sorted(points.items()):
        print(
            f"{debates:>8d} {'on' if cache else 'off':>6} {p.calls:>6d} {p.rate:>8.1f} "
            f"{p.run_seconds:>7.1f} {p.peak_mb:>8.0f}"
        )
    print()
    for cache in modes:
        a, b = points[small, cache], points[large, cache]
        label = "on" if cache else "off"
        print(
            f"cache {label}: calls/s {large}/{small} {b.rate / a.rate:.3f} (target >= 0.9); "
            f"peak RSS {large}/{small} {b.peak_mb / a.peak_mb:.3f} (target <= 1.2); "
            f"rerun of {large} finished debates {_common.median(reruns[cache]):.2f} s "
            "(median of 3; target < 2 s)"
        )


if __name__ == "__main__":
    main()
