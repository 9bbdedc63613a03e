"""Pearson, Spearman and Krippendorff's alpha (moot.core.metrics.agreement)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from moot.core.metrics.agreement import krippendorff_alpha, pearson, spearman

N = None
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 coders x 12
# units with missing values.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


def test_alpha_reproduces_krippendorffs_worked_example() -> None:
    assert krippendorff_alpha(KRIPPENDORFF_2011, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_2011, "interval") == pytest.approx(0.849, abs=5e-4)


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
    ],
)
def test_alpha_undefined_is_none_not_a_number(data: list[list[float | None]]) -> None:
    assert krippendorff_alpha(data, "interval") is None
    assert krippendorff_alpha(data, "nominal") is None


def test_alpha_rejects_an_unknown_metric() -> None:
    with pytest.raises(ValueError, match="ordinal"):
        krippendorff_alpha(KRIPPENDORFF_2011, "ordinal")


def test_pearson_and_spearman_match_scipy_with_ties() -> None:
    x = [0, 1, 1, 2, 2, 2, 0.5, 1.5, 2, 1]
    y = [1, 1, 0, 2, 2, 1, 0.5, 2, 2, 1]
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


@pytest.mark.parametrize(
    "x, y", [([1, 1, 1], [1, 2, 3]), ([0.1] * 3, [1, 2, 3]), ([1], [2]), ([], [])]
)
def test_correlation_undefined_is_none(x: list[float], y: list[float]) -> None:
    assert pearson(x, y) is None
    assert spearman(x, y) is None


def test_correlation_needs_pairs() -> None:
    with pytest.raises(ValueError, match="unpaired"):
        pearson([1, 2], [1, 2, 3])
