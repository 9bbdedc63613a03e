"""Agreement between raters: Pearson, Spearman and Krippendorff's alpha.

Every function returns None when the coefficient is undefined (fewer than two pairs, a constant
rating column, no pairable values): a reported "undefined", never a made-up 0 or 1.

Krippendorff's alpha follows Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability":
``alpha = 1 - D_o / D_e`` over the values of units rated by at least two coders; missing
values (None or NaN) are allowed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

METRICS = ("interval", "nominal")


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r of paired values; None when undefined (n < 2 or a constant side).

    Example:
        >>> pearson([1, 2, 3], [2, 4, 7])
        0.9933992677987828
    """
    a, b = _paired(x, y)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:  # on the raw values: centring a
        return None  # constant column of 0.1s leaves rounding noise, not zero
    a, b = a - a.mean(), b - b.mean()
    scale = math.sqrt(float(a @ a) * float(b @ b))
    return max(-1.0, min(1.0, float(a @ b) / scale))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the ranks, tied values sharing their average rank."""
    a, b = _paired(x, y)
    return pearson(_ranks(a), _ranks(b))


def krippendorff_alpha(
    data: Sequence[Sequence[float | None]], metric: str = "interval"
) -> float | None:
    """Krippendorff's alpha of a coders x units table.

    Args:
        data: One row per coder, one column per unit; None or NaN where a coder gave no value.
        metric: ``interval`` (squared difference) or ``nominal`` (equal or not).

    Returns:
        Alpha, or None when undefined: no unit has two values, or every pairable value is the
        same (no expected disagreement).

    Example:
        >>> krippendorff_alpha([[1, 2, 3, 3], [1, 2, 3, 4]])
        0.8888888888888888
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (expected one of {', '.join(METRICS)})")
    units = [[v for v in column if not _missing(v)] for column in zip(*data, strict=True)]
    units = [u for u in units if len(u) >= 2]  # a lone value cannot be paired
    pooled = [v for u in units for v in u]
    n = len(pooled)
    if n < 2:
        return None
    expected = _disagreement(pooled, metric)  # sum over ordered pairs of pairable values
    if expected == 0:
        return None
    observed = sum(_disagreement(u, metric) / (len(u) - 1) for u in units)
    return 1.0 - (n - 1) * observed / expected


def _disagreement(values: Sequence[float], metric: str) -> float:
    """Sum of delta(v_i, v_j) over ordered pairs i != j, in O(m)."""
    m = len(values)
    if metric == "nominal":
        return float(m * m - sum(c * c for c in Counter(values).values()))
    arr = np.asarray(values, dtype=float)
    arr = arr - arr.mean()  # shift-invariant; keeps the difference below numerically stable
    return float(2 * (m * float(arr @ arr) - float(arr.sum()) ** 2))


def _missing(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _paired(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    if len(x) != len(y):
        raise ValueError(f"unpaired values: {len(x)} and {len(y)}")
    return np.asarray(x, dtype=float), np.asarray(y, dtype=float)


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values get the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]
