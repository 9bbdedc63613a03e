"""A fork server for the CLI tests: `moot` runs as a real process without paying its imports.

A fresh `python -m moot` spends 2-5 s of CPU importing openai and langgraph before its
first line of work, and the suite starts hundreds of them. One server per test worker imports
those once, single-threaded, and forks a child per run; the child is a real process (its own pid,
stdout/stderr pipes, environment, working directory, default SIGINT, the interpreter's exit steps
but the preloaded modules' teardown: `_finalize`), so what the tests see is what a user's shell
sees. Modules that read the environment at import time
(huggingface_hub, transformers, litellm) are deliberately not pre-imported.

torch is pre-imported too: every run of `moot eval pd`, `generate`, `train`, `curate` or a dense
index imports it, ~3 s of CPU each (2.8 s user measured here), dozens of times a suite. It reads
nothing a test varies at import, except that OpenMP takes its thread count from the server's
``OMP_NUM_THREADS`` (1, as tests/conftest.py sets it) when torch loads it; no CLI test runs moot
with another. The server never runs a torch operation, so its children fork from an idle torch,
as a DataLoader's forked workers do.

Protocol, one connection per run: the client sends a JSON request (args, env, cwd) with the write
ends of its stdout and stderr pipes; a waiter process forks the run, sends back its pid, waits for
it and sends its exit code (negative: killed by that signal).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
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


def serve(path: str) -> None:
    """Accept runs on the Unix socket `path` until stdin closes (the client's process ended)."""
    import importlib

    for name in PRELOAD:
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

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._path = ""

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="moot-fork-")
        self._path = str(Path(folder) / "socket")
        code = f"from tests.cli.forkserver import serve; serve({self._path!r})"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[2],
            env={k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")},
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the moot fork server did not start")

    def run(
        self, args: list[str], env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess:
        """Run `moot args` in a forked child; as `subprocess.run(..., capture_output=True)`."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(self._path)
        request = {"args": args, "env": env, "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode()], [out_w, err_w])
        os.close(out_w)
        os.close(err_w)
        replies = conn.makefile("r")
        pid = int(replies.readline())
        outputs: dict[int, bytes] = {}

        def drain(fd: int) -> None:
            with os.fdopen(fd, "rb") as pipe:
                outputs[fd] = pipe.read()

        readers = [threading.Thread(target=drain, args=(fd,)) for fd in (out_r, err_r)]
        for reader in readers:
            reader.start()
        conn.settimeout(timeout)
        try:
            code = int(replies.readline())
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(["moot", *args], timeout) from None
        finally:
            for reader in readers:
                reader.join()
            conn.close()

        def decode(fd: int) -> str:  # as text=True: universal newlines
            return outputs[fd].decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")

        return subprocess.CompletedProcess(["moot", *args], code, decode(out_r), decode(err_r))


FORK_SERVER = ForkServer()
