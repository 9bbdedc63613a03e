"""CompQA rubric: the score parser and validator on shapes judges really produce; judged files."""

from __future__ import annotations

import json
import re

import pytest

from moot.core.data.compqa import (
    CATEGORIES,
    MAX_SCORE,
    MAXIMA,
    RubricError,
    category_sums,
    check_scores,
    load_judged,
    parse_scores,
)
from moot.prompts import render
from tests.conftest import shared_data

BEST = {n: MAXIMA[n] for n in MAXIMA}  # 19 points
MIXED = {n: (n + 1) % (MAXIMA[n] + 1) for n in MAXIMA}  # some zeros, ones and twos
JSON = json.dumps({str(n): p for n, p in MIXED.items()})


def with_value(criterion: int, value: str) -> str:
    """`JSON` with one criterion's points replaced by the literal `value`."""
    return JSON.replace(f'"{criterion}": {MIXED[criterion]}', f'"{criterion}": {value}')


def test_rubric_constants():
    assert MAX_SCORE == 19 and sorted(MAXIMA) == list(range(1, 16))
    assert [n for n in MAXIMA if MAXIMA[n] == 2] == [9, 10, 11, 12]
    assert {k: sum(MAXIMA[n] for n in v) for k, v in CATEGORIES.items()} == {
        "structure": 7,
        "relevance": 5,
        "quality": 7,
    }
    assert category_sums(BEST) == {"structure": 7, "relevance": 5, "quality": 7}


def test_template_ranges_agree_with_maxima():
    text = render("compqa/rubric.j2", shots=3, object1="a", object2="b", aspect="", comparison="c")
    ranges = re.findall(r"^(\d+)\. .*: 0-(\d)$", text, re.M)
    assert [(int(n), int(k)) for n, k in ranges] == list(MAXIMA.items())


@pytest.mark.parametrize(
    "reply",
    [
        JSON,
        str(MIXED),  # Python repr, int keys
        "{" + ",\t".join(f"{n}: {p}" for n, p in MIXED.items()) + "}",  # the paper's own shape
        f"Here is the scoring:\n{JSON}\nThe answer is well structured.",
        f"```json\n{JSON}\n```",
        f"```python\n{MIXED!r}\n```",
        f"```\n{JSON}\n```\n\n```\n{JSON}\n```",  # the same dict twice is one judgment
        "\n".join(f"{n}: {p}" for n, p in MIXED.items()),
        "\n".join(f"C{n}: {p}" for n, p in MIXED.items()),
        "\n".join(f"- **Criterion {n}**: {p} points" for n, p in MIXED.items()),
        "\n".join(f"C{n} = {p}" for n, p in MIXED.items()),
        "{" + ", ".join(f"C{n}: {p}" for n, p in MIXED.items()) + "}",  # unquoted C-keys
        json.dumps({f"C{n}": p for n, p in MIXED.items()}),
        json.dumps({str(n): str(p) for n, p in MIXED.items()}),  # digit strings
        json.dumps({str(n): float(p) for n, p in MIXED.items()}),  # 1.0
        json.dumps({"scores": {str(n): p for n, p in MIXED.items()}}),  # nested once
        "1. a short introduction is present: 0-1\n" + JSON,  # an echoed line, then the dict
        json.dumps({str(n): p for n, p in MIXED.items()}, indent=2),  # its lines agree
        JSON + "\n\n3: 0",  # a line beside the dict that agrees with it
    ],
)
def test_valid_replies(reply):
    assert parse_scores(reply) == MIXED


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (json.dumps({str(n): 1 for n in range(1, 14)}), "missing C14-C15"),
        (json.dumps({str(n): 0 for n in range(1, 17)}), "unknown criteria 16"),
        (json.dumps({str(n): 0 for n in range(0, 15)}), "missing C15; unknown criteria 0"),
        (json.dumps({str(n + 15): 1 for n in MAXIMA}), "missing C1-C15; unknown criteria 16, 17"),
        (
            json.dumps({**{str(n): p for n, p in MIXED.items()}, "total": 13}),
            "unknown criteria total",
        ),
        (with_value(1, "2"), "C1 = 2 is outside 0-1"),
        (with_value(9, "3"), "C9 = 3 is outside 0-2"),
        (with_value(2, "-1"), "C2 = -1 is outside 0-1"),
        (with_value(3, "0.5"), "C3 is 0.5, not a whole number"),
        (with_value(4, "true"), "C4 is True, not a whole number"),
        (str(MIXED).replace("5: 0", "5: False"), "C5 is False, not a whole number"),
        (with_value(6, '"one"'), "C6 is 'one', not a whole number"),
        (with_value(7, "null"), "C7 is None, not a whole number"),
        (JSON[:70], "missing C"),  # truncated mid-dict
        (JSON + "\n" + with_value(1, "1"), "2 different score dicts"),
        ("\n".join([f"{n}: {p}" for n, p in MIXED.items()] + ["1: 1"]), "C1 is given twice"),
        (JSON[:-1] + ', "1": 1}', "C1 is given twice (0 and 1)"),  # a repeated JSON key
        (JSON + "\n\n3: 1", "lines disagree with its dict on C3"),
        (str(MIXED)[:-1] + ", 1: 1}", "C1 is given twice (0 and 1)"),  # a repeated Python key
        (json.dumps({"scores": [1] * 15}), "missing C1-C15; unknown criteria scores"),
        (json.dumps({"scores": MIXED, "total": 13}), "2 different score dicts"),
        ("", "no score dict"),
        ("The comparison is excellent; I would give it full marks.", "no score dict"),
        (json.dumps(list(MIXED.values())), "no score dict"),
        ("\n".join(f"{n}: {p} - because it is good" for n, p in MIXED.items()), "no score dict"),
    ],
)
def test_invalid_replies_name_the_problem(reply, problem):
    with pytest.raises(RubricError, match=re.escape(problem)):
        parse_scores(reply)


