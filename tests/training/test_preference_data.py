"""Preference pairs against hand-made judgments of each source (issue 35, item 4)."""

from __future__ import annotations

from typing import Any

from moot.core.data.responses import Response, controllability_id, quality_id
from moot.training.debatune_data import instruction
from moot.training.preference_data import (
    Built,
    Pair,
    Scored,
    controllability_pairs,
    debatrix_pairs,
    judge_order_pairs,
    judge_score_pairs,
    prompt_of,
    quality_pairs,
    scored_pairs,
    unique,
)

#: A judge's identity, as an evaluation's ids hold it.
JUDGE = {"judge": "openai/judge", "temperature": 0.0, "constrained": False, "prompts": "p"}


def response(argument: str, text: str, side: str = "affirmative") -> Response:
    return Response("Zoos", side, argument, f"Argue {argument}", text)


def verdict(
    mine: Response, theirs: Response, outcome: Any, inconsistent: Any, status: str = "ok"
) -> dict:
    """A `moot eval quality` record of `mine` against `theirs`: the replies in each order."""
    argument = mine.argument
    order = {"ok": True, "replies": [f"reply on {argument}"]}
    return {
        "id": quality_id(JUDGE, mine, theirs, []),
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
    judged = dict(zip(arguments, zip(mine, theirs, strict=False), strict=False))
    judgments = [
        verdict(*judged["win"], "win", False),
        verdict(*judged["loss"], "loss", False),
        verdict(*judged["one win one tie"], "win", True),  # DEBATunE's win, not a preference
        verdict(*judged["tie"], "tie", False),
        verdict(*judged["unread"], None, None),
        verdict(*judged["failed"], None, None, status="error"),
        verdict(*judged["same"], "win", False),
        # judged, but not among these responses
        verdict(response("elsewhere", "e"), response("elsewhere", "f"), "win", False),
        # an earlier run's verdict on other texts to the same instructions (the log keeps it;
        # the file was edited since): not paired with the texts there now
        verdict(response("win", "mine win, old"), judged["win"][1], "loss", False),
        verdict(response("gone", "mine gone"), response("gone", "old"), "win", False),
    ]
    built = quality_pairs(judgments, mine, theirs, JUDGE, [])
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
        "judged texts differ from the files now": 2,
    }
    # another judge's (or mask's) ids are not this run's: none of its verdicts is used
    assert not quality_pairs(judgments, mine, theirs, {**JUDGE, "judge": "x"}, []).pairs
    assert not quality_pairs(judgments, mine, theirs, JUDGE, ["zoo"]).pairs
    record = built.pairs[0].to_json()
    assert set(record) == {"id", "prompt", "chosen", "rejected", "source", "meta"}
    assert record["source"] == "quality" and len(record["id"]) == 16


def control(judged: Response, support: Any, oppose: Any, status: str = "ok") -> dict:
    """A `moot eval controllability` record of `judged`."""
    value = None if support is None else {"support": support, "oppose": oppose}
    return {
        "id": controllability_id(JUDGE, judged),
        "topic": "Zoos",
        "side": judged.side,
        "argument": judged.argument,
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
                control(base[0], 90, 10),  # 90% is not holding it (CC_P: exactly 100)
                control(base[1], 0, 100),  # the negative side holds at 100% opposing
                control(base[2], 100, 0),
                control(base[3], None, None),  # the reply could not be read
                control(response("a", "base a, since edited"), 100, 0),  # an earlier text
            ],
            base,
            JUDGE,
        ),
        (
            [
                control(tuned[0], 100, 0),
                control(tuned[1], 100, 0),  # 100% supporting: it gave up its side
                control(tuned[2], 100, 0),
                control(tuned[3], 100, 0, status="error"),
            ],
            tuned,
            JUDGE,
        ),
    ]
    built = controllability_pairs(runs)
    assert [(p.chosen, p.rejected, p.meta["runs"]) for p in built.pairs] == [
        ("tuned a", "base a", [[1], [0]]),
        ("base n", "tuned n", [[0], [1]]),
    ]
    assert built.pairs[1].prompt == prompt_of("Argue n")
    assert built.dropped == {
        "no response on each side of the line": 2,  # "both": each holds its stance
        "not judged (the call failed or its reply unread)": 2,
        "judged texts differ from the files now": 1,
    }


