"""A transport an installed package declares (entry points, group ``moot.transports``) works on
the command line, and one that cannot load is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import moot_env, run_fresh_moot

pytestmark = pytest.mark.subprocess

TRANSPORT = """
from moot.core import Reply, Transport


class Echo2(Transport):
    name = "echo2"
    prefixes = ("echo2",)
    in_process = True
    free = True

    def __init__(self, spec):
        self.identity = spec.name
        self.greeting = spec.model

    @classmethod
    def connect(cls, spec, concurrency=None):
        return cls(spec)

    async def send(self, messages, params):
        reply = f"{self.greeting}: {messages[-1]['content'][:20]}"
        return Reply(reply, "stop", {"prompt_tokens": 5, "completion_tokens": 3})
"""


def installed(folder: Path, entry: str, module: str = "") -> dict[str, str]:
    """An installed package (its dist-info on PYTHONPATH) declaring the transport `entry`."""
    folder.mkdir(parents=True)
    (folder / "moot_echo2.py").write_text(module or TRANSPORT, encoding="utf-8")
    info = folder / "moot_echo2-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: moot-echo2\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[moot.transports]\n{entry}\n", encoding="utf-8")
    return moot_env(PYTHONPATH=str(folder))


def test_an_installed_transport_answers_on_the_command_line(tmp_path):
    env = installed(tmp_path / "site", "echo2 = moot_echo2:Echo2")
    result = run_fresh_moot("models", "check", "echo2/hello", env=env)
    assert result.returncode == 0, result.stderr
    assert "echo2/hello: ok in" in result.stdout and "reply: hello: " in result.stdout


def test_a_transport_that_cannot_load_is_one_line_and_exit_2(tmp_path):
    env = installed(tmp_path / "site", "broken = moot_echo2:Echo2", "raise ImportError('no')\n")
    result = run_fresh_moot("models", "check", "echo2/hello", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "moot: error: transport broken (moot_echo2:Echo2) cannot be loaded: no"
    )
