"""On-disk cache of model responses, so reruns and prompt iteration re-pay nothing.

One SQLite file in WAL mode, shared safely by concurrent tasks and by several processes (shards on
one machine, a debate and a judge at once), processes that create it at the same moment included.
Keys are SHA-256 digests of the request's identity: model, endpoint, messages, sampling parameters
and seed. Credentials are never part of a key or a value.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from moot.core.errors import InputError, WriteError, machine_failure, os_problem, writing

#: How long a process waits for another that holds the file (a write, or the cache's creation).
BUSY_TIMEOUT_S = 10.0


def cache_folder() -> Path:
    """``$MOOT_CACHE_DIR``, by default ``~/.cache/moot``."""
    return Path(os.environ.get("MOOT_CACHE_DIR") or Path.home() / ".cache" / "moot")


def default_cache_path() -> Path:
    """``$MOOT_CACHE_DIR/requests.sqlite``, by default under ``~/.cache/moot``."""
    return cache_folder() / "requests.sqlite"


def request_key(identity: dict[str, Any]) -> str:
    """Stable digest of a request's identity (canonical JSON, sorted keys)."""
    canonical = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class RequestCache:
    """A persistent key → JSON response map.

    Args:
        path: The SQLite file; its folder is created if needed.

    Example:
        >>> cache = RequestCache(tmp_path / "c.sqlite")  # doctest: +SKIP
        >>> cache.put("k", {"text": "hi"}); cache.get("k")  # doctest: +SKIP
        {'text': 'hi'}
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise InputError(self.path, "a folder, not a request cache file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a full or read-only disk is the machine's, as below
            if machine_failure(exc):
                raise WriteError(self.path.parent, os_problem(exc) or str(exc)) from None
            raise InputError(self.path, f"cannot make its folder ({exc.strerror})") from None
        try:  # `timeout` sets the busy timeout before the first statement
            self._db = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._refused(exc) from None
        try:
            self._set_up()
        except sqlite3.Error as exc:
            self._db.close()
            raise self._refused(exc) from None

    def _refused(self, exc: sqlite3.Error) -> Exception:
        """Why the file cannot be opened: the machine (`WriteError`), or the file (`InputError`).

        A full disk or too many open files is the machine's; not SQLite, locked past
        `BUSY_TIMEOUT_S`, the file's.
        """
        problem = os_problem(exc)
        if problem is not None:
            return WriteError(self.path, problem)
        return InputError(self.path, f"cannot open as a request cache ({exc})")

    def _set_up(self) -> None:
        """WAL mode and the table, retried while another connection holds the file.

        SQLite skips the busy handler where waiting could deadlock, as when switching a new file
        to WAL while another process creates it (issue 36): such a "database is locked" is
        retried here, with jitter, until `BUSY_TIMEOUT_S` has passed.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        for statement in (
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=NORMAL",  # durable enough for a cache, 10x faster
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ):
            while True:
                try:
                    self._db.execute(statement).fetchall()
                    break
                except sqlite3.OperationalError as exc:
                    code = exc.sqlite_errorcode & 0xFF  # the primary code of an extended one
                    busy = code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                    if not busy or time.monotonic() > deadline:
                        raise
                    time.sleep(random.uniform(0.002, 0.02))

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached response for `key`, or None.

        Raises:
            WriteError: The file failed at the OS (a full disk, too many open files, ...).
        """
        with self._lock, writing(self.path):
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a response (first writer wins; responses for one key are interchangeable).

        Raises:
            WriteError: The file failed at the OS (a full disk, a read-only folder, ...).
        """
        data = json.dumps(value, ensure_ascii=False)
        with self._lock, writing(self.path):
            self._db.execute("INSERT OR IGNORE INTO responses VALUES (?, ?)", (key, data))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
