"""DebateQA Equation 4 (combined P.D. and D.A.) and the paper's partial-answer filter, by hand."""

from __future__ import annotations

import math

import pytest

from moot.core.data.questions import PartialAnswer, PartialAnswers
from moot.core.metrics.debateqa_combined import (
    ModelScores,
    combined,
    keep_ids,
    model_scores,
    z_norm,
)

# P.D. 2, 4, 4 -> 1/P.D. 0.5, 0.25, 0.25: mean 1/3, population sd sqrt(1/72), z = sqrt(2),
# -sqrt(2)/2, -sqrt(2)/2. D.A. 0.9, 0.8, 0.7: mean 0.8, sd sqrt(0.02/3), z = sqrt(1.5), 0,
# -sqrt(1.5)
MODELS = [ModelScores("a", 2.0, 1, 0.9, 1), ModelScores("b", 4.0, 1, 0.8, 1)]
MODELS.append(ModelScores("c", 4.0, 1, 0.7, 1))
R2, R15 = math.sqrt(2), math.sqrt(1.5)


def test_z_norm_uses_the_population_standard_deviation():
    assert z_norm([0.5, 0.25, 0.25]) == pytest.approx([R2, -R2 / 2, -R2 / 2], rel=1e-12)
    with pytest.raises(ValueError, match="differ"):
        z_norm([0.9, 0.9])


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (0.0, [R15, 0.0, -R15]),
        (0.5, [(R2 + R15) / 2, -R2 / 4, (-R2 / 2 - R15) / 2]),
        (0.75, [0.75 * R2 + 0.25 * R15, -0.75 * R2 / 2, -0.75 * R2 / 2 - 0.25 * R15]),
        (1.0, [R2, -R2 / 2, -R2 / 2]),
    ],
)
def test_equation_4_by_hand(k, expected):
    assert combined(MODELS, k) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_a_weight_of_0_needs_no_pd_spread_and_k_outside_0_1_is_refused():
    same_pd = [ModelScores("a", 3.0, 1, 0.9, 1), ModelScores("b", 3.0, 1, 0.7, 1)]
    assert combined(same_pd, 0.0) == pytest.approx([1.0, -1.0])
    with pytest.raises(ValueError, match="differ"):
        combined(same_pd, 0.5)
    with pytest.raises(ValueError, match="k must be in"):
        combined(MODELS, 1.5)


def test_the_filter_keeps_questions_with_at_least_3_partial_answers_in_both_metrics():
    pov = PartialAnswer("A view.", "")
    sets = [PartialAnswers("q1", "Q1?", (pov,) * 3), PartialAnswers("q2", "Q2?", (pov,) * 2)]
    keep = keep_ids(sets, 3)
    assert keep == {"q1"}
    pd = [
        {"id": "q1", "status": "ok", "pd": 3.0},
        {"id": "q2", "status": "ok", "pd": 9.0},
        {"id": "q3", "status": "error", "error": "too long"},
    ]
    da = [
        {"answer_id": "q1", "status": "ok", "judgment": {"ok": True, "label": 1}},
        {"answer_id": "q2", "status": "ok", "judgment": {"ok": True, "label": 0}},
        {"answer_id": "q3", "status": "ok", "judgment": {"ok": False, "label": None}},
    ]
    assert model_scores("m", pd, da) == ModelScores("m", 6.0, 2, 0.5, 2)
    assert model_scores("m", pd, da, keep) == ModelScores("m", 3.0, 1, 1.0, 1)
