"""CompQA's published judge tables, reproduced from the released judged files.

Table 5 (Appendix A) prints mean ± std per generator and scenario for each judge; Table 3
(Section 4) per generator. The released files hold three judges: GPT-4 (``gpt-4``, in
../shared), GPT-3.5 and Perplexity (``gpt-3.5/fewshot``, ``perplexity/fewshot``, read from the
local mirror of the released repository). Table 3's ± is the mean of the Table 5 cells'
sample standard deviations, not the pooled one (checked below). Printed figures are matched to
their last printed digit (|ours - printed| <= 0.01: the paper rounds some and truncates others,
e.g. 17.388 printed 17.38).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from moot.core.data.compqa import load_judged
from moot.core.metrics.compqa_human import agreement_report, read_human_table
from moot.core.metrics.compqa_report import aggregate, human_means
from tests.conftest import released_files, shared_data

REPO = "lilaspourpre/cqa-evaluation-framework"
ROWS = ("gpt3-5", "gpt4", "llama3-70b", "llama3-8b", "mixtral", "perplexity")
# Table 5, per judge column: the six LLM rows (scenarios 1-4), then Human, Yahoo, CAM
TABLE_5 = {
    "gpt-4": """
        16.95 1.44  14.10 3.15  18.21 1.02  17.37 1.83
        17.59 1.00  17.22 1.33  18.23 0.95  18.03 0.95
        17.22 1.20  15.90 1.78  18.06 1.11  17.30 1.37
        16.78 1.40  14.10 3.36  18.26 0.88  17.18 1.57
        16.80 1.20  16.12 1.76  18.40 0.86  17.48 1.43
        17.32 1.24  16.46 2.07  18.68 0.47  17.20 1.56
        17.088 1.72  9.32 3.95  9.52 3.81""",
    "gpt-3.5/fewshot": """
        17.90 1.65  13.39 4.07  17.74 1.56  15.17 3.21
        17.84 2.15  16.77 2.76  18.36 1.14  17.21 2.47
        17.38 2.66  13.69 4.11  17.90 1.31  15.94 2.95
        17.67 2.15  11.76 4.83  18.58 0.70  15.81 2.73
        17.31 3.05  15.73 3.32  18.06 1.39  17.12 1.97
        17.22 3.75  14.52 3.78  18.53 0.96  15.82 3.53
        15.29 2.68  5.88 4.86  8.74 4.56""",
    "perplexity/fewshot": """
        16.84 2.14  11.07 5.79  18.44 1.12  18.12 1.53
        18.41 0.88  18.41 1.50  18.94 0.31  18.99 0.08
        18.06 1.00  15.74 4.30  19.00 0.00  18.92 0.27
        17.56 0.93  13.52 5.41  19.00 0.00  18.68 0.89
        17.48 0.79  16.54 3.78  18.84 0.51  18.80 0.57
        18.08 0.99  18.04 2.18  19.00 0.00  18.76 1.29
        18.33 1.03  5.96 3.68  6.46 2.89""",
}
# Table 3, per judge column: GPT-4o, GPT-3.5, Perplexity, Mixtral, Llama-3-8B, Llama-3-70B,
# CAM, Yahoo, Human
TABLE_3_ROWS = ("gpt4", "gpt3-5", "perplexity", "mixtral", "llama3-8b", "llama3-70b")
TABLE_3_ROWS += ("cam", "yahoo", "human")
TABLE_3 = {
    "gpt-4": "17.77 1.06 16.66 1.86 17.42 1.34 17.20 1.31 16.58 1.80 17.12 1.37 9.52 3.808 "
    "9.32 3.95 17.09 1.72",
    "gpt-3.5/fewshot": "17.54 2.14 16.05 2.62 16.52 3.00 17.05 2.43 15.95 2.60 16.22 2.76 "
    "8.74 4.56 5.88 4.86 15.29 2.68",
    "perplexity/fewshot": "18.69 0.69 16.12 2.64 18.47 1.11 17.92 1.41 17.19 1.81 17.93 1.39 "
    "6.46 2.89 5.96 3.68 18.33 1.03",
}
# the one printed figure the released files do not give: GPT-3.5 judging GPT-3.5, scenario 2
DIFFERS = {("gpt-3.5/fewshot", "gpt3-5", 2): ("std", 4.046)}


def _pairs(text: str) -> list[tuple[float, float]]:
    numbers = [float(v) for v in text.split()]
    return list(zip(numbers[::2], numbers[1::2], strict=True))


def _table_5(text: str) -> dict[tuple[str, int | None], tuple[float, float]]:
    pairs = _pairs(text)
    cells = {(g, s): pairs[i * 4 + s - 1] for i, g in enumerate(ROWS) for s in (1, 2, 3, 4)}
    singles = [("human", None), ("yahoo", None), ("cam", None)]
    return cells | dict(zip(singles, pairs[24:], strict=True))


def _judged(judge: str, tmp_path: Path) -> list:
    if judge == "gpt-4":
        folder = shared_data("compqa", "evaluated_summaries", "gpt-4")
    else:
        folder = released_files(tmp_path, REPO, f"data/evaluated_summaries/{judge}")
    files = sorted(folder.glob("*.json"))
    assert len(files) == 27
    return [j for path in files for j in load_judged(path)]


@pytest.mark.parametrize("judge", list(TABLE_5))
def test_table_5_cells_reproduce(judge: str, tmp_path: Path) -> None:
    judged = _judged(judge, tmp_path)
    assert len(judged) == 2158  # the paper's count (Section 3, footnote 3)
    groups = {(g["generator"], g["scenario"]): g for g in aggregate(judged)}
    printed = _table_5(TABLE_5[judge])
    assert set(groups) == set(printed)
    for cell, (mean, std) in printed.items():
        got = groups[cell]
        assert got["mean"] == pytest.approx(mean, abs=0.01), (judge, cell)
        if (judge, *cell) in DIFFERS:
            assert got["std"] == pytest.approx(DIFFERS[(judge, *cell)][1], abs=0.001)
            assert abs(got["std"] - std) > 0.01  # measured, documented in docs/faithfulness.md
        else:
            assert got["std"] == pytest.approx(std, abs=0.01), (judge, cell)


@pytest.mark.parametrize("judge", list(TABLE_3))
def test_table_3_rows_are_means_of_scenario_means_and_stds(judge: str, tmp_path: Path) -> None:
    by_generator = {g["generator"]: g for g in aggregate(_judged(judge, tmp_path), ["generator"])}
    pooled_would_match = 0
    for generator, (mean, std) in zip(TABLE_3_ROWS, _pairs(TABLE_3[judge]), strict=True):
        got = by_generator[generator]
        assert got["mean"] == pytest.approx(mean, abs=0.01), (judge, generator)
        assert got["std"] == pytest.approx(std, abs=0.01), (judge, generator)
        pooled_would_match += abs(got["pooled_std"] - std) <= 0.01
    # the pooled std reproduces only the one-file rows (CAM, Yahoo, Human), never the LLM rows
    assert pooled_would_match == 3


def test_other_judges_malformed_judgments_are_counted_not_fatal(tmp_path: Path) -> None:
    judged = _judged("gpt-3.5/fewshot", tmp_path)
    invalid = [j for j in judged if j.status == "invalid"]
    kept = [j for j in invalid if j.total is not None]
    assert (len(invalid), len(kept)) == (65, 15)
    problems = " ".join(j.problem for j in invalid)
    assert "outside 0-1" in problems and "unknown criteria 16" in problems
    assert "missing C1-C14" in problems
    # a recorded total outside 0-19 (21) with criteria out of range: invalid, criteria summed
    (over,) = [j for j in invalid if j.answer.source.name == "gpt3-5_scenario_2.json"]
    assert over.total == 21 and over.answer.where == "index 95"
    assert all(j.status == "ok" for j in _judged("perplexity/fewshot", tmp_path))


# ---- human annotation (Section 3, Tables 2, 3 and 5) -----------------------------------------

HUMAN_TABLE_5 = """
    14.93 2.84  11.46 2.93  16.92 1.90  15.00 1.70
    15.22 1.52  14.48 1.62  17.24 1.33  16.89 0.94
    14.04 1.59  13.29 2.40  17.69 1.58  16.46 1.30
    14.00 2.94  11.94 2.65  16.50 1.96  16.68 1.10
    14.67 1.73  11.54 3.66  16.29 2.73  12.50 2.39
    12.86 1.48  14.14 2.00  17.40 1.84  15.64 1.75
    16.69 1.76  6.00 1.00  8.04 2.78"""
HUMAN_TABLE_3 = (
    "15.96 1.35 14.58 2.34 15.00 1.77 13.75 2.63 14.77 2.16 15.37 1.72 8.04 2.78 6.00 1.00 "
    "16.69 1.76"
)


def _tables(*names: str, **options: bool) -> list:
    folder = shared_data("compqa", "evaluation_tables")
    return [read_human_table(folder / name, **options) for name in names]


def test_human_columns_of_tables_3_and_5_reproduce() -> None:
    (table,) = _tables("human_evaluation_367.tsv", keep_out_of_range=True)
    assert len(table.dropped) == 3 and all(d.endswith("(kept)") for d in table.dropped)
    (means,) = human_means(table)["raters"].values()
    cells = {(g["generator"], g["scenario"]): g for g in means["generator_scenario"]}
    printed = _table_5(HUMAN_TABLE_5)
    assert sum(g["n_total"] for g in cells.values()) == 367  # the paper's 367 answers
    for cell, (mean, std) in printed.items():
        assert cells[cell]["mean"] == pytest.approx(mean, abs=0.01), cell
        assert cells[cell]["std"] == pytest.approx(std, abs=0.01), cell
    by_generator = {g["generator"]: g for g in means["generator"]}
    for generator, (mean, std) in zip(TABLE_3_ROWS, _pairs(HUMAN_TABLE_3), strict=True):
        assert by_generator[generator]["mean"] == pytest.approx(mean, abs=0.01), generator
        assert by_generator[generator]["std"] == pytest.approx(std, abs=0.01), generator


def test_agreement_figures() -> None:
    """Section 3: human-human alpha 0.75 (final score), 0.71 (all scores); README: r 0.761,
    human-GPT-4 about 0.56. Table 2's GPT-4o rows (alpha 0.71 / 0.58, Spearman 0.69 / 0.55) are
    not what the released GPT-4 files give; the measured values are pinned here."""
    judged = [
        j
        for path in sorted(shared_data("compqa", "evaluated_summaries", "gpt-4").glob("*.json"))
        for j in load_judged(path)
    ]
    names = (
        "human_evaluation_367.tsv",
        "dataset_hum1_evaluation.tsv",
        "dataset_hum2_evaluation.tsv",
    )
    report = agreement_report(judged, _tables(*names, drop_out_of_range=True))
    pairs = {(p["a"], p["b"]): p for p in report["pairs"]}
    humans = pairs[("dataset_hum1_evaluation", "dataset_hum2_evaluation")]
    assert (
        round(humans["total"]["alpha"], 2) == 0.75
        and round(humans["separately"]["alpha"], 2) == 0.71
    )
    # README: r 0.761; the paper: 123 answers annotated twice, 103 match here
    assert round(humans["total"]["pearson"], 2) == 0.76 and humans["n"] == 103
    judge = pairs[("judge", "human_evaluation_367")]
    assert round(judge["total"]["pearson"], 2) == 0.56
    measured = [judge[k][m] for k in ("separately", "total") for m in ("alpha", "spearman")]
    assert [round(v, 2) for v in measured] == [
        0.65,
        0.67,
        0.41,
        0.44,
    ]  # printed 0.71 0.69 0.58 0.55
