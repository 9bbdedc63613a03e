"""The embedded server's parallel slots follow the requests moot keeps in flight."""

from __future__ import annotations

import os

import pytest

from moot.core.errors import ConfigError
from moot.core.llm.embedded import MAX_SLOTS, embedded_threads, idle_cores, slots_for, threads_for


def test_one_slot_per_request_in_flight_up_to_the_most():
    assert slots_for(1) == 1  # `moot models check`: one request, one KV cache
    assert slots_for(3) == 3  # 3 debates decode together
    assert slots_for(MAX_SLOTS + 4) == MAX_SLOTS  # each slot holds its own KV cache
    assert slots_for(None) == MAX_SLOTS  # a library caller that did not say


def test_a_bad_concurrency_still_gets_a_slot():
    assert slots_for(0) == 1


def test_one_thread_per_core_at_least_70_percent_idle_from_1_to_4():
    assert [threads_for(idle, 2) for idle in (0.0, 1.0, 1.69, 1.7, 2.0)] == [1, 1, 1, 2, 2]
    assert threads_for(7.9, 8) == 4 and threads_for(3.0, 4) == 3 and threads_for(0.2, 1) == 1


def test_idle_cores_are_read_from_the_machine_and_the_variable_wins(monkeypatch):
    cpus = os.cpu_count() or 2
    assert 0.0 <= idle_cores(cpus, sample=0.05) <= cpus + 0.01
    monkeypatch.setenv("MOOT_EMBEDDED_THREADS", "3")
    assert embedded_threads() == 3
    monkeypatch.setenv("MOOT_EMBEDDED_THREADS", "0")
    with pytest.raises(ConfigError, match="MOOT_EMBEDDED_THREADS must be a positive integer"):
        embedded_threads()
