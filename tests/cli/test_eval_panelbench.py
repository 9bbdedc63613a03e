"""`moot eval panelbench` end to end on hand-made `moot judge` folders with known RMSE values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.cli.helpers import png_size, run_moot

pytestmark = pytest.mark.subprocess

FAILED = {"parse_failure": True, "raw": "?", "error": "no score", "repaired": True}
BP = {"pro": ["OG", "CG"], "con": ["OO", "CO"]}


def verdict(winner: str | None, **scores: float | None) -> dict:
    return {
        "weight": 1,
        "allow_tie": True,
        "speeches": [],
        "analysis": "...",
        "debaters": {
            name: {"parse_failure": FAILED} if s is None else {"comment": "ok", "score": s}
            for name, s in scores.items()
        },
        "winner": winner,
        "winner_failure": None if winner else FAILED,
    }


def judgment(debate: str, repeat: int, status: str = "complete", **verdicts: dict) -> dict:
    final = verdicts.pop("final", None)
    sides = BP if debate.startswith("b") else {"pro": [f"{debate}-pro"], "con": [f"{debate}-con"]}
    return {
        "id": f"{debate}/{repeat}",
        "debate": debate,
        "repeat": repeat,
        "framework": "debatrix",
        "format": "bp" if debate.startswith("b") else "1v1",
        "judge": "openai/judge",
        "status": status,
        "reason": None if status == "complete" else "why",
        **sides,
        "dimensions": verdicts,
        "final": final,
        "usage": {},
    }


def duel(debate: str, repeat: int, **verdicts: tuple) -> dict:
    """A 1v1 judgment from (winner, pro score, con score) per verdict; 'P'/'C' name a side."""
    names = {"P": f"{debate}-pro", "C": f"{debate}-con", "tie": "tie", None: None}
    built = {
        name: verdict(names[w], **{f"{debate}-pro": p, f"{debate}-con": c})
        for name, (w, p, c) in verdicts.items()
    }
    return judgment(debate, repeat, **built)


def write_gold(path: Path) -> Path:
    labels = {
        "d1": (0.0, 0.0, 0.5, 1.0),
        "d2": (1.0, 1.0, 1.0, 0.5),
        "d3": (0.5, 0.0, 0.5, 0.5),
    }
    records = [
        {
            "id": name,
            "motion": "Zoos should close",
            "pro": [f"{name}-pro"],
            "con": [f"{name}-con"],
            "speeches": [
                {"speaker": f"{name}-pro", "content": "Yes."},
                {"speaker": f"{name}-con", "content": "No."},
            ],
            "gold": {"final": f, "dimensions": {"argument": a, "source": s, "language": g}},
        }
        for name, (f, a, s, g) in labels.items()
    ]
    for name, winners in (("b1", ["CG"]), ("b2", ["OG", "OO"])):
        speeches = [{"speaker": team, "content": f"{team} speaks."} for team in BP["pro"]]
        records.append(
            {
                "id": name,
                "motion": "Tax meat",
                **BP,
                "speeches": speeches,
                "gold": {"winners": winners},
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_judgments(folder: Path, records: list[dict], torn: str = "") -> Path:
    folder.mkdir(parents=True)
    text = "".join(json.dumps(r) + "\n" for r in records) + torn
    (folder / "judgments.jsonl").write_text(text, encoding="utf-8")
    return folder


def debatrix_run(folder: Path) -> Path:
    torn = json.dumps(duel("d2", 1, final=("P", 9, 1)))[:60]  # a crash mid-append: unjudged
    records = [
        duel(
            "d1",
            0,
            final=("P", 8, 6),
            argument=("P", 7, 7),
            source=("tie", 8, 6),
            language=("C", 5, 9),
        ),
        duel(
            "d1",
            1,
            final=("C", 6, 7),
            argument=("C", 6, 8),
            source=("P", None, 6),
            language=(None, 7, 7),
        ),
        duel(
            "d2",
            0,
            final=("C", 5, 9),
            argument=("P", 9, 4),
            source=("C", 3, 8),
            language=("tie", 6, 6),
        ),
        judgment("d3", 0, status="incomplete"),
        judgment("d3", 1, status="error"),
        judgment("b1", 0, final=verdict("CO")),
        judgment("b1", 1, final=verdict("CG")),
        judgment("b2", 0, final=verdict(None)),
        judgment("b2", 1, status="error"),
    ]
    return write_judgments(folder, records, torn)


def direct_run(folder: Path) -> Path:
    records = []
    for debate, (w, p, c) in {"d1": ("P", 7, 7), "d2": ("P", 8, 2), "d3": ("C", 5, 6)}.items():
        record = duel(debate, 0, final=(w, p, c), general=(w, p, c))
        del record["framework"]  # named after its folder then
        records.append(record)
    return write_judgments(folder, records)


def rms(*squares: float) -> float:
    return 100 * math.sqrt(sum(squares) / len(squares))


def test_eval_panelbench_reports_hand_computed_rmse_bp_and_baselines(tmp_path):
    gold = write_gold(tmp_path / "gold.jsonl")
    debatrix = debatrix_run(tmp_path / "debatrix")
    direct = direct_run(tmp_path / "direct_run")
    result = run_moot("eval", "panelbench", "--predictions", debatrix, direct, "--gold", gold)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "debatrix.panelbench"  # beside the first run, never inside it
    assert png_size(out / "chart.png") == (3 * 660, 528)  # 2 modes and BP, 5.5 x 4.4 in each
    assert (out / "summary.md").read_text(encoding="utf-8") in result.stdout
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))

    assert summary["debates"] == {"1v1": 3, "bp": 2}
    assert summary["baselines"]["always_tie"] == pytest.approx(rms(0.25, 0.25, 0))
    assert summary["baselines"]["always_con"] == pytest.approx(rms(1, 0, 0.25))
    assert summary["baselines"]["always_pro"] == pytest.approx(rms(0, 1, 0.25))

    first, second = summary["frameworks"]
    assert (first["name"], first["repeats"], first["judgments"]) == ("debatrix", 2, 9)
    art = first["debateart"]
    assert art["columns"] == ["final", "argument", "source", "language"]
    # squares of d1 run 0, d1 run 1, d2 run 0 (None: unparsed); RMSE per run, then averaged
    expected = {
        "score": {
            "final": (0, 1, 0),
            "argument": (0.25, 1, 1),
            "source": (0, None, 0),  # 8 vs 6 is within the margin of 3: a tie
            "language": (0, 0.25, 0),
        },
        "direct": {
            "final": (0, 1, 0),
            "argument": (0, 1, 1),
            "source": (0, 0.25, 0),
            "language": (0, None, 0),
        },
    }
    for mode, columns in expected.items():
        for column, (first_run, second_run, other) in columns.items():
            cell = art[mode][column]
            runs = [rms(first_run, other), *([] if second_run is None else [rms(second_run)])]
            assert cell["rmse"] == pytest.approx(sum(runs) / len(runs)), (mode, column)
            later = None if second_run is None else runs[1]
            assert cell["rmse_runs"] == {"0": pytest.approx(runs[0]), "1": later}
            pooled = [sq for sq in (first_run, second_run, other) if sq is not None]
            assert cell["rmse_pooled"] == pytest.approx(rms(*pooled))
            unparsed = int(second_run is None)
            assert cell["predicted"] == 3 - unparsed and cell["parse_failures"] == unparsed
            assert (cell["incomplete"], cell["errors"], cell["unjudged"]) == (1, 1, 1)

    # every debate has 2 speeches and few tokens: Figure 5's short buckets hold them all
    short, many = art["buckets"]["direct"]["speeches<8"], art["buckets"]["direct"]["speeches>=8"]
    assert short["rmse"] == art["direct"]["final"]["rmse"] and short["predicted"] == 3
    assert many["rmse"] is None and many["predicted"] == 0
    assert art["buckets"]["score"]["tokens<4000"]["rmse"] == art["score"]["final"]["rmse"]
    d2g = summary["gold_statistics"]["d2g"]["argument"]
    assert d2g["unweighted"] == pytest.approx(rms(0, 0, 0.25)) and d2g["weighted"] is None
    assert "| argument | 2 | 0 | 1 | n/a | 28.87 |" in result.stdout

    bp = first["bp"]
    assert (bp["accuracy"], bp["accuracy_all"], bp["completion"]) == (0.5, 0.25, 0.75)
    assert bp["winners"] == {"OG": 0, "OO": 0, "CG": 1, "CO": 1} and bp["closing_share"] == 1.0
    assert (bp["parse_failures"], bp["errors"], bp["unjudged"]) == (1, 1, 0)
    # Table 7's Gold row over 2 runs: b1 won by CG alone, b2 by OG and OO (half each)
    assert bp["gold_winners"] == {"OG": 1.0, "OO": 1.0, "CG": 2.0, "CO": 0.0}
    assert "| gold (expected, 2 runs) |  |  |  |  | 1 | 1 | 2 | 0 | 50.0% |" in result.stdout

    assert second["name"] == "direct_run"
    assert second["debateart"]["columns"] == ["final"]  # "general" has no gold
    assert second["debateart"]["score"]["final"]["rmse"] == pytest.approx(rms(0.25, 1, 0.25))
    assert second["debateart"]["direct"]["final"]["rmse"] == pytest.approx(rms(0, 1, 0.25))
    assert second["bp"]["unjudged"] == 2 and second["bp"]["accuracy"] is None


def test_tie_margin_out_and_quiet(tmp_path):
    gold = write_gold(tmp_path / "gold.jsonl")
    debatrix = debatrix_run(tmp_path / "debatrix")
    out = tmp_path / "report"
    args = ("--predictions", debatrix, "--gold", gold, "--out", out, "--tie-margin", 1, "--quiet")
    result = run_moot("eval", "panelbench", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["tie_margins"] == {"final": 0, "argument": 0, "source": 1, "language": 1}
    source = summary["frameworks"][0]["debateart"]["score"]["source"]
    assert source["rmse"] == pytest.approx(rms(0.25, 0))  # 8 vs 6 is now a pro win
    assert (out / "chart.png").exists() and (out / "summary.md").exists()


def assert_one_error_line(result, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("moot: error:")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def test_a_folder_without_judgments_exits_2(tmp_path):
    gold = write_gold(tmp_path / "gold.jsonl")
    (tmp_path / "empty").mkdir()
    result = run_moot("eval", "panelbench", "--predictions", tmp_path / "empty", "--gold", gold)
    assert_one_error_line(result, str(tmp_path / "empty" / "judgments.jsonl"), "file not found")
    assert not (tmp_path / "empty.panelbench").exists()


def test_a_prediction_for_an_unknown_debate_exits_2(tmp_path):
    gold = write_gold(tmp_path / "gold.jsonl")
    folder = write_judgments(tmp_path / "run", [judgment("d9", 0, status="error")])
    result = run_moot("eval", "panelbench", "--predictions", folder, "--gold", gold)
    path = str(folder / "judgments.jsonl")
    assert_one_error_line(result, path, "debate 'd9'", "not in the gold file")


def test_a_negative_tie_margin_exits_2(tmp_path):
    gold = write_gold(tmp_path / "gold.jsonl")
    folder = debatrix_run(tmp_path / "run")
    args = ("eval", "panelbench", "--predictions", folder, "--gold", gold, "--tie-margin", "-1")
    assert_one_error_line(run_moot(*args), "--tie-margin")
