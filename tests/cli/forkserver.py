"""A fork server for the CLI tests: `moot` runs as a real process without paying its imports.

A fresh `python -m moot` spends 2-5 s of CPU importing openai and langgraph before its
first line of work, and the suite starts hundreds of them. One server per test worker imports
those once, single-threaded, and forks a child per run; the child is a real process (its own pid,
stdout/stderr pipes, environment, working directory, default SIGINT, the interpreter's exit steps
but the preloaded modules' teardown: `_finalize`), so what the tests see is what a user's shell
sees. Modules that read the environment at import time (huggingface_hub, transformers, litellm)
are not pre-imported, but for `datasets` (below).

torch is pre-imported too: every run of `moot eval pd`, `generate`, `train`, `curate` or a dense
index imports it, ~3 s of CPU each (2.8 s user measured here), dozens of times a suite. It reads
nothing a test varies at import, except that OpenMP takes its thread count from the server's
``OMP_NUM_THREADS`` (1, as tests/conftest.py sets it) when torch loads it; no CLI test runs moot
with another. The server never runs a torch operation, so its children fork from an idle torch,
as a DataLoader's forked workers do.

`datasets` (1.3 s of CPU to import) is imported by every `moot debate` that finishes (its SFT
dataset folder) and by the training commands. It reads the Hugging Face settings from the
environment when imported (its cache, the Hub's endpoint, offline mode), so a second server
imports it too, and only runs whose settings (`HF_SETTINGS`) are that server's own fork from it;
the rest (the Hub tests' runs) fork from the first.

Protocol, one connection per run: the client sends a JSON request (args, env, cwd, and resource
limits: ``{"RLIMIT_FSIZE": bytes}`` makes the run's disk full at that file size) with the write
ends of its stdout and stderr pipes; a waiter process forks the run, sends back its pid, waits for
it and sends its exit code (negative: killed by that signal).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

PRELOAD = ("openai", "langgraph.graph", "torch", "moot.cli.main")
#: Prefixes of the environment variables `datasets` and huggingface_hub read at import.
HF_SETTINGS = ("HF_", "HUGGINGFACE_", "XDG_", "DATASETS_", "USE_", "HOME")


def serve(path: str, preload: list[str]) -> None:
    """Accept runs on the Unix socket `path` until stdin closes (the client's process ended)."""
    import importlib

    for name in preload:
        importlib.import_module(name)
    gc.freeze()  # children collect only their own objects and leave the preloaded pages shared
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([server, sys.stdin], [], [])
        if sys.stdin in ready:  # EOF: the test worker that started us is gone
            return
        conn, _ = server.accept()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        if os.fork() == 0:  # the waiter
            server.close()
            _wait_for_run(conn, json.loads(message), fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def _wait_for_run(conn: socket.socket, request: dict, fds: list[int]) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _become_moot(request, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def _become_moot(request: dict, fds: list[int]) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for target, fd in zip((1, 2), fds, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    os.close(devnull)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as at a terminal
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for name, soft in request["limits"].items():  # the run's own, as a shell's `ulimit` sets
        resource.setrlimit(
            getattr(resource, name), (soft, resource.getrlimit(getattr(resource, name))[1])
        )
    sys.argv = ["moot", *request["args"]]
    from moot.cli import main

    try:
        code = main(request["args"])
    except SystemExit as exc:  # argparse's errors and --help
        code = exc.code
    except BaseException:
        traceback.print_exc()  # as the interpreter reports an uncaught exception
        code = 1
    os._exit(_finalize(code))


def _finalize(code: object) -> int:
    """Python's exit steps for a run (`Py_FinalizeEx`), but the teardown of the preloaded modules.

    Tearing down openai, langgraph and torch module by module cost ~1.3 s per run, more than
    most runs' own work (0.45 s with the server's objects frozen). Kept: non-daemon threads
    and executors are joined (a run that would hang at exit hangs here), atexit handlers run,
    the run's own garbage is collected (its __del__ warnings and unclosed-file flushes happen),
    and the standard streams are flushed. SystemExit's code maps as the interpreter maps it.
    """
    threading._shutdown()  # what the interpreter calls first on exit: joins non-daemon threads
    atexit._run_exitfuncs()
    gc.collect()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return code & 0xFF


class ForkServer:
    """The client side: starts the server on first use, then runs `moot` through it."""

    def __init__(self, preload: tuple[str, ...]) -> None:
        self.preload = preload
        #: The server's environment, what its preloaded modules read (this worker's, no keys).
        self.env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._path = ""

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="moot-fork-")
        self._path = str(Path(folder) / "socket")
        code = (
            f"from tests.cli.forkserver import serve; serve({self._path!r}, {list(self.preload)!r})"
        )
        self._process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
            env=self.env,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the moot fork server did not start")

    def start(
        self, args: list[str], env: dict[str, str], limits: dict[str, int] | None = None
    ) -> ForkedRun:
        """Start `moot args` in a forked child; as `subprocess.Popen(..., text=True)` with pipes.

        `limits` are the child's soft resource limits (`resource` names: ``RLIMIT_FSIZE``).
        """
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self._path)
        request = {"args": args, "env": env, "cwd": os.getcwd(), "limits": limits or {}}
        socket.send_fds(conn, [json.dumps(request).encode()], [out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        return ForkedRun(["moot", *args], conn, out_r, err_r)

    def run(
        self,
        args: list[str],
        env: dict[str, str],
        timeout: float,
        limits: dict[str, int] | None = None,
    ) -> subprocess.CompletedProcess:
        """Run `moot args` in a forked child; as `subprocess.run(..., capture_output=True)`."""
        process = self.start(args, env, limits)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)


class ForkedRun:
    """A forked `moot` run, as much of `subprocess.Popen` as the tests use.

    The server's waiter sends the run's pid, then its exit code (negative: the signal that
    killed it) when it ends; stdout and stderr are drained as they come, so a chatty run never
    blocks on a full pipe.
    """

    def __init__(self, args: list[str], conn: socket.socket, out_r: int, err_r: int) -> None:
        self.args = args
        self.returncode: int | None = None
        self._conn, self._buffer = conn, b""
        self.pid = self._reply(None)
        self._outputs: dict[int, bytes] = {}
        self._fds = (out_r, err_r)
        self._readers = [threading.Thread(target=self._drain, args=(fd,)) for fd in self._fds]
        for reader in self._readers:
            reader.start()

    def _drain(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as pipe:
            self._outputs[fd] = pipe.read()

    def _reply(self, timeout: float | None) -> int | None:
        """The waiter's next line as an int, or None if none came within `timeout` seconds."""
        while b"\n" not in self._buffer:
            if not select.select([self._conn], [], [], timeout)[0]:
                return None
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError(f"the moot fork server lost {' '.join(self.args)}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return int(line)

    def poll(self) -> int | None:
        """The exit code if the run has ended, else None."""
        if self.returncode is None:
            code = self._reply(0)
            if code is not None:
                self._ended(code)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the run to end and return its exit code.

        Raises:
            subprocess.TimeoutExpired: Still running after `timeout` seconds.
        """
        if self.returncode is None:
            code = self._reply(timeout)
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self._ended(code)
        return self.returncode  # type: ignore[return-value]

    def _ended(self, code: int) -> None:
        self.returncode = code
        self._conn.close()

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the run to end; its stdout and stderr, decoded as ``text=True`` does."""
        self.wait(timeout)
        for reader in self._readers:
            reader.join()

        def decode(fd: int) -> str:  # universal newlines
            return (
                self._outputs[fd]
                .decode("utf-8", "replace")
                .replace("\r\n", "\n")
                .replace("\r", "\n")
            )

        return decode(self._fds[0]), decode(self._fds[1])


_SERVERS = (ForkServer(PRELOAD), ForkServer((*PRELOAD, "datasets")))


def fork_server_for(env: dict[str, str]) -> ForkServer:
    """The server with `datasets` if `env`'s Hugging Face settings are its own, else the other."""
    base, with_datasets = _SERVERS

    def settings(environ: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in environ.items() if k.startswith(HF_SETTINGS)}

    return with_datasets if settings(env) == settings(with_datasets.env) else base
