"""`EvalResult`: what an evaluation's records say about the run as a whole."""

from __future__ import annotations

import pytest

from moot.graphs.judging import EvalResult

READ = {"status": "ok", "judgment": {"ok": True}}
UNREAD = {"status": "ok", "judgment": {"ok": False}}
FAILED = {"status": "error", "error": "HTTP 500"}


@pytest.mark.parametrize(
    ("records", "nothing_read"),
    [
        ([UNREAD, UNREAD, FAILED], True),
        ([UNREAD, READ], False),
        ([FAILED], False),  # nothing answered: the errors say why
        ([], False),
        ([{"status": "ok", "outcome": None}], True),  # a pair judged in both orders
        ([{"status": "ok", "outcome": "tie"}], False),
    ],
)
def test_nothing_read_means_every_answered_item_is_a_parse_failure(records, nothing_read):
    assert EvalResult(records, {}).nothing_read is nothing_read
