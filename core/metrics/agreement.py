"""Agreement between raters: Pearson, Spearman (``scipy.stats``), Krippendorff's alpha, kappa.

The coefficients come from maintained libraries: ``scipy.stats.pearsonr``/``spearmanr`` (with
their two-sided p-values) and the ``krippendorff`` package, which follows Krippendorff (2011),
"Computing Krippendorff's Alpha-Reliability". What stays here is the part the libraries answer
with a warning and a NaN (or an exception): a coefficient that is undefined (fewer than two
pairs, a constant rating column, no pairable values) is None, reported as "undefined", never a
made-up number. Cohen's kappa, one line of arithmetic, is computed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import krippendorff
import numpy as np
from scipy import stats

METRICS = ("interval", "nominal", "ordinal", "ratio")


@dataclass(frozen=True)
class Correlation:
    """A correlation coefficient with its two-sided p-value (H0: no correlation).

    Attributes:
        r: The coefficient, in [-1, 1].
        p: Its p-value; None where scipy gives none (two pairs for Spearman).
        n: The number of pairs.
    """

    r: float
    p: float | None
    n: int


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation | None:
    """Pearson's r of paired values (``scipy.stats.pearsonr``); None when undefined.

    Example:
        >>> round(pearson([1, 2, 3], [2, 4, 7]).r, 4)
        0.9934
    """
    return _correlation(stats.pearsonr, x, y)


def spearman(x: Sequence[float], y: Sequence[float]) -> Correlation | None:
    """Spearman's rho (``scipy.stats.spearmanr``; ties share their mean rank); None if undefined."""
    return _correlation(stats.spearmanr, x, y)


def krippendorff_alpha(
    data: Sequence[Sequence[float | None]], metric: str = "interval"
) -> float | None:
    """Krippendorff's alpha of a coders x units table (the ``krippendorff`` package).

    Args:
        data: One row per coder, one column per unit; None or NaN where a coder gave no value.
        metric: The level of measurement: ``interval``, ``nominal``, ``ordinal`` or ``ratio``.

    Returns:
        Alpha, or None when undefined: no unit has two values, or every pairable value is the
        same (no expected disagreement).

    Example:
        >>> krippendorff_alpha([[1, 2, 3, 3], [1, 2, 3, 4]])
        0.8888888888888888
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (expected one of {', '.join(METRICS)})")
    table = np.array([[math.nan if v is None else v for v in row] for row in data], dtype=float)
    if table.ndim != 2:  # ragged rows, or no coders at all
        raise ValueError("unpaired values: every coder needs one value per unit")
    # checked here because the package answers these with an exception or a NaN
    pairable = table[:, (~np.isnan(table)).sum(axis=0) >= 2]
    values = pairable[~np.isnan(pairable)]
    if len(values) < 2 or np.ptp(values) == 0:
        return None
    return float(krippendorff.alpha(reliability_data=pairable, level_of_measurement=metric))


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float | None:
    """Cohen's kappa of two raters' paired labels: (p_o - p_e) / (1 - p_e) (Cohen, 1960).

    p_o is the share of pairs that agree, p_e the agreement expected from each rater's own
    shares of each label. None when undefined: no pair, or both raters give one same label to
    every item (p_e = 1).

    Example:
        >>> cohen_kappa(["y", "y", "n", "n"], ["y", "n", "n", "n"])
        0.5
    """
    if len(a) != len(b):
        raise ValueError(f"unpaired values: {len(a)} and {len(b)}")
    if not a:
        return None
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    expected = sum(list(a).count(v) * list(b).count(v) for v in set(a) | set(b)) / n**2
    return None if expected == 1 else (observed - expected) / (1 - expected)


def _correlation(
    test: Callable[..., Any], x: Sequence[float], y: Sequence[float]
) -> Correlation | None:
    if len(x) != len(y):
        raise ValueError(f"unpaired values: {len(x)} and {len(y)}")
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    # scipy warns and answers NaN on constant input: on the raw values, since centring a
    # constant column of 0.1s leaves rounding noise, not zero
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    result = test(a, b)
    r, p = float(result.statistic), float(result.pvalue)
    return Correlation(max(-1.0, min(1.0, r)), None if math.isnan(p) else p, len(a))
