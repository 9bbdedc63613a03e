"""Pearson, Spearman and Krippendorff's alpha (moot.core.metrics.agreement)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from moot.core.metrics.agreement import krippendorff_alpha, pearson, spearman

N = None
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability" (Annenberg School for
# Communication Departmental Papers 43), section C, "Multiple values with missing data": 4 coders
# x 12 units; the paper works out nominal 0.743, ordinal 0.815, interval 0.849 (and ratio 0.797).
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


@pytest.mark.parametrize(
    ("metric", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_reproduces_krippendorffs_worked_example(metric: str, published: float) -> None:
    assert krippendorff_alpha(KRIPPENDORFF_2011, metric) == pytest.approx(published, abs=5e-4)


def test_alpha_treats_nan_as_missing_and_ignores_lone_values() -> None:
    with_nan = [[math.nan if v is None else v for v in row] for row in KRIPPENDORFF_2011]
    assert krippendorff_alpha(with_nan, "interval") == krippendorff_alpha(KRIPPENDORFF_2011)
    # unit 12 has one value (3): it cannot be paired, so dropping it changes nothing
    trimmed = [row[:11] for row in KRIPPENDORFF_2011]
    assert krippendorff_alpha(trimmed, "nominal") == krippendorff_alpha(
        KRIPPENDORFF_2011, "nominal"
    )


def test_alpha_two_coders_by_hand() -> None:
    # pairable values 1,1,2,2,3,3,3,4: D_o = 2/8, D_e = 126/56 -> 1 - (7 * 2) / 126
    assert krippendorff_alpha([[1, 2, 3, 3], [1, 2, 3, 4]]) == pytest.approx(1 - 14 / 126)
    assert krippendorff_alpha([[0, 1, 0, 1], [0, 1, 0, 1]], "nominal") == 1.0
    assert krippendorff_alpha([[0, 1, 0, 1], [1, 0, 1, 0]], "nominal") < 0


@pytest.mark.parametrize(
    "data",
    [
        [[2, 2, 2], [2, 2, 2]],  # a constant column: no expected disagreement
        [[1, N, N], [N, 2, N]],  # no unit rated twice
        [[], []],
        [[1, N, 2], [1, N, N]],  # two values in the domain, but only the 1s are pairable
    ],
)
def test_alpha_undefined_is_none_not_a_number(data: list[list[float | None]]) -> None:
    assert krippendorff_alpha(data, "interval") is None
    assert krippendorff_alpha(data, "nominal") is None


def test_alpha_rejects_an_unknown_metric() -> None:
    with pytest.raises(ValueError, match="circular"):
        krippendorff_alpha(KRIPPENDORFF_2011, "circular")


def test_pearson_and_spearman_with_ties_and_p_values() -> None:
    x = [0, 1, 1, 2, 2, 2, 0.5, 1.5, 2, 1]
    y = [1, 1, 0, 2, 2, 1, 0.5, 2, 2, 1]
    r, rho = pearson(x, y), spearman(x, y)
    assert r is not None and rho is not None and r.n == rho.n == 10
    # hand check: t = r sqrt(n - 2) / sqrt(1 - r^2) on n - 2 degrees of freedom, two-sided
    t = r.r * math.sqrt(8 / (1 - r.r**2))
    assert r.p == pytest.approx(2 * stats.t.sf(t, 8))
    assert 0 < r.p < 0.05 and 0 < rho.p < 0.05
    perfect = spearman([1, 2, 3, 4], [4, 3, 2, 1])
    assert perfect is not None and perfect.r == pytest.approx(-1.0)


def test_spearman_of_two_pairs_has_no_p_value() -> None:
    rho = spearman([1, 2], [3, 5])
    assert rho is not None and rho.r == pytest.approx(1.0) and rho.p is None


@pytest.mark.filterwarnings("error")  # scipy's ConstantInputWarning must not be reached
@pytest.mark.parametrize(
    "x, y", [([1, 1, 1], [1, 2, 3]), ([0.1] * 3, [1, 2, 3]), ([1], [2]), ([], [])]
)
def test_correlation_undefined_is_none(x: list[float], y: list[float]) -> None:
    assert pearson(x, y) is None
    assert spearman(x, y) is None


def test_correlation_needs_pairs() -> None:
    with pytest.raises(ValueError, match="unpaired"):
        pearson([1, 2], [1, 2, 3])
