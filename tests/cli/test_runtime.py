"""How every command ends: one progress bar on a terminal, one summary table, the exit code."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from moot.testing import Fault, ScriptedServer
from tests.cli.helpers import assert_process_tier, moot_env, run_moot
from tests.cli.test_eval import CONTROL_RULES, eval_args, responses_file

pytestmark = pytest.mark.subprocess


def run_on_a_terminal(*args: object) -> tuple[int, str]:
    """Run moot with stderr on a pseudo-terminal; its exit code and what the terminal showed."""
    assert_process_tier()
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a real width
    process = subprocess.Popen(
        [sys.executable, "-m", "moot", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env=moot_env(),
    )
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return process.wait(timeout=120), shown.decode("utf-8", "replace")


def test_the_progress_bar_shows_items_failures_calls_and_tokens_on_a_terminal_only(tmp_path):
    responses = responses_file(
        tmp_path / "r.json",
        [("affirmative", "AFF-FULL a"), ("negative", "NEG-FULL a"), ("affirmative", "AFF-BAD")],
    )
    with ScriptedServer(rules=CONTROL_RULES) as server:
        args = eval_args("controllability", server, tmp_path / "tty", "--responses", responses)
        code, shown = run_on_a_terminal(*args)
        piped = run_moot(*eval_args("controllability", server, tmp_path / "pipe", "--responses",
                                    responses))  # fmt: skip
    assert code == 0, shown
    assert "3/3" in shown and "judgment/s" in shown
    assert "failed 0" in shown and "calls 4" in shown and "tokens" in shown  # 3 + 1 repair
    assert piped.returncode == 0 and "judgment/s" not in piped.stderr


def test_the_summary_table_counts_items_and_calls_and_a_failed_item_exits_1(tmp_path):
    responses = responses_file(
        tmp_path / "r.json", [("affirmative", "AFF-FULL a"), ("negative", "NEG-FULL a")]
    )
    fault = Fault("500", times=1, match="NEG-FULL")
    with ScriptedServer(rules=CONTROL_RULES, faults=[fault]) as server:
        args = eval_args("controllability", server, tmp_path / "out", "--responses", responses)
        failed = run_moot(*args, "--concurrency", 1)
        again = run_moot(*args)
    assert failed.returncode == 1
    assert "moot: 1 of 2 judgments failed; rerun the same command to retry them" in failed.stderr
    assert "items      planned  done before  done now  failed  stopped  seconds" in failed.stdout
    assert "judgments        2            0         1       1        0" in failed.stdout
    assert "controllability_judge  controllability  openai/judge      2" in failed.stdout
    assert "total: 2 calls (0 cached)" in failed.stdout
    assert again.returncode == 0, again.stderr  # the rerun retries the failed item alone
    assert "judgments        2            1         1       0        0" in again.stdout
