"""The pytest fixture of `moot.testing`: ``pytest_plugins = ["moot.testing.pytest_plugin"]``.

A module of its own, and no ``pytest11`` entry point: `moot.testing` imports without pytest, and
the fixture loads only in the test suites that ask for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moot.testing.server import ScriptedServer

__all__ = ["scripted_server"]


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A running `ScriptedServer` on 127.0.0.1 (its base URL is ``.url``), stopped after the test.

    Script its replies with ``add_rule`` and its failures with ``add_fault``; read what it was
    sent from ``requests``.
    """
    with ScriptedServer() as server:
        yield server
