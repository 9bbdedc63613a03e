"""Helpers shared by the benchmarks: offline environment, loopback guard, scripted server, stats.

Not a benchmark itself. Each ``bench_*.py`` puts this folder on ``sys.path`` (Python does that for
the script's own folder), so ``import _common`` works when run as ``python benchmarks/bench_x.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]


def offline_env() -> dict[str, str]:
    """Set (and return) environment variables that keep every library offline and quiet."""
    values = {
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TOKENIZERS_PARALLELISM": "false",
    }
    os.environ.update(values)
    # Loopback only: no proxy may see the traffic .
    for name in list(os.environ):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            del os.environ[name]
    return dict(os.environ)


def guard_loopback() -> None:
    """Refuse any Python-level TCP connection that is not to this machine (the tests' guard)."""
    if str(ROOT) not in sys.path:  # `tests` is importable from the repository's root
        sys.path.insert(0, str(ROOT))
    from tests.netguard import guard_loopback as guard

    guard("benchmarks")


@contextlib.contextmanager
def scripted_server(
    latency: float,
    *,
    rules: Sequence[Any] = (),
    startup_timeout: float = 60.0,
    slots: int | None = None,
    **config: Any,
) -> Iterator[str]:
    """Run ``python -m moot.testing.server`` in its own process; yield its base URL.

    A separate process keeps the server's threads off the client's GIL. `rules` are its
    scripted replies (``Rule``s), handed over in a ``ServerConfig`` file with `config`'s other
    fields (``tpm``, ``limit_window`` ...); `slots` bounds the requests it answers at once (a
    replica's batch).
    """
    with temp_dir("moot-bench-server-") as folder:
        path = folder / "server.json"
        given = bool(rules or config)
        if given:
            from moot.testing import ServerConfig

            text = ServerConfig(latency=latency, rules=list(rules), **config).to_json()
            path.write_text(text, encoding="utf-8")
        cmd = [
            sys.executable,
            "-m",
            "moot.testing.server",
            "--latency",
            repr(latency),
            "--port",
            "0",
            *(["--config", str(path)] if given else []),
            *(["--slots", str(slots)] if slots else []),
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=offline_env())
        try:
            assert proc.stdout is not None
            selector = selectors.DefaultSelector()
            selector.register(proc.stdout, selectors.EVENT_READ)
            if not selector.select(startup_timeout):
                raise RuntimeError(f"scripted server did not start within {startup_timeout:g}s")
            line = proc.stdout.readline().strip()
            selector.close()
            if not line.startswith("READY "):
                raise RuntimeError(f"scripted server failed to start: {line!r}")
            url = line.split()[1]
            if urlsplit(url).hostname != LOOPBACK:
                raise RuntimeError(f"scripted server is not on {LOOPBACK}: {url}")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def local_model_env() -> None:
    """`offline_env` and `guard_loopback`, the tests' tiny models importable, no progress bars.

    For benchmarks that run models in process (built by ``tests/tiny*.py`` from configs).
    """
    offline_env()
    guard_loopback()  # puts the repository's root on sys.path
    from transformers.utils import logging

    logging.disable_progress_bar()


@contextlib.contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        yield Path(name)


def median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return statistics.median(values)


#: A client's calls/s against the raw SDK's mean something only where the raw SDK itself runs at
#: full speed: below this, the machine (shared, loaded), not the client, is the limit.
FULL_SPEED = 300.0


def verdict(raw_rate: float, concurrency: int, latency: float) -> str:
    """How to read a point's moot/raw ratio: "" (the raw side at full speed), else why not.

    A point whose concurrency over latency is below `FULL_SPEED` is latency-bound: both sides
    wait on the server, and the ratio says how much moot adds to the wait. A client-bound point
    whose raw side made fewer than `FULL_SPEED` calls/s is inconclusive. Where a benchmark runs
    the raw SDK over two HTTP clients, `raw_rate` is the faster's: at C = 256 httpx's own pool,
    not the machine, slows the other (encode/httpcore#1035).
    """
    if concurrency / latency < FULL_SPEED:
        return "latency-bound"
    if raw_rate < FULL_SPEED:
        return (
            f"inconclusive: raw {raw_rate:.0f} calls/s < {FULL_SPEED:.0f}, the machine is the limit"
        )
    return ""


def machine_note() -> str:
    """CPU count and load, to read the figures against (the machine is shared)."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"cpus={os.cpu_count()} loadavg=({load}) python={sys.version.split()[0]}"


class Stopwatch:
    """``with Stopwatch() as sw: ...; sw.seconds``."""

    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def raw_sides(url: str) -> dict[str, Callable[[dict[str, Any]], Awaitable[Any]]]:
    """The raw sides of a throughput benchmark, by name: each sends one request body.

    ``raw``: ``openai.AsyncOpenAI`` (max_retries=0) as users write it, over httpx with moot's
    connection limits (1,000 connections, 100 kept alive; the SDK's own defaults too), with
    ``chat.completions.create``. ``raw/aiohttp``: the body POSTed with moot's own HTTP client
    (`transports.http`), its JSON reply decoded and nothing more: the floor of any client on
    this machine, so the part of moot's figures that is its engine, not its HTTP, shows.
    """
    import httpx
    import openai

    from moot.core.llm.transports.http import HttpClient

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    sdk = openai.AsyncOpenAI(
        base_url=url,
        api_key="bench",
        max_retries=0,
        http_client=httpx.AsyncClient(limits=limits, timeout=600),
    )
    http, endpoint = HttpClient(600), url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}

    async def over_sdk(body: dict[str, Any]) -> Any:
        return await sdk.chat.completions.create(**body)

    async def over_aiohttp(body: dict[str, Any]) -> Any:
        response = await http.post(endpoint, headers, json.dumps(body).encode())
        return json.loads(response.content)

    return {"raw": over_sdk, "raw/aiohttp": over_aiohttp}


async def raw_calls(
    send: Callable[[dict[str, Any]], Awaitable[Any]],
    bodies: Iterable[dict[str, Any]],
    concurrency: int,
) -> tuple[float, float]:
    """`bodies` sent by `concurrency` workers with `send` (a side of `raw_sides`), back to back.

    Returns:
        Calls per second, and this process's CPU ms per call.
    """
    shared = iter(bodies)  # each worker takes the next call
    calls = 0

    async def worker() -> None:
        nonlocal calls
        for body in shared:
            await send(body)
            calls += 1

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return calls / seconds, cpu * 1000 / calls
