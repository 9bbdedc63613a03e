"""`moot eval pd` end to end on DebateQA demo answers with a tiny random-init GPT-2."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from moot.core.data.questions import load_answers, load_partial_answers
from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer
from tests.cli.helpers import read_jsonl, run_moot
from tests.conftest import shared_data
from tests.tiny_gpt2 import tiny_gpt2

pytestmark = pytest.mark.subprocess

POVS = [
    {"POV": "Yes, it is possible.", "Explanation": "Some traditions see the self as divine."},
    {"POV": "No.", "Explanation": "Most religions call self-worship idolatry."},
    {"POV": "It depends on the definition of worship.", "Explanation": ""},  # explicitly none
]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), n_positions=128, initializer_range=0.1)


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    lines = shared_data("debateqa", "demo_answers.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[:4]]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    sets = [{"id": r["id"], "question": "Q?", "partial_answers": POVS} for r in records[:3]]
    too_long = [{"POV": "Long.", "Explanation": "word " * 80}]  # over the 64-token window
    sets.append({"id": records[3]["id"], "question": "Q?", "partial_answers": too_long})
    sets.append({"id": "no-answer", "question": "Q?", "partial_answers": POVS})
    partials = tmp_path / "partials.jsonl"
    partials.write_text("".join(json.dumps(s) + "\n" for s in sets), encoding="utf-8")
    return answers, partials


def test_eval_pd_end_to_end_and_resume(gpt2: Path, tmp_path: Path) -> None:
    answers, partials = _inputs(tmp_path)
    out = tmp_path / "pd"
    args = ["eval", "pd", "--answers", answers, "--partial-answers", partials]
    args += ["--scorer", gpt2, "--max-length", 64, "--out", out]
    first = run_moot(*args)
    assert first.returncode == 1, first.stderr  # one answer could not be scored
    assert "1 answers could not be scored" in first.stderr
    assert "1 partial-answer sets have no answer (first: id no-answer)" in first.stderr

    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    records = read_jsonl(out / "scores.jsonl")
    assert [r["status"] for r in records] == ["ok", "ok", "ok", "error"]
    assert "does not fit the scorer's window of 64 tokens" in records[3]["error"]
    scorer = PerspectiveDiversityScorer(str(gpt2), max_length=64)
    by_id = {p.id: p for p in load_partial_answers(partials)}
    library = [scorer.score(a.text, by_id[a.id].partial_answers) for a in load_answers(answers)[:3]]
    assert [r["pd"] for r in records[:3]] == pytest.approx([r.pd for r in library], rel=1e-6)
    assert summary["mean"] == pytest.approx(statistics.fmean(r.pd for r in library), rel=1e-6)
    assert summary["median"] == pytest.approx(statistics.median(r.pd for r in library), rel=1e-6)
    assert (summary["count"], summary["errors"], summary["window"]) == (3, 1, 64)
    assert summary["truncated"] == 3  # the demo answers are far longer than 64 tokens
    assert summary["variant"] == "mean" and summary["versions"]["transformers"]
    assert "| 3 |" in (out / "summary.md").read_text(encoding="utf-8")

    again = run_moot(*args)
    assert again.returncode == 1
    assert "answers        4            4         0       0" in again.stdout
    assert read_jsonl(out / "scores.jsonl") == records

    other = run_moot(*args, "--variant", "released")
    assert other.returncode == 2 and "another scorer or settings" in other.stderr


def test_eval_pd_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "a", "answer": "Yes."}\n{"id": "b", "answer": "No."}\n')
    partials = tmp_path / "partials.jsonl"
    partials.write_text(json.dumps({"id": "a", "question": "Q?", "partial_answers": POVS}) + "\n")
    run = run_moot("eval", "pd", "--answers", answers, "--partial-answers", partials)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"moot: error: {answers}, id b: 1 of 2 answers have no partial answers in {partials}"
    ]

    partials.write_text('{"id": "a", "question": "Q?", "partial_answers": [{"POV": " "}]}\n')
    run = run_moot("eval", "pd", "--answers", answers, "--partial-answers", partials)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"moot: error: {partials}, line 1, partial answer 0: partial answer without a "
        "point_of_view (or POV)"
    ]

    partials.write_text(json.dumps({"id": "a", "question": "Q?", "partial_answers": POVS}) + "\n")
    answers.write_text('{"id": "a", "answer": "Yes."}\n')
    run = run_moot(
        "eval", "pd", "--answers", answers, "--partial-answers", partials, "--scorer", "gpt2"
    )
    assert run.returncode == 2
    assert "neither a model folder nor in the local Hugging Face cache" in run.stderr

    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    args = ["--answers", answers, "--partial-answers", partials, "--scorer", empty, "--out", out]
    run = run_moot("eval", "pd", *args)
    assert run.returncode == 2 and "cannot load P.D. scorer" in run.stderr
    assert len(run.stderr.splitlines()) == 1 and not out.exists()  # no claim left behind


def test_eval_pd_device_dtype_and_backend(gpt2: Path, tmp_path: Path) -> None:
    import importlib.util

    import torch

    answers, partials = _inputs(tmp_path)
    args = ["eval", "pd", "--answers", answers, "--partial-answers", partials, "--scorer", gpt2]
    args += ["--max-length", 64, "--limit", 1]
    refused = []
    if importlib.util.find_spec("vllm") is None:
        refused.append((["--backend", "vllm"], "--backend vllm needs the vllm package"))
    if not torch.cuda.is_available():
        refused.append((["--device", "cuda"], "--device cuda: this machine has 0 CUDA device"))
    for extra, message in refused:  # one line, before any claim or score is written
        out = tmp_path / extra[1]
        result = run_moot(*args, *extra, "--out", out)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and not (out / ".moot").exists()
    # bfloat16 scores differently from float32, so one folder holds one of them
    out = tmp_path / "bf16"
    half = run_moot(*args, "--dtype", "bfloat16", "--device", "cpu", "--out", out)
    assert half.returncode == 0, half.stderr
    claim = json.loads((out / ".moot" / "pd.json").read_text(encoding="utf-8"))
    assert claim["dtype"] == "bfloat16" and "backend" not in claim
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["dtype"], summary["backend"]) == ("bfloat16", "transformers")
    again = run_moot(*args, "--out", out)
    assert again.returncode == 2 and "P.D. scores from another scorer or settings" in again.stderr
