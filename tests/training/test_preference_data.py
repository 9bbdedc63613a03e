"""Preference pairs against hand-made judgments of each source (issue 35, item 4)."""

from __future__ import annotations

from typing import Any

from moot.core.data.responses import Response
from moot.training.preference_data import (
    Scored,
    controllability_pairs,
    prompt_of,
    quality_pairs,
    scored_pairs,
)


def response(argument: str, text: str, side: str = "affirmative") -> Response:
    return Response("Zoos", side, argument, f"Argue {argument}", text)


def verdict(argument: str, outcome: Any, inconsistent: Any, status: str = "ok") -> dict:
    """A `moot eval quality` record: the judge's replies kept in each order."""
    order = {"ok": True, "replies": [f"reply on {argument}"]}
    return {
        "id": f"q-{argument}",
        "topic": "Zoos",
        "side": "affirmative",
        "argument": argument,
        "status": status,
        "outcome": outcome,
        "inconsistent": inconsistent,
        "forward": order,
        "reverse": order,
    }


def test_a_quality_pair_is_kept_only_where_both_orders_name_one_winner():
    arguments = ["win", "loss", "one win one tie", "tie", "unread", "failed", "same"]
    mine = [response(a, f"mine {a}") for a in arguments] + [response("gone", "mine gone")]
    theirs = [response(a, f"theirs {a}") for a in arguments] + [response("gone", "theirs gone")]
    mine[-2] = theirs[-2] = response("same", "one text")
    judgments = [
        verdict("win", "win", False),
        verdict("loss", "loss", False),
        verdict("one win one tie", "win", True),  # DEBATunE's win, not a preference
        verdict("tie", "tie", False),
        verdict("unread", None, None),
        verdict("failed", None, None, status="error"),
        verdict("same", "win", False),
        verdict("elsewhere", "win", False),  # judged, but not among these responses
    ]
    built = quality_pairs(judgments, mine, theirs)
    assert [(p.chosen, p.rejected) for p in built.pairs] == [
        ("mine win", "theirs win"),
        ("theirs loss", "mine loss"),
    ]
    assert (
        built.pairs[0].prompt
        == prompt_of("Argue win")
        == [{"role": "user", "content": "Argue win"}]
    )
    assert built.pairs[1].meta["reasons"] == [["reply on loss"], ["reply on loss"]]
    assert built.dropped == {
        "orders disagree": 1,
        "tie": 1,
        "not judged (an order unread, or the call failed)": 2,
        "the same answer on both sides": 1,
        "not in the responses": 1,
    }
    record = built.pairs[0].to_json()
    assert set(record) == {"id", "prompt", "chosen", "rejected", "source", "meta"}
    assert record["source"] == "quality" and len(record["id"]) == 16


def control(argument: str, side: str, support: Any, oppose: Any, status: str = "ok") -> dict:
    value = None if support is None else {"support": support, "oppose": oppose}
    return {
        "topic": "Zoos",
        "side": side,
        "argument": argument,
        "status": status,
        "judgment": {"ok": value is not None, "value": value},
    }


def test_a_response_holding_its_stance_is_chosen_over_one_that_does_not():
    # run 0 a base model, run 1 a tuned one, on the same three instructions
    base = [
        response("a", "base a"),
        response("n", "base n", "negative"),
        response("both", "base both"),
        response("x", "base x"),
    ]
    tuned = [
        response("a", "tuned a"),
        response("n", "tuned n", "negative"),
        response("both", "tuned both"),
        response("x", "tuned x"),
    ]
    runs = [
        (
            [
                control("a", "affirmative", 90, 10),  # 90% is not holding it (CC_P: exactly 100)
                control("n", "negative", 0, 100),  # the negative side holds at 100% opposing
                control("both", "affirmative", 100, 0),
                control("x", "affirmative", None, None),  # the reply could not be read
            ],
            base,
        ),
        (
            [
                control("a", "affirmative", 100, 0),
                control("n", "negative", 100, 0),  # 100% supporting: it gave up its side
                control("both", "affirmative", 100, 0),
                control("x", "affirmative", 100, 0, status="error"),
            ],
            tuned,
        ),
    ]
    built = controllability_pairs(runs)
    assert [(p.chosen, p.rejected, p.meta["runs"]) for p in built.pairs] == [
        ("tuned a", "base a", [1, 0]),
        ("base n", "tuned n", [0, 1]),
    ]
    assert built.pairs[1].prompt == prompt_of("Argue n")
    assert built.dropped == {
        "no response on each side of the line": 2,  # "both": each holds its stance
        "not judged (the call failed or its reply unread)": 2,
    }


def test_scored_answers_make_pairs_at_the_margin_and_not_below_it():
    one, two = prompt_of("Compare A and B"), prompt_of("Compare C and D")
    answers = [
        Scored(one, "twelve", 12, "gen-1"),
        Scored(one, "ten", 10, "gen-2"),
        Scored(one, "eleven", 11, "gen-3"),
        Scored(two, "seven", 7, "gen-1"),
        Scored(two, "also seven", 7, "gen-2"),
        Scored(two, "unjudged", None, "gen-3"),
    ]
    built = scored_pairs(answers, min_margin=2)
    assert [(p.chosen, p.rejected, p.meta["scores"]) for p in built.pairs] == [
        ("twelve", "ten", [12, 10])  # a margin of exactly 2 is enough
    ]
    assert built.pairs[0].meta["origins"] == ["gen-1", "gen-2"]
    # 12 vs 11 and 10 vs 11 are closer than 2; 7 vs 7 is a tie
    assert built.dropped == {"closer than the margin": 3, "no score": 1}
    assert not scored_pairs(answers[3:5], min_margin=0).pairs  # equal scores: never a pair