def test_an_echoed_rubric_is_not_read_as_scores():
    prompt = render(
        "compqa/rubric.j2", shots=0, object1="a", object2="b", aspect="", comparison="c"
    )
    criteria = prompt[prompt.index("1. a short") : prompt.index("Output a python")]
    assert "1. a short introduction is present: 0-1" in criteria
    for reply in (criteria, "1. a short introduction is present: 0-1"):
        with pytest.raises(RubricError, match="no score dict"):
            parse_scores(reply)


def test_check_scores_reports_every_problem_and_keeps_criterion_order():
    with pytest.raises(RubricError) as caught:
        check_scores({"1": 5, 2: 0.5, "x": 1, **{n: 0 for n in range(3, 14)}})
    assert str(caught.value) == (
        "missing C14-C15; C1 = 5 is outside 0-1; C2 is 0.5, not a whole number of points; "
        "unknown criteria x"
    )
    with pytest.raises(RubricError, match="C1 is given twice"):
        check_scores({**BEST, "1": 0})
    assert list(check_scores(dict(reversed(list(BEST.items()))))) == list(range(1, 16))


def test_gpt4_judged_files_hold_exactly_one_invalid_judgment():
    folder = shared_data("compqa", "evaluated_summaries", "gpt-4")
    invalid = []
    answers = 0
    for path in sorted(folder.glob("*.json")):
        judged = load_judged(path)
        answers += len(judged)
        invalid += [(path.name, j) for j in judged if not j.valid]
        assert all(j.total == sum(j.scores.values()) for j in judged if j.valid)
    assert answers == 2158
    ((name, bad),) = invalid
    assert (name, bad.answer.where, bad.status) == (
        "perplexity_scenario_2.json",
        "index 39",
        "invalid",
    )
    assert "C5 = 2 is outside 0-1; C6 = 2 is outside 0-1" in bad.problem
