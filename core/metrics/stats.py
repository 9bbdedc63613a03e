"""Summary statistics that say "undefined" (None) instead of inventing a number."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def mean(values: Sequence[float | bool], digits: int | None = None) -> float | None:
    """The mean, or None when there is nothing to average (reported as n/a, with its count).

    Args:
        values: The values (booleans count as 0 and 1, for shares).
        digits: Round to this many decimals (for word counts and the like).
    """
    if not values:
        return None
    value = sum(values) / len(values)
    return value if digits is None else round(value, digits)


def stdev(values: Sequence[float]) -> float | None:
    """The sample standard deviation, or None with fewer than two values."""
    return statistics.stdev(values) if len(values) > 1 else None
