"""PanelBench metrics against hand-computed values, and the paper's baselines on the real gold."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from moot.core.data.debates import Debate, Speech, load_debates
from moot.core.errors import InputError
from moot.core.metrics.panelbench import (
    Missing,
    bp_summary,
    buckets,
    constant_baselines,
    evaluate_panelbench,
    gold_statistics,
    rmse,
    rmse_summary,
    score_label,
    winner_label,
)
from tests.conftest import shared_data

FAILED = {"parse_failure": {"parse_failure": True, "raw": "?", "error": "none", "repaired": True}}


def debate(pro=("A",), con=("B",), gold=None) -> Debate:
    speeches = (Speech(pro[0], "Yes."),)
    return Debate("d1", "Zoos should close", tuple(pro), tuple(con), speeches, gold=gold or {})


def scores(**values) -> dict:
    return {n: FAILED if v is None else {"comment": "c", "score": v} for n, v in values.items()}


def test_score_label_ties_within_the_margin_of_source_and_language():
    d = debate()
    assert score_label(d, scores(A=8, B=5), margin=3) == 0.5  # |diff| = 3 is still a tie
    assert score_label(d, scores(A=5, B=8.5), margin=3) == 1.0
    assert score_label(d, scores(A=9, B=5), margin=3) == 0.0


def test_score_label_with_no_margin_ties_only_equal_scores():
    d = debate()
    assert score_label(d, scores(A=7, B=7), margin=0) == 0.5
    assert score_label(d, scores(A=7, B=6), margin=0) == 0.0
    assert score_label(d, scores(A=6, B=7), margin=0) == 1.0


def test_score_label_averages_each_sides_debaters():
    d = debate(pro=("A", "C"), con=("B",))
    assert score_label(d, scores(A=8, C=6, B=7), margin=0) == 0.5
    assert score_label(d, scores(A=9, C=6, B=7), margin=0) == 0.0


def test_an_unreadable_or_absent_score_is_no_label():
    d = debate(pro=("A", "C"), con=("B",))
    assert score_label(d, scores(A=8, C=None, B=7), margin=0) is None
    assert score_label(d, scores(A=8, B=7), margin=0) is None  # C never scored


def test_winner_label():
    d = debate()
    assert [winner_label(d, w) for w in ("A", "tie", "B", None)] == [0.0, 0.5, 1.0, None]


def test_rmse_summary_counts_missing_items_and_leaves_them_out():
    items = [
        (0.0, 0.0),
        (1.0, 0.0),
        (0.5, 1.0),
        (Missing.PARSE_FAILURE, 1.0),
        (Missing.INCOMPLETE, 0.0),
        (Missing.ERROR, 0.5),
    ]
    summary = rmse_summary(items, unjudged=2)
    assert summary["rmse"] == pytest.approx(100 * math.sqrt((0 + 1 + 0.25) / 3))
    assert summary["rmse_pooled"] == summary["rmse"]  # one run
    assert {k: v for k, v in summary.items() if not k.startswith("rmse")} == {
        "predicted": 3,
        "parse_failures": 1,
        "incomplete": 1,
        "errors": 1,
        "unjudged": 2,
    }
    assert rmse_summary([(Missing.PARSE_FAILURE, 0.0)])["rmse"] is None
    assert rmse([], []) is None


def test_rmse_is_computed_per_run_then_averaged_as_the_paper_reports():
    items = [(0.0, 0.0), (1.0, 0.0), (0.5, 0.0), (Missing.PARSE_FAILURE, 1.0), (0.0, 1.0)]
    summary = rmse_summary(items, runs=[0, 0, 1, 1, 2])
    run0, run1, run2 = 100 * math.sqrt(1 / 2), 50.0, 100.0
    assert summary["rmse_runs"] == pytest.approx({"0": run0, "1": run1, "2": run2})
    assert summary["rmse"] == pytest.approx((run0 + run1 + run2) / 3)  # 73.57, not pooled
    assert summary["rmse_pooled"] == pytest.approx(100 * math.sqrt(2.25 / 4))  # 75.00
    only_failed = rmse_summary([(0.0, 0.0), (Missing.ERROR, 1.0)], runs=[0, 1])
    assert only_failed["rmse_runs"] == {"0": 0.0, "1": None} and only_failed["rmse"] == 0.0


def test_gold_statistics_by_hand_weight_each_debate_by_its_votes():
    debates = [
        debate(gold={"final": 0.0, "dimensions": {"argument": 0.0}, "vote_count": 3}),
        debate(gold={"final": 1.0, "dimensions": {"argument": 0.5}, "vote_count": 1}),
    ]
    stats = gold_statistics(debates)
    assert stats["split"] == {
        "final": {"pro": 1, "tie": 0, "con": 1},
        "argument": {"pro": 1, "tie": 1, "con": 0},
    }
    d2g = stats["d2g"]["argument"]
    assert d2g["unweighted"] == pytest.approx(100 * math.sqrt(0.25 / 2))  # 35.36
    assert d2g["weighted"] == pytest.approx(100 * math.sqrt(0.25 / 4))  # 25.00
    unvoted = [debate(gold={"final": 0.0, "dimensions": {"argument": 1.0}})]
    assert gold_statistics(unvoted)["d2g"]["argument"]["weighted"] is None
    assert gold_statistics([debate()]) is None


@pytest.mark.parametrize("source", ["debateart.jsonl", "DebateArt"])
def test_table_2_from_the_released_gold(source):
    stats = gold_statistics(load_debates(shared_data("panelbench", source)))
    d2g = stats["d2g"]
    weighted = [round(d2g[n]["weighted"], 2) for n in ("argument", "source", "language")]
    unweighted = [round(d2g[n]["unweighted"], 2) for n in ("argument", "source", "language")]
    assert weighted == [23.85, 41.02, 47.20]  # the paper's D2G column
    assert unweighted == [20.62, 41.53, 44.72]
    split = {column: tuple(counts.values()) for column, counts in stats["split"].items()}
    assert split == {
        "final": (38, 6, 56),  # Table 2 prints 37 / 7 / 56: one debate differs (documented)
        "argument": (33, 11, 56),
        "source": (14, 67, 19),
        "language": (9, 66, 25),
    }


def test_figure_5_buckets_of_the_released_gold_match_the_paper_counts():
    debates = load_debates(shared_data("panelbench", "debateart.jsonl"))
    counts = Counter(bucket for d in debates for bucket in buckets(d))
    assert (counts["speeches>=8"], counts["tokens>=4000"]) == (34, 51)  # Sec. 6.1
    assert all((buckets(d)[0] == "speeches>=8") == d.gold["is_many_round"] for d in debates)
    short = Debate("x", "m", ("A",), ("B",), (Speech("A", "word " * 10),) * 8)
    assert buckets(short) == ("speeches>=8", "tokens<4000")  # counted when there is no flag


def test_constant_baselines_by_hand():
    baselines = constant_baselines([0.0, 1.0, 1.0, 0.5])
    assert baselines["debates"] == 4
    assert baselines["always_tie"] == pytest.approx(100 * math.sqrt(0.75 / 4))
    assert baselines["always_con"] == pytest.approx(100 * math.sqrt(1.25 / 4))
    assert baselines["always_pro"] == pytest.approx(75.0)


def test_bp_accuracy_completion_and_positions():
    items = [
        ("CG", ["CG"]),
        ("CO", ["OG"]),
        ("OG", ["OG", "CO"]),
        (Missing.PARSE_FAILURE, ["OO"]),
        (Missing.INCOMPLETE, ["CG"]),
    ]
    summary = bp_summary(items, unjudged=1)
    assert summary["accuracy"] == pytest.approx(2 / 3)
    assert summary["accuracy_all"] == pytest.approx(2 / 6)
    assert summary["completion"] == pytest.approx(4 / 6)  # the parse failure did complete
    assert summary["winners"] == {"OG": 1, "OO": 0, "CG": 1, "CO": 1}
    assert summary["closing_share"] == pytest.approx(2 / 3)
    assert (summary["expected"], summary["predicted"], summary["parse_failures"]) == (6, 3, 1)
    assert (summary["incomplete"], summary["errors"], summary["unjudged"]) == (1, 0, 1)
    assert bp_summary([], unjudged=2)["accuracy"] is None


@pytest.mark.parametrize("source", ["debateart.jsonl", "DebateArt"])
def test_constant_baselines_on_the_real_gold_match_the_paper(source):
    debates = load_debates(shared_data("panelbench", source))
    baselines = constant_baselines([d.gold["final"] for d in debates])
    rounded = [round(baselines[f"always_{n}"], 2) for n in ("tie", "con", "pro")]
    assert rounded == [48.48, 62.85, 75.83]


# --- evaluate_panelbench on small files ---------------------------------------------------------


def verdict(winner: str | None, **values) -> dict:
    return {"analysis": "", "debaters": scores(**values), "winner": winner, "winner_failure": None}


def judgment(name: str, repeat: int = 0, status: str = "complete", **verdicts) -> dict:
    final = verdicts.pop("final", None)
    return {
        "id": f"{name}-{repeat}",
        "debate": name,
        "repeat": repeat,
        "framework": "debatrix",
        "format": "1v1",
        "status": status,
        "reason": None,
        "pro": ["A"],
        "con": ["B"],
        "dimensions": verdicts,
        "final": final,
    }


def gold_file(path: Path, labels: dict[str, dict]) -> Path:
    records = [
        {
            "id": name,
            "motion": "Zoos should close",
            "pro": ["A"],
            "con": ["B"],
            "speeches": [{"speaker": "A", "content": "Yes."}, {"speaker": "B", "content": "No."}],
            "gold": gold,
        }
        for name, gold in labels.items()
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def predictions(folder: Path, *records: dict) -> Path:
    folder.mkdir()
    text = "".join(json.dumps(r) + "\n" for r in records)
    (folder / "judgments.jsonl").write_text(text, encoding="utf-8")
    return folder


GOLD = {
    "d1": {"final": 0.0, "dimensions": {"argument": 0.0, "source": 0.5}},
    "d2": {"final": 1.0, "dimensions": {"argument": 1.0, "source": 1.0}},
}


def test_evaluate_panelbench_per_mode_and_column(tmp_path):
    gold = gold_file(tmp_path / "gold.jsonl", GOLD)
    folder = predictions(
        tmp_path / "run",
        judgment(
            "d1",
            final=verdict("A", A=8, B=6),
            argument=verdict("B", A=7, B=7),
            source=verdict("tie", A=8, B=6),
        ),
        judgment(
            "d2",
            final=verdict(None, A=5, B=9),
            argument=verdict("B", A=None, B=9),
            source=verdict("B", A=3, B=8),
        ),
        judgment("d1", repeat=1, status="incomplete"),
    )
    summary = evaluate_panelbench([folder], gold)
    assert summary["tie_margins"] == {"final": 0.0, "argument": 0.0, "source": 3.0}
    (run,) = summary["frameworks"]
    assert (run["name"], run["repeats"]) == ("debatrix", 2)
    assert (run["complete"], run["incomplete"], run["errors"]) == (2, 1, 0)
    art = run["debateart"]
    assert art["columns"] == ["final", "argument", "source"]
    score, direct = art["score"], art["direct"]
    assert score["final"]["rmse"] == 0.0 and score["final"]["predicted"] == 2
    assert score["argument"]["rmse"] == pytest.approx(50.0)  # a tie against a pro win
    assert score["argument"]["parse_failures"] == 1
    assert score["source"]["rmse"] == 0.0  # 8 vs 6 is within 3: a tie
    assert direct["final"]["rmse"] == 0.0 and direct["final"]["parse_failures"] == 1
    assert direct["argument"]["rmse"] == pytest.approx(100 * math.sqrt(1 / 2))
    for cell in (*score.values(), *direct.values()):
        assert (cell["incomplete"], cell["errors"], cell["unjudged"]) == (1, 0, 1)
        assert cell["predicted"] + cell["parse_failures"] + 1 + 1 == 4

    strict = evaluate_panelbench([folder], gold, margins={"source": 1})
    source = strict["frameworks"][0]["debateart"]["score"]["source"]
    assert source["rmse"] == pytest.approx(100 * math.sqrt(0.25 / 2))  # 8 vs 6 is now a pro win


def test_two_runs_of_one_framework_are_told_apart(tmp_path):
    gold = gold_file(tmp_path / "gold.jsonl", GOLD)
    record = judgment("d1", final=verdict("A", A=8, B=6))
    one, two = predictions(tmp_path / "one", record), predictions(tmp_path / "two", record)
    names = [f["name"] for f in evaluate_panelbench([one, two], gold)["frameworks"]]
    assert names == ["debatrix (one)", "debatrix (two)"]


def test_a_folder_without_a_framework_field_is_named_after_the_folder(tmp_path):
    gold = gold_file(tmp_path / "gold.jsonl", GOLD)
    record = judgment("d1", final=verdict("A", A=8, B=6))
    del record["framework"]
    folder = predictions(tmp_path / "my-run", record)
    assert evaluate_panelbench([folder], gold)["frameworks"][0]["name"] == "my-run"


BAD = {
    "unknown debate": (judgment("zzz"), "debate 'zzz': not in the gold file"),
    "other debaters": ({**judgment("d1", status="error"), "con": ["C"]}, "differ from the gold"),
    "unknown winner": (judgment("d1", final=verdict("Carol")), "unknown winner 'Carol'"),
    "no final": (judgment("d1"), "without its verdicts"),
    "bad status": (judgment("d1", status="done"), "unknown status 'done'"),
}


@pytest.mark.parametrize("case", BAD)
def test_predictions_that_do_not_fit_the_gold_are_input_errors(case, tmp_path):
    gold = gold_file(tmp_path / "gold.jsonl", GOLD)
    record, message = BAD[case]
    folder = predictions(tmp_path / "run", record)
    with pytest.raises(InputError, match=message) as caught:
        evaluate_panelbench([folder], gold)
    assert caught.value.path == folder / "judgments.jsonl"


def test_missing_empty_and_duplicated_judgments_are_input_errors(tmp_path):
    gold = gold_file(tmp_path / "gold.jsonl", GOLD)
    (tmp_path / "none").mkdir()
    with pytest.raises(InputError, match="file not found"):
        evaluate_panelbench([tmp_path / "none"], gold)
    with pytest.raises(InputError, match="no judgments"):
        evaluate_panelbench([predictions(tmp_path / "empty")], gold)
    twice = [judgment("d1", status="error"), {**judgment("d1", status="error"), "id": "other"}]
    with pytest.raises(InputError, match="two judgments of repeat 0"):
        evaluate_panelbench([predictions(tmp_path / "twice", *twice)], gold)


def test_real_gold_unjudged_debates_are_counted(tmp_path):
    gold = shared_data("panelbench", "debateart.jsonl")
    first = load_debates(gold)[0]
    record = {
        **judgment(first.id, final=verdict(first.con[0], **{first.pro[0]: 4, first.con[0]: 8})),
        "pro": list(first.pro),
        "con": list(first.con),
    }
    summary = evaluate_panelbench([predictions(tmp_path / "run", record)], gold)
    baselines = summary["baselines"]
    assert baselines["debates"] == 100
    rounded = [round(baselines[f"always_{n}"], 2) for n in ("tie", "con", "pro")]
    assert rounded == [48.48, 62.85, 75.83]  # the constant baselines, unweighted
    d2g = summary["gold_statistics"]["d2g"]  # Table 2's D2G, weighted by votes
    assert [round(d2g[n]["weighted"], 2) for n in d2g] == [23.85, 41.02, 47.20]
    final = summary["frameworks"][0]["debateart"]["score"]["final"]
    assert (final["predicted"], final["unjudged"]) == (1, 99)
    assert final["rmse"] == pytest.approx(100 * abs(1.0 - first.gold["final"]))