def test_one_text_judged_in_several_runs_is_one_response_and_verdicts_that_disagree_drop_it():
    # T1 judged 100 in run 0 and 80 in run 1; T2 100, T3 80: T1 is neither chosen nor rejected
    t1, t2, t3 = (response("a", text) for text in ("T1", "T2", "T3"))
    runs = [
        ([control(t1, 100, 0), control(t3, 80, 20)], [t1, t3], JUDGE),
        ([control(t1, 80, 20), control(t2, 100, 0)], [t1, t2], JUDGE),
        ([control(t2, 100, 0)], [t2], JUDGE),  # T2 again, the same verdict: one response
    ]
    built = controllability_pairs(runs)
    assert [(p.chosen, p.rejected, p.meta["runs"]) for p in built.pairs] == [
        ("T2", "T3", [[1, 2], [0]])
    ]
    assert built.dropped == {"judges disagree": 2}


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
    built = scored_pairs(answers, min_margin=2, source="compqa")
    assert [(p.chosen, p.rejected, p.meta["scores"]) for p in built.pairs] == [
        ("twelve", "ten", [12, 10])  # a margin of exactly 2 is enough
    ]
    assert built.pairs[0].meta["origins"] == ["gen-1", "gen-2"]
    # 12 vs 11 and 10 vs 11 are closer than 2; 7 vs 7 is a tie
    assert built.dropped == {"closer than the margin": 3, "no score": 1}
    assert not scored_pairs(answers[3:5], 0, "compqa").pairs  # equal scores: never a pair
    assert built.pairs[0].source == built.source == "compqa"


def test_one_answer_scored_several_times_is_one_answer_with_its_mean_score():
    # "eight" judged 9 and 5 (mean 7): 7 vs "five"'s 5 is a pair at the margin, and no pair
    # says "five" over "eight" (as its lone 5 against "eight"'s 9 and 5 would, both ways)
    asked = prompt_of("Compare A and B")
    answers = [
        Scored(asked, "eight", 9, "run-1"),
        Scored(asked, "five", 5, "run-1"),
        Scored(asked, "eight", 5, "run-2"),
    ]
    built = scored_pairs(answers, 2, "judge")
    assert [(p.chosen, p.rejected, p.meta) for p in built.pairs] == [
        ("eight", "five", {"scores": [7, 5], "origins": ["run-1, run-2", "run-1"]})
    ]
    assert not built.dropped


def test_a_margin_met_up_to_rounding_is_met_and_a_blank_answer_makes_no_pair():
    # means of three verdicts: 26/3 - 20/3 is 2, but 8.667 - 6.667 in floats falls just short
    asked = prompt_of("Compare A and B")
    answers = [Scored(asked, "high", v, "run") for v in (9, 9, 8)]
    answers += [Scored(asked, "low", v, "run") for v in (7, 7, 6)]
    built = scored_pairs(answers, 2, "judge")
    assert [(p.chosen, p.rejected) for p in built.pairs] == [("high", "low")]
    assert built.pairs[0].meta["scores"] == [26 / 3, 20 / 3]
    assert not scored_pairs(answers, 2.001, "judge").pairs
    # a blank answer (a custom judge's item "   ") makes no pair: moot train dpo refuses it
    blank = Built("judge")
    blank.add(Pair(asked, "   ", "an answer", "judge"))
    blank.add(Pair(asked, "an answer", "", "judge"))
    assert not blank.pairs and blank.dropped == {"an empty answer": 2}


def test_the_same_pair_twice_is_kept_once_and_opposite_pairs_are_both_dropped():
    one, two = prompt_of("Q1"), prompt_of("Q2")
    pairs = [
        Pair(one, "X", "Y", "quality"),
        Pair(one, "Y", "X", "judge"),  # the opposite preference, from another source
        Pair(two, "X", "Y", "quality"),
        Pair(two, "X", "Y", "judge"),  # the same preference again
        Pair(one, "X", "Z", "quality"),
    ]
    kept, duplicates, dropped = unique(pairs)
    assert [(p.prompt, p.chosen, p.rejected, p.source) for p in kept] == [
        (two, "X", "Y", "quality"),
        (one, "X", "Z", "quality"),
    ]
    assert duplicates == 1
    assert dropped == {"quality: sources disagree": 1, "judge: sources disagree": 1}


