"""Test-wide setup: offline, isolated caches, no network beyond loopback."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OMP_NUM_THREADS", "1")
for _key in ("OPENAI_API_KEY", "MOOT_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> None:
    """Refuse any connection that is not to this machine (tests must never touch the network)."""
    if self.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        host = address[0]
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise ConnectionRefusedError(f"tests may not reach the network ({host})")
    return _real_connect(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOOT_CACHE_DIR", str(tmp_path / "moot-cache"))


@pytest.fixture
def scripted() -> Iterator[object]:
    """A scripted OpenAI-compatible server on 127.0.0.1, stopped after the test."""
    from moot.core.scripted_server import ScriptedServer

    with ScriptedServer() as server:
        yield server


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent (users' clones)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared/data ({path} not found)")
    return path
