"""CompQA report: aggregation of judged files, human tables, matching and agreement."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from moot.core.data.compqa import MAXIMA, load_judged
from moot.core.errors import ConfigError, InputError
from moot.core.metrics.agreement import krippendorff_alpha, pearson, spearman
from moot.core.metrics.compqa_human import (
    JUDGE,
    AnswerIndex,
    agreement_report,
    match_table,
    read_human_table,
)
from moot.core.metrics.compqa_report import (
    aggregate,
    build_report,
    check_by,
    file_summary,
    report_markdown,
)
from tests.conftest import shared_data

CATS = "Cats are calm.\n\nDogs are loyal.\tChoose dogs."
TEA = "Tea or coffee? Coffee’s caffeine wins."
SAME = "The same answer, judged in two files."
REFERENCE = {  # CompQA README: mean total by generator, GPT-4 judge
    "cam": 9.52,
    "gpt3-5": 16.658,
    "gpt4": 17.765,
    "human": 17.0875,
    "llama3-70b": 17.12,
    "llama3-8b": 16.58,
    "mixtral": 17.2,
    "perplexity": 17.415,
    "yahoo": 9.321,
}


def _points(*lost: int, **override: int) -> dict[int, int]:
    """Full points but one lost on each criterion in `lost`; `override` as C<n>=points."""
    points = {n: m - (n in lost) for n, m in MAXIMA.items()}
    points.update({int(k[1:]): v for k, v in override.items()})
    return points


def _ok(o1: str, o2: str, text: str, points: dict[int, int]) -> dict[str, Any]:
    return {
        "object1": o1,
        "object2": o2,
        "comparison": text,
        "score_dict": {str(n): p for n, p in points.items()},
        "score": sum(points.values()),
        "status": "ok",
        "problem": None,
    }


def _bad(o1: str, status: str, problem: str) -> dict[str, Any]:
    record = {"object1": o1, "object2": "b", "comparison": f"{o1} answer", "status": status}
    return record | {"score_dict": None, "score": None, "problem": problem}


def _judged(tmp: Path) -> dict[Path, list]:
    """Ours (gpt4 scenario 1, mixtral scenario 2, with status) and one judged elsewhere (cam)."""
    files = {
        "gpt4_scenario_1.json": [
            _ok("cats", "dogs", CATS, _points()),  # 19
            _ok("tea", "coffee", TEA, _points(7, 9)),  # 17
            _ok("x", "y", SAME, _points(1)),  # 18
            _bad("broken", "invalid", "missing C15"),
            _bad("failed", "error", "HTTP 500"),
        ],
        "mixtral_scenario_2.json": [
            _ok("x", "y", SAME, _points(1, 2, 3)),  # 16
            _ok("p", "q", "Another answer.", _points(15)),  # 18
        ],
        "cam.json": [  # CompQA's evaluated_summaries shape: no status, score_dict maybe a string
            {
                "object1": "ruby",
                "object2": "python",
                "comparison": "Ruby is a language.",
                "score_dict": str({str(n): p for n, p in _points(1, 2, 3, 9, 10).items()}),
                "score": 14,
            },
            {
                "object1": "mac",
                "object2": "pc",
                "comparison": "Mac or PC.",
                "score_dict": {str(n): p for n, p in _points(C5=2).items()},
                "score": 12,  # invalid criteria; their sum (20), as the paper counts, is the total
            },
            {"object1": "vim", "object2": "emacs", "comparison": "Vim.", "score": 17},
        ],
    }
    out = {}
    for name, records in files.items():
        path = tmp / name
        path.write_text(json.dumps(records), encoding="utf-8")
        out[path] = load_judged(path)
    return out


def _all(judged_files: dict[Path, list]) -> list:
    return [j for items in judged_files.values() for j in items]


def _write_table(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter="\t")
        writer.writerow(header)
        writer.writerows([[("" if v is None else v) for v in row] for row in rows])
    return path


def _score_dict_table(path: Path, rows: list[tuple[str, str, str, dict, str]]) -> Path:
    header = ["object1", "object2", "aspect", "comparison", "score"]
    header += [f"score_dict.{n}" for n in MAXIMA] + ["filename"]
    body = []
    for o1, o2, text, points, filename in rows:
        total = sum(points.values()) if len(points) == 15 else ""
        body.append([o1, o2, "", text, total, *(points.get(n) for n in MAXIMA), filename])
    return _write_table(path, header, body)


def _human_rows() -> list[tuple[str, str, str, dict, str]]:
    flattened = CATS.replace("\n", " ").replace("\t", " ")  # the tables flatten newlines/tabs
    mojibake = TEA.replace("’", "‚Äô")  # UTF-8 read as Mac Roman, as in CompQA's tables
    return [
        ("cats", "dogs", flattened, _points(7), "scored_gpt4_scenario_1_comparison"),
        ("x", "y", "unannotated row", {}, ""),
        ("tea", "coffee", mojibake, _points(7, 8, 9), "scored_gpt4_scenario_1_comparison"),
        ("x", "y", SAME, _points(1, 2), "../data/scored_mixtral_scenario_2_comparison.json"),
        ("x", "y", SAME, _points(1), ""),  # two differently judged copies: ambiguous
        ("new", "pair", "Never judged.", _points(), "scored_gpt4_scenario_1_comparison"),
        ("cats", "dogs", CATS, _points(), "scored_gpt4_scenario_1_comparison"),  # duplicate
    ]


# ---- aggregation ------------------------------------------------------------------------------


def test_aggregate_means_std_categories_and_counts(tmp_path: Path) -> None:
    groups = aggregate(_all(_judged(tmp_path)), ("generator", "scenario"))
    assert [(g["generator"], g["scenario"]) for g in groups] == [
        ("cam", None),
        ("gpt4", 1),
        ("mixtral", 2),
    ]
    cam, gpt4, mixtral = groups
    assert gpt4["n"] == 5 and gpt4["n_total"] == 3 and gpt4["n_valid"] == 3
    assert (gpt4["invalid"], gpt4["errors"]) == (1, 1)  # never in a mean
    assert gpt4["mean"] == pytest.approx(18.0)
    assert gpt4["std"] == pytest.approx(statistics.stdev([19, 17, 18]))  # sample std
    assert gpt4["categories"] == pytest.approx(
        {"structure": (7 + 6 + 6) / 3, "relevance": (5 + 4 + 5) / 3, "quality": 7.0}
    )
    assert gpt4["criteria"]["C9"] == pytest.approx(5 / 3)
    assert gpt4["lost"]["C9"] == pytest.approx(1 - (5 / 3) / 2)
    # judged elsewhere: the invalid record's criteria sum (20, not its recorded 12) counts
    assert (cam["n_total"], cam["n_valid"], cam["invalid"]) == (3, 1, 1)
    assert cam["mean"] == pytest.approx((14 + 20 + 17) / 3)  # unchecked 17: total only
    assert cam["criteria"]["C5"] == 1.0
    assert mixtral["std"] == pytest.approx(statistics.stdev([16, 18]))


def test_aggregate_by_one_key_and_undefined_std(tmp_path: Path) -> None:
    judged = _all(_judged(tmp_path))
    by_scenario = aggregate(judged, ["scenario"])
    assert [g["scenario"] for g in by_scenario] == [1, 2, None]
    # several cells: the mean of the cells' means ± the mean of their stds (the paper's Table 3)
    (everyone,) = aggregate(judged, ["generator"][:0] or ["generator"])[:1]
    overall = build_report(_judged(tmp_path))["overall"]
    cells = [(19, 17, 18), (16, 18), (14, 20, 17)]
    assert overall["cells"] == 3
    assert overall["mean"] == pytest.approx(statistics.mean(map(statistics.mean, cells)))
    assert overall["std"] == pytest.approx(statistics.mean(map(statistics.stdev, cells)))
    assert overall["pooled_mean"] == pytest.approx(statistics.mean(sum(cells, ())))
    assert overall["pooled_std"] == pytest.approx(statistics.stdev(sum(cells, ())))
    assert everyone["generator"] == "cam"
    one = aggregate([j for j in judged if j.answer.object1 == "cats"], ["generator"])
    assert one[0]["mean"] == 19.0 and one[0]["std"] is None


@pytest.mark.parametrize("by", [["model"], [], ["generator", "generator"], [" "]])
def test_bad_by_is_a_config_error(by: list[str]) -> None:
    with pytest.raises(ConfigError, match="--by"):
        check_by(by)


def test_file_summary_names_invalid_records(tmp_path: Path) -> None:
    judged_files = _judged(tmp_path)
    ours, _, cam = (file_summary(p, items) for p, items in judged_files.items())
    assert (ours["n"], ours["invalid"], ours["errors"]) == (5, 1, 1)
    assert ours["problems"] == [
        {"where": "index 3", "status": "invalid", "problem": "missing C15"},
        {"where": "index 4", "status": "error", "problem": "HTTP 500"},
    ]
    assert (cam["invalid_total_kept"], cam["unchecked"]) == (1, 1)
    assert "C5 = 2 is outside 0-1" in cam["problems"][0]["problem"]


# ---- human tables and matching ----------------------------------------------------------------


def test_read_score_dict_table(tmp_path: Path) -> None:
    table = read_human_table(_score_dict_table(tmp_path / "hum.tsv", _human_rows()))
    assert table.layout == "score_dict" and table.raters == ("hum",)
    assert table.blank == 1 and len(table.rows) == 6
    first = table.rows[0]
    assert first.line == 2 and first.source == ("gpt4", 1)
    assert first.total("hum") == 18.0 and first.recorded == {"hum": 18.0}
    assert table.rows[2].source == ("mixtral", 2)  # path and .json stripped


def test_match_table_exact_loose_tiebreak_and_counts(tmp_path: Path) -> None:
    judged = _all(_judged(tmp_path))
    table = read_human_table(_score_dict_table(tmp_path / "hum.tsv", _human_rows()))
    matching = match_table(table, AnswerIndex(judged))
    matched = {row.line: judged[i] for row, i in matching.matched}
    assert matched[2].answer.object1 == "cats"  # flattened newlines still match
    assert matched[4].answer.object1 == "tea"  # mojibake: matched loosely
    assert matched[5].answer.generator == "mixtral"  # filename broke the tie
    assert matching.loose == 1
    assert [r.line for r in matching.ambiguous] == [6]
    assert [r.line for r in matching.unmatched] == [7]
    assert [r.line for r in matching.duplicates] == [8]


def test_identical_copies_are_not_ambiguous(tmp_path: Path) -> None:
    path = tmp_path / "gpt3-5_scenario_2.json"
    path.write_text(json.dumps([_ok("a", "b", "Twice.", _points())] * 2), encoding="utf-8")
    table = read_human_table(
        _score_dict_table(tmp_path / "h.tsv", [("a", "b", "Twice", _points(), "")])
    )
    matching = match_table(table, AnswerIndex(load_judged(path)))
    assert len(matching.matched) == 1 and not matching.ambiguous


def test_c_layout_with_half_points(tmp_path: Path) -> None:
    header = ["object1", "object2", "aspect", "comparison", "score"]
    header += [f"C{n}" for n in MAXIMA] + ["filename", "model", "scenario"]
    half = [0.5, *[1.0] * 7, 1.5, 2, 2, 2, 1, 1, 0.5]
    path = _write_table(
        tmp_path / "avg.tsv", header, [["cats", "dogs", "", CATS, 18, *half, "", "gpt4", "1"]]
    )
    table = read_human_table(path)
    assert table.layout == "C" and table.rows[0].total("avg") == pytest.approx(17.5)
    assert table.rows[0].source is None and table.rows[0].recorded == {"avg": 18.0}


def _multi_table(path: Path) -> Path:
    header = ["object1", "object2", "aspect", "comparison"]
    header += [f"score_dict.{n}" for n in MAXIMA] + ["sum", "filename"]

    def cells(h1: dict, h2: dict | None, repr_dict: bool = False) -> list[str]:
        out = []
        for n in MAXIMA:
            cell = {"human_1": h1[n], "human_2": "" if h2 is None else h2[n], "gpt4": 1}
            out.append(str(cell) if repr_dict else json.dumps(cell))
        totals = {"human_1": sum(h1.values()), "human_2": "" if h2 is None else 0, "gpt4": 15}
        return [*out, json.dumps(totals)]

    rows = [
        ["cats", "dogs", "", CATS, *cells(_points(7), _points(7, 8)), "scored_gpt4_scenario_1"],
        ["tea", "coffee", "", TEA, *cells(_points(), None, repr_dict=True), ""],
        ["p", "q", "", "Another answer.", *cells(_points(3), _points(3, 15)), ""],
    ]
    return _write_table(path, header, rows)


def test_multi_rater_cells_json_and_python_repr(tmp_path: Path) -> None:
    table = read_human_table(_multi_table(tmp_path / "merged.tsv"))
    assert table.layout == "multi"
    assert table.raters == ("merged:human_1", "merged:human_2", "merged:gpt4")
    tea = table.rows[1]
    assert "merged:human_2" not in tea.ratings and tea.total("merged:human_1") == 19.0
    assert table.rows[0].recorded["merged:human_2"] == 0.0  # recorded, never used as a total


def test_a_repeated_multi_rater_row_still_adds_its_new_raters(tmp_path: Path) -> None:
    # CompQA's merged table repeats answers; a later row may hold the only human_1 rating
    header = ["object1", "object2", "comparison", *(f"score_dict.{n}" for n in MAXIMA)]

    def row(**raters: dict) -> list[str]:
        cells = [json.dumps({r: p[n] for r, p in raters.items()}) for n in MAXIMA]
        return ["cats", "dogs", CATS, *cells]

    path = _write_table(
        tmp_path / "merged.tsv",
        header,
        [row(gpt4=_points()), row(gpt4=_points(1), human_1=_points(7)), row(gpt4=_points())],
    )
    judged = _all(_judged(tmp_path))
    matching = match_table(read_human_table(path), AnswerIndex(judged))
    assert (len(matching.matched), len(matching.duplicates)) == (2, 1)
    raters = agreement_report(judged, [read_human_table(path)])["pairs"]
    totals = {(p["a"], p["b"]): p["n"] for p in raters}
    assert totals[(JUDGE, "merged:human_1")] == 1  # the second row's rating counts
    gpt4 = next(p for p in raters if p["b"] == "merged:gpt4")
    assert gpt4["criteria"]["C1"]["n"] == 1  # one gpt4 rating: the first row's


def test_agreement_report_pairs_and_values(tmp_path: Path) -> None:
    judged = _all(_judged(tmp_path))
    tables = [
        read_human_table(_score_dict_table(tmp_path / "hum.tsv", _human_rows())),
        read_human_table(_multi_table(tmp_path / "merged.tsv")),
    ]
    report = agreement_report(judged, tables)
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    assert (JUDGE, "hum") in pairs and ("hum", "merged:human_1") in pairs
    assert len(pairs) == 4 + 6  # the judge with 4 raters, and the 4 raters pairwise
    judge_hum = pairs[(JUDGE, "hum")]
    judge_totals, hum_totals = [19, 17, 16], [18, 16, 17]  # cats, tea, x/y (mixtral)
    assert judge_hum["n"] == 3
    r, rho = pearson(judge_totals, hum_totals), spearman(judge_totals, hum_totals)
    assert r is not None and rho is not None
    assert judge_hum["total"] == {
        "n": 3,
        "pearson": pytest.approx(r.r),
        "pearson_p": pytest.approx(r.p),
        "spearman": pytest.approx(rho.r),
        "spearman_p": pytest.approx(rho.p),
        "alpha": pytest.approx(krippendorff_alpha([judge_totals, hum_totals])),
    }
    c7 = judge_hum["criteria"]["C7"]  # judge 1, 0, 1 vs human 0, 0, 1
    assert c7["n"] == 3 and c7["pearson"] == pytest.approx(0.5)  # by hand: cov 1/3 / (2/3)
    c11 = judge_hum["criteria"]["C11"]  # constant: undefined, and so is its p-value
    assert c11["pearson"] is None and c11["pearson_p"] is None
    h1_h2 = pairs[("merged:human_1", "merged:human_2")]
    assert h1_h2["n"] == 2 and h1_h2["total"]["n"] == 2
    summary = report["tables"][0]
    assert (summary["annotated"], summary["blank"], summary["matched"]) == (6, 1, 3)
    assert (summary["matched_loose"], summary["unmatched"], summary["ambiguous"]) == (1, 1, 1)
    assert summary["unmatched_rows"] == ["line 7 (new vs pair, gpt4 scenario 1)"]
    assert report["tables"][1]["recorded_total_mismatch"]["merged:human_2"] == 2


def test_build_report_and_markdown(tmp_path: Path) -> None:
    judged_files = _judged(tmp_path)
    tables = [read_human_table(_score_dict_table(tmp_path / "hum.tsv", _human_rows()))]
    report = build_report(judged_files, tables, ["generator"])
    assert json.loads(json.dumps(report)) == report  # JSON-ready, no NaN
    assert [g["generator"] for g in report["groups"]] == ["cam", "gpt4", "mixtral"]
    assert len(report["generator_scenario"]) == 3
    assert report["overall"]["n_total"] == 8
    markdown = report_markdown(report)
    assert "| gpt4 | 3 | 18.0000 ± 1.00 |" in markdown
    assert "index 3: invalid: missing C15" in markdown
    assert "sum of its criteria" in markdown and "sample standard deviation" in markdown
    assert "| judge | hum | 3 |" in markdown and "undef." in markdown
    assert "Per criterion" not in report_markdown(report, full=False)


# ---- bad human tables -------------------------------------------------------------------------


def test_out_of_range_value_names_file_and_line(tmp_path: Path) -> None:
    rows = _human_rows()[:1] + [("tea", "coffee", TEA, _points(C2=2), "")]
    path = _score_dict_table(tmp_path / "hum.tsv", rows)
    with pytest.raises(InputError, match=r"hum.tsv, line 3: C2 = 2 is outside 0-1"):
        read_human_table(path)
    table = read_human_table(path, drop_out_of_range=True)
    assert table.dropped == ("line 3: C2 = 2",) and table.rows[1].total("hum") is None


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("score_dict.15", "score_dict.16"), r"line 1: missing columns"),
        (lambda t: t.replace("object1", "first"), r"line 1: missing columns: object1"),
        (lambda t: t.replace("\t1\t", "\tone\t", 1), r"line 2: C\d+ is 'one', not a number"),
        (lambda t: t + "cats\tdogs\t\n", r"line 4: bad row: 3 fields"),
        (
            lambda t: t.replace("\t1\t", '\t{"human_1": 1}\t', 1),
            r"line 2: C2 is not a \{rater: points\} dict",
        ),
    ],
)
def test_malformed_tables_name_file_and_line(tmp_path: Path, edit: Any, message: str) -> None:
    path = _score_dict_table(tmp_path / "bad.tsv", _human_rows()[:2])
    path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(InputError, match=f"bad.tsv, {message}"):
        read_human_table(path)


def test_table_without_a_matching_row_is_an_input_error(tmp_path: Path) -> None:
    rows = [("new", "pair", "Never judged.", _points(), "")]
    table = read_human_table(_score_dict_table(tmp_path / "other.tsv", rows))
    with pytest.raises(InputError, match="other.tsv: none of its 1 annotated rows matches"):
        agreement_report(_all(_judged(tmp_path)), [table])


def test_empty_or_unannotated_table(tmp_path: Path) -> None:
    path = _score_dict_table(tmp_path / "blank.tsv", [("x", "y", "text", {}, "")])
    with pytest.raises(InputError, match="blank.tsv: no annotated rows"):
        read_human_table(path)


# ---- the shared CompQA data -------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_judged() -> dict[Path, list]:
    folder = shared_data("compqa", "evaluated_summaries", "gpt-4")
    return {path: load_judged(path) for path in sorted(folder.glob("*.json"))}


def test_reproduces_compqa_reference_means(shared_judged: dict[Path, list]) -> None:
    groups = aggregate(_all(shared_judged), ["generator"])
    means = {g["generator"]: g["mean"] for g in groups}
    digits = {name: len(str(value).split(".")[1]) for name, value in REFERENCE.items()}
    assert {name: round(means[name], digits[name]) for name in REFERENCE} == REFERENCE
    assert sum(g["invalid"] for g in groups) == 1  # perplexity scenario 2, index 39, C5/C6 = 2


def test_real_human_tables_match_and_agree(shared_judged: dict[Path, list]) -> None:
    folder = shared_data("compqa", "evaluation_tables")
    tables = [
        read_human_table(folder / name, drop_out_of_range=True)
        for name in ("dataset_hum1_evaluation.tsv", "dataset_hum2_evaluation.tsv")
    ]
    assert tables[0].dropped == ("line 51: C2 = 2", "line 89: C2 = 2")
    report = agreement_report(_all(shared_judged), tables)
    hum1, hum2 = report["tables"]
    assert (hum1["annotated"], hum1["matched"], hum1["matched_loose"]) == (129, 129, 30)
    assert (hum2["annotated"], hum2["matched"], hum2["unmatched"]) == (248, 247, 1)
    assert hum2["recorded_total_mismatch"] == {"dataset_hum2_evaluation": 142}
    pairs = {(p["a"], p["b"]): p["total"] for p in report["pairs"]}
    between = pairs[("dataset_hum1_evaluation", "dataset_hum2_evaluation")]
    assert between["n"] == 95 and between["pearson"] == pytest.approx(0.760, abs=5e-4)
    with_judge = pairs[(JUDGE, "dataset_hum2_evaluation")]
    assert with_judge["n"] == 243 and with_judge["pearson"] == pytest.approx(0.567, abs=5e-4)