def judged(place: int, question: str, answer: str, verdict: Any, status: str = "ok") -> dict:
    """A `moot eval judge` record of a mean judge (docs/schemas.md), two jurors' verdicts."""
    return {
        "id": f"j{place}",
        "place": f"line {place}",
        "input": {"question": question, "answer": answer},
        "status": status,
        "verdict": verdict,
        "verdicts": {"openai/a": verdict, "openai/b": verdict},
    }


def test_a_mean_judges_verdicts_pair_answers_to_one_prompt_at_the_margin():
    records = [
        judged(1, "Q1", "seven", 7.0),
        judged(2, "Q1", "five", 5.0),  # 7 - 5: exactly the margin
        judged(3, "Q1", "six", 6.0),  # 1 from each: closer than the margin
        judged(4, "Q2", "four", 4.0),
        judged(5, "Q2", "also four", 4.0),  # equal: never a pair
        judged(6, "Q2", "unread", None),  # no juror's reply read
        judged(7, "Q2", "failed", None, status="error"),
        judged(8, "Q3", "nine", 9.5),
        judged(9, "Q3", "seven and a half", 7.4),  # 2.1 apart
        judged(10, "Q4", "alone", 6.0),  # nothing to compare it with
    ]
    built = judge_score_pairs(records, "question", "answer", min_margin=2)
    assert [(p.prompt, p.chosen, p.rejected, p.meta["scores"]) for p in built.pairs] == [
        (prompt_of("Q1"), "seven", "five", [7.0, 5.0]),
        (prompt_of("Q3"), "nine", "seven and a half", [9.5, 7.4]),
    ]
    assert built.pairs[0].meta["origins"] == ["line 1", "line 2"]  # the items' places
    assert {p.source for p in built.pairs} == {"judge"}
    assert built.dropped == {
        "closer than the margin": 3,  # 7 vs 6, 5 vs 6, 4 vs 4
        "no verdict (no juror's reply read)": 1,
        "the call failed": 1,
        "no other answer to its prompt": 1,
    }
    # a margin just above a pair's difference drops it
    assert len(judge_score_pairs(records, "question", "answer", min_margin=2.01).pairs) == 1


def ordered(question: str, verdict: Any, jurors: list[tuple], status: str = "ok") -> dict:
    """A `moot eval judge` record of a both_orders judge: each juror's (outcome, inconsistent)."""
    judged = {
        f"openai/j{n}": {
            "outcome": outcome,
            "inconsistent": swap,
            "forward": {"replies": [f"{question} forward {n}"]},
            "reverse": {"replies": [f"{question} reverse {n}"]},
        }
        for n, (outcome, swap) in enumerate(jurors)
    }
    return {
        "id": f"p-{question}",
        "input": {"question": question, "first": f"{question} A", "second": f"{question} B"},
        "status": status,
        "verdict": verdict,
        "verdicts": {name: juror["outcome"] for name, juror in judged.items()},
        "jurors": judged,
    }


def test_a_both_orders_judge_keeps_a_pair_only_where_no_jurors_orders_disagree():
    records = [
        ordered("win", "win", [("win", False), ("win", False)]),
        ordered("loss", "loss", [("loss", False), (None, None)]),  # one juror's reply unread
        ordered("swapped", "win", [("win", False), ("win", True)]),  # win + tie: orders disagree
        ordered("tie", "tie", [("tie", False), ("tie", False)]),
        ordered("split", None, [("win", False), ("loss", False)]),  # both read, no majority
        ordered("unread", None, [(None, None), (None, None)]),
        ordered("failed", None, [], status="error"),
    ]
    built = judge_order_pairs(records, "question", "first", "second")
    assert [(p.prompt, p.chosen, p.rejected) for p in built.pairs] == [
        (prompt_of("win"), "win A", "win B"),
        (prompt_of("loss"), "loss B", "loss A"),
    ]
    assert built.pairs[0].meta == {
        "judgment": "p-win",
        "outcome": "win",
        "reasons": {
            "openai/j0": [["win forward 0"], ["win reverse 0"]],
            "openai/j1": [["win forward 1"], ["win reverse 1"]],
        },
    }
    assert built.dropped == {
        "orders disagree": 1,
        "tie": 1,
        "the jury split": 1,
        "no verdict (an order unread)": 1,
        "the call failed": 1,
    }


