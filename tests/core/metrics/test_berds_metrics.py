"""BERDS MRecall@k / Precision@k and detector scores against hand-computed values."""

from __future__ import annotations

import pytest

from moot.core.errors import ConfigError
from moot.core.metrics.berds import berds_summary, detector_scores, mrecall_at_k, precision_at_k

# support[perspective][rank]: 1 = the document at that rank supports the perspective
COVERS_BOTH = [[0, 1, 0], [0, 0, 1]]  # each perspective found once; doc 0 supports none
MISSES_ONE = [[1, 1, 0], [0, 0, 0]]


@pytest.mark.parametrize(
    ("support", "k", "mrecall", "precision"),
    [
        (COVERS_BOTH, 3, 1, 2 / 3),
        (MISSES_ONE, 3, 0, 2 / 3),
        (COVERS_BOTH, 2, 0, 1 / 2),  # perspective 1 only appears at rank 2
        ([[1, 1, 1], [1, 0, 0]], 3, 1, 1.0),
        ([[0, 0], [0, 0]], 2, 0, 0.0),
        # more perspectives (3) than k (2): 1 iff at least k distinct ones are supported
        ([[1, 0], [0, 1], [0, 0]], 2, 1, 1.0),
        ([[1, 1], [0, 0], [0, 0]], 2, 0, 1.0),
        ([[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1]], 1, 1, 1.0),  # k = 1: any support at rank 0
        ([[0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 0]], 2, 0, 0.0),  # support beyond k is ignored
    ],
)
def test_mrecall_and_precision(support, k, mrecall, precision):
    assert mrecall_at_k(support, k) == mrecall
    assert precision_at_k(support, k) == pytest.approx(precision)


@pytest.mark.parametrize(("k", "message"), [(4, "larger than the 3"), (0, "positive")])
def test_k_must_fit_the_retrieved_list(k, message):
    with pytest.raises(ConfigError, match=message):
        mrecall_at_k(COVERS_BOTH, k)
    with pytest.raises(ConfigError, match=message):
        berds_summary({"q": COVERS_BOTH}, k)


def test_unparsed_detections_are_never_scored():
    with pytest.raises(ValueError, match="unparsed"):
        mrecall_at_k([[1, None], [0, 1]], 2)


def test_summary_sets_questions_with_parse_failures_apart():
    summary = berds_summary(
        {
            "a": COVERS_BOTH,
            "b": MISSES_ONE,
            "c": [[1, None, 0], [0, 1, 1]],
            "d": [[1, 0, 0, None], [0, 1, 0, 0]],  # the None is beyond k: d is scored
        },
        3,
    )
    assert (summary["questions"], summary["scored"], summary["parse_failures"]) == (4, 3, 1)
    assert summary["mrecall"] == pytest.approx(2 / 3)  # a 1, b 0, d 1
    assert summary["precision"] == pytest.approx((2 / 3 + 2 / 3 + 2 / 3) / 3)
    assert summary["per_question"]["c"] == {
        "mrecall": None,
        "precision": None,
        "parse_failure": True,
    }


def test_summary_with_nothing_scored_has_no_mean():
    summary = berds_summary({"a": [[None]]}, 1)
    assert summary["mrecall"] is None and summary["precision"] is None


def test_detector_scores():
    pairs = [(1, 1), (1, 0), (0, 1), (0, 0), (0, 0), (1, None)]
    scores = detector_scores(pairs)
    assert scores["pairs"] == 6 and scores["scored"] == 5 and scores["parse_failures"] == 1
    assert (scores["tp"], scores["fp"], scores["fn"], scores["tn"]) == (1, 1, 1, 2)
    assert scores["accuracy"] == pytest.approx(3 / 5)
    assert scores["precision"] == scores["recall"] == scores["f1"] == pytest.approx(0.5)


def test_detector_f1_edge_cases():
    assert detector_scores([(0, 0), (0, 0)])["f1"] is None  # no positives at all: undefined
    assert detector_scores([(0, 1), (1, 0)])["f1"] == 0  # positives, none found (as BERDS)
    assert detector_scores([(1, None)])["accuracy"] is None
