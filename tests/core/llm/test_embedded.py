"""The embedded server's parallel slots follow the requests moot keeps in flight."""

from __future__ import annotations

from moot.core.llm.embedded import MAX_SLOTS, slots_for


def test_one_slot_per_request_in_flight_up_to_the_most():
    assert slots_for(1) == 1  # `moot models check`: one request, one KV cache
    assert slots_for(3) == 3  # 3 debates decode together
    assert slots_for(MAX_SLOTS + 4) == MAX_SLOTS  # each slot holds its own KV cache
    assert slots_for(None) == MAX_SLOTS  # a library caller that did not say


def test_a_bad_concurrency_still_gets_a_slot():
    assert slots_for(0) == 1