def debate(name: str, stance: str = "Affirmative", argument: str = "Cages cause stress.") -> dict:
    """A `moot debate` record (docs/schemas.md): its conclusion is the SFT target."""
    return {
        "id": name,
        "topic": "Should zoos be banned?",
        "stance": stance,
        "argument": argument,
        "status": "ok",
        "transcript": [{"speaker": "A", "side": stance, "round": 0, "text": "..."}],
        "conclusion": f"conclusion of {name}",
    }


def judgment(name: str, affirmative: Any, negative: Any, status: str = "complete") -> dict:
    """A `moot judge` record of debate `name`: each side's final score (None: unread)."""

    def scored(score: Any) -> dict:
        return {"parse_failure": True, "raw": "?"} if score is None else {"score": score}

    final = {"debaters": {"Affirmative": scored(affirmative), "Negative": scored(negative)}}
    done = status == "complete"
    return {"debate": name, "status": status, "final": final if done else None}


def test_debatrix_scores_of_debater_a_pair_conclusions_of_one_argument():
    aff = [debate(f"aff-{n}") for n in range(4)]
    neg = [debate(f"neg-{n}", "Negative", "Zoos save species.") for n in range(3)]
    panel = {"id": "pb-1", "motion": "This house would ban zoos", "speeches": []}  # PanelBench
    judged = [
        (judgment("aff-0", 8, 2), aff[0]),  # A is Affirmative: 8
        (judgment("aff-1", 6, 9), aff[1]),  # 6: exactly 2 below aff-0
        (judgment("aff-2", 7, 1), aff[2]),  # 7: 1 from each
        (judgment("aff-3", None, 5), aff[3]),  # A's score unread
        (judgment("neg-0", 9, 4), neg[0]),  # A is Negative: 4, not 9
        (judgment("neg-1", 1, 7), neg[1]),  # 7: 3 above neg-0
        (judgment("neg-2", 5, 5, status="incomplete"), neg[2]),
        (judgment("neg-2", 5, 5, status="error"), neg[2]),
        (judgment("pb-1", 6, 3), panel),  # no conclusion: not a moot debate
        (judgment("gone", 6, 3), None),  # no longer in its debates file (as judged)
    ]
    built = debatrix_pairs(judged, min_margin=2)
    affirmative = prompt_of(
        instruction("Should zoos be banned?", "Affirmative", "Cages cause stress.")
    )
    negative = prompt_of(instruction("Should zoos be banned?", "Negative", "Zoos save species."))
    assert [(p.prompt, p.chosen, p.rejected, p.meta["scores"]) for p in built.pairs] == [
        (affirmative, "conclusion of aff-0", "conclusion of aff-1", [8, 6]),
        (negative, "conclusion of neg-1", "conclusion of neg-0", [7, 4]),
    ]  # fmt: skip
    # DEBATunE's inference instruction (paraphrase 0), the stance lower-cased
    assert "affirmative" in affirmative[0]["content"]
    assert "Cages cause stress." in affirmative[0]["content"]
    assert built.pairs[0].meta["origins"] == ["aff-0", "aff-1"]
    assert {p.source for p in built.pairs} == {"debatrix"}
    assert built.dropped == {
        "closer than the margin": 2,  # aff-2 against aff-0 and aff-1
        "debater A's score unread": 1,
        "judgment incomplete (a prompt over the context window)": 1,
        "judgment failed (a judge call)": 1,
        "not a moot debate record (no conclusion)": 1,
        "its debate not in its debates file as judged": 1,
    }
    # one debate judged twice (repeats, two judge runs): one answer, the mean of its scores
    again = [(judgment("aff-1", 10, 1), aff[1]), *judged[:2]]  # aff-1: (10 + 6) / 2 = 8
    assert not debatrix_pairs(again, min_margin=2).pairs  # 8 vs 8: no pair either way
