"""Cost as the work grows: `moot debate` on 4,000 and on 100,000 debates, then `moot view` of both.

Each point is one ``moot debate`` process (``python -m moot``, as a user runs it) against the
scripted server at latency 0 in its own process: synthetic topics that carry their arguments (no
argument calls), 1 argument per stance, 1 round, so 3 calls per debate (A, B, A's conclusion),
``--concurrency 32``, a fresh ``--out``, ``--no-cache`` (``--cache on``: a fresh request cache in
the point's folder instead; ``both``: each).

Why a process per point and not ``run_debatune`` in process: peak RSS is a per-process high-water
mark (the small run's peak would hide in the large one's), and the rerun of a finished run is what
a user waits for at the shell, start-up and imports included. Figures per point:

* calls/s: the ledger's calls over the run's own seconds (``manifest.json`` ``runs[-1].seconds``:
  planning, debates, log compaction, dataset; not the interpreter's start-up, a constant that
  would flatter the larger run);
* CPU ms per call: the process's user + system time (``os.wait4`` on that child alone, start-up
  included) over its calls;
* peak RSS: the process's ``ru_maxrss``;
* rerun: wall seconds of the same command again on the finished folder (all skipped, no call),
  start-up included, median of 3;
* view: wall seconds of ``moot view RUN`` (a fresh interpreter), the page's bytes with the data
  files beside it, and headless chromium (Debian's ``/usr/bin/chromium`` through playwright) from
  ``page.goto(file://...)`` until the page has drawn its first page of items
  (``body[data-ready]``), then until a clicked debate's transcript is drawn.

Printed last: calls/s large/base (target >= 0.9), peak RSS large/base (target <= 1.2), the large
run's rerun (target <= 10 s), view build (<= 10 s), open (<= 5 s) and page size (<= 50 MB).

Run: ``python benchmarks/bench_scale.py`` (``--base 4000 --n 100000``, 312,000 calls: ~45 min at
~120 calls/s; ``--n 20000`` or ``--quick``, 40 and 400 debates, while developing).
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
    cpu: float  # the process's user + system seconds
    peak_mb: float

    @property
    def rate(self) -> float:
        return self.calls / self.run_seconds

    @property
    def cpu_ms(self) -> float:
        return self.cpu * 1000 / self.calls


@dataclass
class Page:
    build: float  # wall seconds of `moot view RUN`
    mb: float  # the page
    data_mb: float  # its data files beside it (a large page's records)
    open: float  # headless chromium until the first page of items is drawn
    item: float  # from a click on a debate until its transcript is drawn


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


def run_process(cmd: list[str], log: Path) -> tuple[float, float, float]:
    """Run `cmd`; its wall seconds, CPU seconds and peak RSS in MB (fails loudly)."""
    with log.open("wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[3]} exited {proc.returncode}: {log.read_text()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: KiB


def moot_debate(url: str, topics: Path, out: Path, cache: Path | None) -> tuple[float, ...]:
    """Run ``moot debate`` once: `run_process`'s figures."""
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
    return run_process(cmd, out.with_name(out.name + ".stderr"))


def point_name(debates: int, cache: bool) -> str:
    return f"out-{debates}-{'cache' if cache else 'nocache'}"


def run_point(url: str, folder: Path, debates: int, cache: bool) -> Point:
    topics = write_topics(folder / f"topics-{debates}.json", debates)
    name = point_name(debates, cache)
    out = folder / name
    wall, cpu, peak = moot_debate(url, topics, out, folder / f"{name}.sqlite" if cache else None)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    calls = manifest["ledger"]["total"]["calls"]
    if calls != debates * CALLS_PER_DEBATE or manifest["counts"]["failures"]:
        raise RuntimeError(f"{name}: {calls} calls, {manifest['counts']}")
    point = Point(debates, cache, calls, manifest["runs"][-1]["seconds"], wall, cpu, peak)
    print(
        f"  {debates:6d} debates, cache {'on ' if cache else 'off'}: {point.rate:7.1f} calls/s "
        f"({calls} calls in {point.run_seconds:.1f} s, wall {wall:.1f} s), "
        f"{point.cpu_ms:.2f} CPU ms/call, peak RSS {peak:.0f} MB   [{_common.machine_note()}]",
        flush=True,
    )
    return point


def rerun(url: str, folder: Path, debates: int, cache: bool, times: int = 3) -> list[float]:
    """Wall seconds of `times` reruns of the finished run (everything skipped)."""
    name = point_name(debates, cache)
    topics, out = folder / f"topics-{debates}.json", folder / name
    seconds = []
    for _ in range(times):
        wall, _cpu, _peak = moot_debate(
            url, topics, out, folder / f"{name}.sqlite" if cache else None
        )
        seconds.append(wall)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    if manifest["ledger"]["total"]["calls"]:
        raise RuntimeError(f"{name}: the rerun made calls: {manifest['ledger']['total']}")
    return seconds


