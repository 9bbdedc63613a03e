"""DebateQA partial answers in the released layout, the paper's names and moot curate's."""

from __future__ import annotations

import json

import pytest

from moot.core.data.questions import PartialAnswer, load_partial_answers
from moot.core.errors import InputError

# one record as pillowsofwind/DebateQA dataset/test.jsonl holds it (the keys its
# scripts/eval_PD.py and eval_DA.py read: id, question, partial_answers[point_of_view, explanation])
RELEASED = {
    "id": 17,
    "question": "Does birth order influence personality traits?",
    "partial_answers": [
        {
            "point_of_view": "Birth order does not have a lasting effect on Big Five traits.",
            "explanation": "Large panels from three countries find no effect.",
        },
        {
            "point_of_view": "Firstborns score higher on intelligence and intellect.",
            "explanation": "Research has consistently shown it.",
        },
    ],
}


def test_the_released_layout_reads_as_the_papers_and_curates(tmp_path):
    released = tmp_path / "test.jsonl"
    released.write_text(json.dumps(RELEASED) + "\n")
    renamed = [
        {"POV": p["point_of_view"], key: p["explanation"]}
        for p, key in zip(RELEASED["partial_answers"], ("Explan", "Explanation"), strict=True)
    ]
    ours = tmp_path / "ours.jsonl"
    ours.write_text(json.dumps({**RELEASED, "partial_answers": renamed}) + "\n")
    (item,) = load_partial_answers(released)
    assert (item.id, item.question) == ("17", RELEASED["question"])
    assert item.partial_answers[0] == PartialAnswer(
        "Birth order does not have a lasting effect on Big Five traits.",
        "Large panels from three countries find no effect.",
    )
    assert load_partial_answers(ours) == [item]


@pytest.mark.parametrize(
    ("partial", "problem"),
    [
        ({"explanation": "No POV."}, "needs exactly one of point_of_view, POV, pov; has none"),
        (
            {"point_of_view": "A view.", "POV": "Another view.", "explanation": "Why."},
            "needs exactly one of point_of_view, POV, pov; has 'point_of_view' and 'POV'",
        ),
        (
            {"point_of_view": "A view."},
            "needs exactly one of explanation, Explanation, Explan; has none",
        ),
        (
            {"POV": "A view.", "Explan": "Why.", "explanation": "Why not."},
            "needs exactly one of explanation, Explanation, Explan; has 'explanation' and 'Explan'",
        ),
        ({"point_of_view": " ", "explanation": "Why."}, "partial answer without a point_of_view"),
    ],
)
def test_a_partial_answer_needs_one_pov_and_one_explanation_key(tmp_path, partial, problem):
    bad = tmp_path / "test.jsonl"
    partials = [RELEASED["partial_answers"][0], partial]
    bad.write_text(json.dumps({**RELEASED, "partial_answers": partials}) + "\n")
    with pytest.raises(InputError) as caught:
        load_partial_answers(bad)
    assert str(caught.value).startswith(f"{bad}, line 1, partial answer 1: {problem}")


def test_the_released_demo_answers_cover_the_1000_test_questions():
    # §3 and the README: DebateQA-test has 1,000 questions; the released demo answers
    # (scripts/input_file_demo.jsonl) answer each once, by id 1..1000
    from moot.core.data.questions import load_answers
    from tests.conftest import shared_data

    answers = load_answers(shared_data("debateqa", "demo_answers.jsonl"))
    assert sorted(int(a.id) for a in answers) == list(range(1, 1001))
