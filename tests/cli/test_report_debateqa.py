"""`moot report debateqa`: Equation 4 over three models' P.D. and D.A. folders, filtered."""

from __future__ import annotations

import json
import math

import pytest

from moot.core.data.folders import RunFolder
from tests.cli.helpers import run_moot

pytestmark = pytest.mark.subprocess

# the claims `moot eval pd` and `moot eval da` write (pd_claim; evaluate_dispute_awareness)
PD_CLAIM = {"evaluation": "perspective_diversity", "scorer": "hub/gpt2", "variant": "mean"}
PD_CLAIM["max_length"] = None
DA_CLAIM = {"evaluation": "da", "judge": "openai/judge", "temperature": 0.0, "seed": 0}
DA_CLAIM["prompts"] = "0123abcd"


def _runs(tmp_path, name, pds, labels, pd_claim=PD_CLAIM, da_claim=DA_CLAIM):
    pd_dir, da_dir = tmp_path / f"{name}-pd", tmp_path / f"{name}-da"
    RunFolder(pd_dir).claim("pd", pd_claim, "P.D. scores")
    RunFolder(da_dir).claim("eval", da_claim, "judgments")
    ids = [f"q{n}" for n in range(1, len(pds) + 1)]
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
    assert report["pd_settings"] == PD_CLAIM and report["da_settings"] == DA_CLAIM
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


def _report(tmp_path, runs):
    return run_moot(
        "report", "debateqa", "--pd", *(r[0] for r in runs), "--da", *(r[1] for r in runs),
        "--out", tmp_path / "report",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("log", "record", "problem"),
    [
        ("pd", {"id": "q2", "status": "ok", "pd": "x"}, "'pd' must be a finite number >= 1 ("),
        ("pd", {"id": "q2", "status": "ok"}, "'pd' must be a finite number >= 1 (a perplexity), "),
        ("pd", {"id": "q2", "status": "ok", "pd": 0.5}, "'pd' must be a finite number >= 1 ("),
        ("pd", {"status": "ok", "pd": 2.0}, "no 'id' (a string or an integer)"),
        (
            "da",
            {"id": "j2", "answer_id": "q2", "status": "ok"},
            "an ok record needs a 'judgment' object with an 'ok' true/false",
        ),
        (
            "da",
            {"answer_id": "q2", "status": "ok", "judgment": {"ok": True, "label": 1}},
            "no 'id' (a string or an integer)",
        ),
        (
            "da",
            {"id": "j2", "status": "ok", "judgment": {"ok": True, "label": 1}},
            "no 'answer_id' (a string or an integer)",
        ),
        (
            "da",
            {"id": "j2", "answer_id": "q2", "status": "ok", "judgment": {"ok": True, "label": 2}},
            "a read judgment's 'label' must be 0 or 1, got 2",
        ),
    ],
)
def test_a_malformed_record_is_one_line_naming_file_and_line(tmp_path, log, record, problem):
    runs = [_runs(tmp_path, "a", [2.0], [1]), _runs(tmp_path, "b", [3.0], [0])]
    path = runs[1][0] / "scores.jsonl" if log == "pd" else runs[1][1] / "judgments.jsonl"
    path.write_text(path.read_text() + json.dumps(record) + "\n")
    result = _report(tmp_path, runs)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"moot: error: {path}, line 2: {problem}")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("which", "key", "value"),
    [
        ("pd", "scorer", "hub/Qwen/Qwen2-0.5B"),
        ("pd", "variant", "sum"),
        ("pd", "max_length", 512),
        ("da", "judge", "openai/other"),
        ("da", "prompts", "ffff0000"),
        ("da", "seed", 1),
    ],
)
def test_folders_made_with_other_settings_are_refused(tmp_path, which, key, value):
    claims = {"pd_claim": PD_CLAIM, "da_claim": DA_CLAIM}
    claims[f"{which}_claim"] = {**claims[f"{which}_claim"], key: value}
    runs = [_runs(tmp_path, "a", [2.0], [1]), _runs(tmp_path, "b", [3.0], [0], **claims)]
    result = _report(tmp_path, runs)
    assert result.returncode == 2
    first, second = runs[0][0 if which == "pd" else 1], runs[1][0 if which == "pd" else 1]
    expected = DA_CLAIM[key] if which == "da" else PD_CLAIM[key]
    assert result.stderr.strip() == (
        f"moot: error: {first} and {second} differ in {key} ({expected!r} vs {value!r}): "
        "their scores are not comparable"
    )


def test_a_folder_without_its_claim_or_of_another_evaluation_is_refused(tmp_path):
    runs = [_runs(tmp_path, "a", [2.0], [1]), _runs(tmp_path, "b", [3.0], [0])]
    (runs[1][0] / ".moot" / "pd.json").unlink()
    result = _report(tmp_path, runs)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"moot: error: {runs[1][0]}: no readable pd.json claim: not a moot eval pd folder"
    )
    other = {**DA_CLAIM, "evaluation": "berds"}
    runs = [_runs(tmp_path, n, [2.0], [1], da_claim=other) for n in ("c", "d")]
    result = _report(tmp_path, runs)
    assert result.returncode == 2
    assert result.stderr.strip() == f"moot: error: {runs[0][1]} holds a berds run, not moot eval da"