def view(run: Path, debates: int) -> Page:
    """`moot view RUN`, timed, then its page opened in headless chromium."""
    page_path = run / "view.html"
    cmd = [sys.executable, "-m", "moot", "view", str(run), "--out", str(page_path), "--quiet"]
    build, _cpu, _peak = run_process(cmd, run.with_name(run.name + ".view.stderr"))
    data = sum(path.stat().st_size for path in run.glob("view.data/*"))
    opened, item = browse(page_path, debates)
    page = Page(build, page_path.stat().st_size / 1e6, data / 1e6, opened, item)
    print(
        f"  moot view of {debates} debates: {build:.2f} s, {page.mb:.1f} MB (+ {page.data_mb:.1f} "
        f"MB of data files), opened in {opened:.2f} s, a debate drawn in {item * 1000:.0f} ms   "
        f"[{_common.machine_note()}]",
        flush=True,
    )
    return page


def browse(page_path: Path, debates: int) -> tuple[float, float]:
    """Seconds until headless chromium has drawn the page, then a clicked debate."""
    sys.path.insert(0, str(_common.ROOT))
    from playwright.sync_api import sync_playwright

    from tests.cli.browser import ARGS, CHROMIUM

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        start = time.perf_counter()
        tab.goto(page_path.as_uri())
        tab.wait_for_selector("body[data-ready='1']", timeout=300_000)
        opened = time.perf_counter() - start
        count = tab.locator("[data-role=count]").first.inner_text()
        if count != f"{debates} of {debates} items":
            raise RuntimeError(f"{page_path}: the page counts {count!r}")
        start = time.perf_counter()
        tab.locator("tr.item-row").nth(3).click()
        tab.wait_for_selector("[data-role=detail] .turn", timeout=60_000)
        item = time.perf_counter() - start
        browser.close()
    if errors:
        raise RuntimeError(f"{page_path}: {errors}")
    return opened, item


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=4000, help="debates of the baseline run")
    parser.add_argument("--n", type=int, default=100_000, help="debates of the large run")
    parser.add_argument("--quick", action="store_true", help="smoke run: 40 and 400 debates")
    parser.add_argument(
        "--cache", choices=("off", "on", "both"), default="off", help="which modes to run"
    )
    args = parser.parse_args()
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.cache]
    _common.offline_env()
    small, large = (40, 400) if args.quick else (args.base, args.n)
    print(f"bench_scale: moot debate at {small} and {large} debates, latency 0, C={CONCURRENCY}")
    print(f"machine: {_common.machine_note()}")
    started = time.perf_counter()
    points: dict[tuple[int, bool], Point] = {}
    reruns: dict[bool, list[float]] = {}
    pages: dict[int, Page] = {}
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
        for debates in (small, large):
            pages[debates] = view(folder / point_name(debates, modes[0]), debates)
    print(f"after: {_common.machine_note()}; total {time.perf_counter() - started:.0f} s")
    print()
    print(
        f"{'debates':>8} {'cache':>6} {'calls':>7} {'calls/s':>8} {'run s':>7} "
        f"{'CPU ms/call':>12} {'peak MB':>8}"
    )
    for (debates, cache), p in sorted(points.items()):
        print(
            f"{debates:>8d} {'on' if cache else 'off':>6} {p.calls:>7d} {p.rate:>8.1f} "
            f"{p.run_seconds:>7.1f} {p.cpu_ms:>12.2f} {p.peak_mb:>8.0f}"
        )
    print()
    print(
        f"{'debates':>8} {'view s':>7} {'page MB':>8} {'data MB':>8} {'open s':>7} {'item ms':>8}"
    )
    for debates, g in sorted(pages.items()):
        print(
            f"{debates:>8d} {g.build:>7.2f} {g.mb:>8.1f} {g.data_mb:>8.1f} {g.open:>7.2f} "
            f"{g.item * 1000:>8.0f}"
        )
    print()
    for cache in modes:
        a, b = points[small, cache], points[large, cache]
        label = "on" if cache else "off"
        print(
            f"cache {label}: calls/s {large}/{small} {b.rate / a.rate:.3f} (target >= 0.9); "
            f"peak RSS {large}/{small} {b.peak_mb / a.peak_mb:.3f} (target <= 1.2); "
            f"rerun of {large} finished debates {_common.median(reruns[cache]):.2f} s "
            "(median of 3; target <= 10 s)"
        )
    g = pages[large]
    print(
        f"moot view of {large} debates: written in {g.build:.2f} s (target <= 10 s), opened in "
        f"{g.open:.2f} s (target <= 5 s), {g.mb:.1f} MB (target <= 50 MB)"
    )


if __name__ == "__main__":
    main()
