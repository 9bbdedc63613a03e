"""On-disk cache of model responses, so reruns and prompt iteration re-pay nothing.

One SQLite file in WAL mode, shared safely by concurrent tasks and by several processes (shards on
one machine). Keys are SHA-256 digests of the request's identity: model, endpoint, messages,
sampling parameters and seed. Credentials are never part of a key or a value.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


def default_cache_path() -> Path:
    """``$MOOT_CACHE_DIR/requests.sqlite``, by default under ``~/.cache/moot``."""
    root = os.environ.get("MOOT_CACHE_DIR") or Path.home() / ".cache" / "moot"
    return Path(root) / "requests.sqlite"


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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable enough for a cache, 10x faster
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached response for `key`, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a response (first writer wins; responses for one key are interchangeable)."""
        data = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO responses VALUES (?, ?)", (key, data))

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
