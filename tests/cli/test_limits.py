"""Rate limits through the `moot` process: several processes share one model's limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.llm.tokens import count_message_tokens
from moot.testing import ScriptedServer
from tests.cli.helpers import moot_env, popen_moot

MAX_TOKENS = 40
WINDOW = 0.5  # the server's "minute", scaled down so the test takes a few seconds


def instructions(path: Path, topic: str) -> Path:
    """A `moot generate` dataset: one topic, 6 instructions (an argument each)."""
    sides = {
        side: {"arguments": [f"{side[0]}{n} point" for n in range(3)]}
        for side in ("Affirmative", "Negative")
    }
    path.write_text(json.dumps({"topic": topic, **sides}) + "\n", encoding="utf-8")
    return path


@pytest.mark.subprocess
def test_two_processes_with_one_key_share_the_limit_and_stay_within_it(tmp_path: Path) -> None:
    """Two `moot generate` runs at once, each told the server's limit: together within it.

    Each alone would spend the whole bucket at its start, together twice the limit; sharing one
    bucket (a file-locked state in the cache folder), the server refuses (almost) nothing.
    """
    env = moot_env(MOOT_CACHE_DIR=str(tmp_path / "cache"))
    tpm = 4 * 150  # about 4 requests of ~110 prompt tokens and 40 output tokens per window
    with ScriptedServer(tpm=tpm, limit_window=WINDOW) as server:
        runs = [
            popen_moot(
                "generate",
                "--dataset",
                instructions(tmp_path / f"d{n}.jsonl", f"Topic {n}?"),
                "--out",
                tmp_path / f"out{n}.json",
                "--model",
                "openai/scripted",
                "--api-base",
                server.url,
                "--max-tokens",
                MAX_TOKENS,
                "--tpm",
                tpm,
                "--concurrency",
                8,
                env=env,
            )  # fmt: skip
            for n in range(2)
        ]
        for run in runs:
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    answered = [r for r in chats if r.status == 200]
    refused = [r for r in chats if r.status == 429]
    assert len(answered) == 12
    assert len(refused) <= 0.02 * len(chats), (len(refused), len(chats))
    # what both sent, refused requests too, within what the limit allows over their seconds
    sent = sum(count_message_tokens(r.body["messages"]) + MAX_TOKENS for r in chats)
    seconds = max(r.time for r in chats) - min(r.time for r in chats)
    assert sent <= tpm + tpm / WINDOW * seconds * 1.1, (sent, seconds)
