"""`moot report compqa` end to end (subprocess): reference means, human agreement, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.helpers import run_moot
from tests.conftest import released_files, shared_data
from tests.core.metrics.test_compqa_report import REFERENCE

FULL = {str(n): 2 if 9 <= n <= 12 else 1 for n in range(1, 16)}


def _judged_files() -> list[Path]:
    return sorted(shared_data("compqa", "evaluated_summaries", "gpt-4").glob("*.json"))


def _one_judged(tmp_path: Path) -> Path:
    path = tmp_path / "gpt4_scenario_1.json"
    record = {"object1": "cats", "object2": "dogs", "comparison": "Dogs.", "status": "ok"}
    path.write_text(json.dumps([record | {"score_dict": FULL, "score": 19}]), encoding="utf-8")
    return path


@pytest.mark.subprocess
def test_reproduces_reference_means_and_writes_outputs(tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = run_moot(
        "report", "compqa", "--judged", *_judged_files(), "--by", "generator", "--out", out
    )
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    means = {g["generator"]: g["mean"] for g in report["groups"]}
    digits = {name: len(str(value).split(".")[1]) for name, value in REFERENCE.items()}
    assert {name: round(means[name], digits[name]) for name in REFERENCE} == REFERENCE
    assert report["std"].startswith("the paper's convention") and report["agreement"] is None
    assert "| gpt4 | 600 | 17.7650 ± 1.06 |" in result.stdout  # Table 3: 17.77 ± 1.06
    assert "perplexity_scenario_2.json, index 39: invalid: " in result.stdout  # the invalid record
    assert len(report["generator_scenario"]) == 27
    for name in ("chart.png", "heatmap.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Mean points per criterion" in (out / "report.md").read_text(encoding="utf-8")


@pytest.mark.subprocess
def test_agreement_with_real_human_tables(tmp_path: Path) -> None:
    tables = shared_data("compqa", "evaluation_tables")
    result = run_moot(
        "report", "compqa", "--judged", *_judged_files(), "--out", tmp_path,
        "--human", tables / "dataset_hum1_evaluation.tsv",
        "--human", tables / "dataset_hum2_evaluation.tsv",
        "--drop-out-of-range", "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    agreement = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))["agreement"]
    assert [t["matched"] for t in agreement["tables"]] == [129, 247]
    pairs = {(p["a"], p["b"]): p["total"] for p in agreement["pairs"]}
    assert (
        round(pairs[("dataset_hum1_evaluation", "dataset_hum2_evaluation")]["pearson"], 3) == 0.76
    )
    judge = pairs[("judge", "dataset_hum2_evaluation")]
    assert round(judge["pearson"], 3) == 0.567
    assert 0 < judge["pearson_p"] < 1e-15 and 0 < judge["spearman_p"] < 1e-10  # n = 243
    markdown = (tmp_path / "report.md").read_text()
    assert "### Per criterion: Krippendorff's α" in markdown
    assert "### Per criterion: Pearson r's p-value" in markdown
    assert f"| judge | dataset_hum2_evaluation | 243 | 0.567 (p={judge['pearson_p']:.2g}) |" in (
        markdown
    )


@pytest.mark.subprocess
def test_human_table_matching_nothing_exits_2(tmp_path: Path) -> None:
    table = tmp_path / "other.tsv"
    header = ["object1", "object2", "comparison", *(f"C{n}" for n in range(1, 16))]
    row = ["tea", "coffee", "Never judged.", *(str(FULL[str(n)]) for n in range(1, 16))]
    table.write_text("\t".join(header) + "\n" + "\t".join(row) + "\n", encoding="utf-8")
    result = run_moot(
        "report",
        "compqa",
        *("--judged", _one_judged(tmp_path), "--human", table, "--out", tmp_path / "out"),
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "other.tsv: none of its 1 annotated rows matches a judged answer" in result.stderr
    assert not (tmp_path / "report.json").exists()


@pytest.mark.subprocess
def test_malformed_judged_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "mixtral_scenario_2.json"
    path.write_text(json.dumps([{"object1": "cats", "comparison": "Dogs."}]), encoding="utf-8")
    result = run_moot("report", "compqa", "--judged", path, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr.strip() == f"moot: error: {path}, index 0: missing or empty 'object2'"


def test_other_judges_files_are_read_and_their_invalid_judgments_shown(tmp_path: Path) -> None:
    judge = released_files(
        tmp_path, "lilaspourpre/cqa-evaluation-framework", "data/evaluated_summaries/gpt-3.5"
    )
    files = sorted((judge / "fewshot").glob("*.json"))
    result = run_moot("report", "compqa", "--judged", *files, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["overall"]["invalid"] == 65 and report["overall"]["n"] == 2158
    kept = sum(f["invalid_total_kept"] for f in report["files"])
    assert kept == 15  # all fifteen criteria given, some out of range: summed, as in the paper
    assert "gpt3-5_scenario_2.json, index 95: invalid: score_dict: C1 = 2 is outside 0-1" in (
        result.stdout
    )
