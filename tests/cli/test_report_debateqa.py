"""`moot report debateqa`: Equation 4 over three models' P.D. and D.A. folders, filtered."""

from __future__ import annotations

import json
import math

from tests.cli.helpers import run_moot


def _runs(tmp_path, name, pds, labels):
    pd_dir, da_dir = tmp_path / f"{name}-pd", tmp_path / f"{name}-da"
    pd_dir.mkdir()
    da_dir.mkdir()
    ids = ["q1", "q2", "q3"]
    pd = [{"id": i, "status": "ok", "pd": v} for i, v in zip(ids, pds, strict=True)]
    da = [
        {"id": f"j{i}", "answer_id": i, "status": "ok", "judgment": {"ok": True, "label": v}}
        for i, v in zip(ids, labels, strict=True)
    ]
    (pd_dir / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pd))
    (da_dir / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in da))
    return pd_dir, da_dir


def test_report_combines_three_models_with_the_filter(tmp_path):
    # q3 has two partial answers: --min-povs 3 drops it, leaving P.D. 2, 4, 4 and D.A. 1, 1, 0
    runs = [
        _runs(tmp_path, "a", [2.0, 2.0, 50.0], [1, 1, 0]),
        _runs(tmp_path, "b", [4.0, 4.0, 1.0], [1, 1, 1]),
        _runs(tmp_path, "c", [3.0, 5.0, 1.0], [0, 0, 1]),
    ]
    partials = tmp_path / "test.jsonl"
    pov = {"point_of_view": "A view.", "explanation": "Why."}
    partials.write_text(
        "".join(
            json.dumps({"id": i, "question": "Q?", "partial_answers": [pov] * n}) + "\n"
            for i, n in (("q1", 3), ("q2", 4), ("q3", 2))
        )
    )
    out = tmp_path / "report"
    result = run_moot(
        "report", "debateqa", "--pd", *(r[0] for r in runs), "--da", *(r[1] for r in runs),
        "--names", "A,B,C", "--k", "0.5", "--min-povs", 3, "--partial-answers", partials,
        "--out", out,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    rows = {r["model"]: r for r in report["models"]}
    assert [rows[m]["pd"] for m in "ABC"] == [2.0, 4.0, 4.0]
    assert [rows[m]["da"] for m in "ABC"] == [1.0, 1.0, 0.0]
    # z(1/P.D.) = sqrt(2), -sqrt(2)/2, -sqrt(2)/2; z(D.A.) = sqrt(2)/2, sqrt(2)/2, -sqrt(2)
    r2 = math.sqrt(2)
    expected = {"A": (r2 + r2 / 2) / 2, "B": 0.0, "C": (-r2 / 2 - r2) / 2}
    for model, value in expected.items():
        assert math.isclose(rows[model]["mu_w"]["0.5"]["score"], value, abs_tol=1e-12)
    assert [rows[m]["mu_w"]["0.5"]["rank"] for m in "ABC"] == [1, 2, 3]
    assert "| A | 2.000 | 2 | 1.000 | 2 | 1.061 (1) |" in result.stdout

    unfiltered = run_moot(
        "report", "debateqa", "--pd", *(r[0] for r in runs), "--da", *(r[1] for r in runs),
        "--out", tmp_path / "all",
    )  # fmt: skip
    assert unfiltered.returncode == 0, unfiltered.stderr
    rows = json.loads((tmp_path / "all" / "report.json").read_text())["models"]
    assert [r["model"] for r in rows] == ["a-pd", "b-pd", "c-pd"]
    assert rows[0]["pd"] == 18.0 and list(rows[0]["mu_w"]) == ["0", "0.25", "0.5", "0.75", "1"]


def test_report_refuses_unpaired_folders_with_one_line(tmp_path):
    a, b = (
        _runs(tmp_path, "a", [2.0, 2.0, 2.0], [1, 1, 0]),
        _runs(tmp_path, "b", [1.0] * 3, [1] * 3),
    )
    result = run_moot(
        "report", "debateqa", "--pd", a[0], b[0], "--da", a[1], "--out", tmp_path / "r"
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "moot: error: 2 --pd folders but 1 --da folders"
