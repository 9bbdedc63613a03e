"""`moot eval pd` end to end on DebateQA demo answers with a tiny random-init GPT-2.

In process (`moot.eval.pd(...)`).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

import moot
from moot.core.data.questions import load_answers, load_partial_answers
from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer
from tests.cli.helpers import read_jsonl, refused_in_one_line, stderr, stdout
from tests.conftest import shared_data
from tests.tiny_gpt2 import tiny_gpt2

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast

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
    options = {"answers": answers, "partial_answers": partials, "scorer": gpt2}
    options |= {"max_length": 64, "out": out}
    with pytest.raises(moot.RunFailed) as first:
        moot.eval.pd(**options)
    # one answer could not be scored
    assert type(first.value) is moot.RunFailed and first.value.result.exit_code == 1
    assert "1 answers could not be scored" in stderr(first.value.result)
    said = stderr(first.value.result)
    assert "1 partial-answer sets have no answer (first: id no-answer)" in said

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

    with pytest.raises(moot.RunFailed) as again:
        moot.eval.pd(**options)
    assert type(again.value) is moot.RunFailed and again.value.result.exit_code == 1
    assert "answers        4            4         0       0" in stdout(again.value.result)
    assert read_jsonl(out / "scores.jsonl") == records

    with pytest.raises(moot.MootError) as other:
        moot.eval.pd(**options, variant="released")
    assert "another scorer or settings" in str(other.value)


def test_eval_pd_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"id": "a", "answer": "Yes."}\n{"id": "b", "answer": "No."}\n')
    partials = tmp_path / "partials.jsonl"
    partials.write_text(json.dumps({"id": "a", "question": "Q?", "partial_answers": POVS}) + "\n")
    with pytest.raises(moot.MootError) as run:
        moot.eval.pd(answers=answers, partial_answers=partials)
    assert refused_in_one_line(run.value) == (
        f"{answers}, id b: 1 of 2 answers have no partial answers in {partials}"
    )

    partials.write_text('{"id": "a", "question": "Q?", "partial_answers": [{"POV": " "}]}\n')
    with pytest.raises(moot.MootError) as run:
        moot.eval.pd(answers=answers, partial_answers=partials)
    assert refused_in_one_line(run.value) == (
        f"{partials}, line 1, partial answer 0: partial answer without a point_of_view (or POV)"
    )

    partials.write_text(json.dumps({"id": "a", "question": "Q?", "partial_answers": POVS}) + "\n")
    answers.write_text('{"id": "a", "answer": "Yes."}\n')
    with pytest.raises(moot.MootError) as run:
        moot.eval.pd(answers=answers, partial_answers=partials, scorer="gpt2")
    assert "neither a model folder nor in the local Hugging Face cache" in str(run.value)

    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    with pytest.raises(moot.MootError) as run:
        moot.eval.pd(answers=answers, partial_answers=partials, scorer=empty, out=out)
    assert "cannot load P.D. scorer" in refused_in_one_line(run.value)
    assert not out.exists()  # no claim left behind


def test_eval_pd_device_dtype_and_backend(gpt2: Path, tmp_path: Path) -> None:
    import importlib.util

    import torch

    answers, partials = _inputs(tmp_path)
    options = {"answers": answers, "partial_answers": partials, "scorer": gpt2}
    options |= {"max_length": 64, "limit": 1}
    refused = []
    if importlib.util.find_spec("vllm") is None:
        refused.append(({"backend": "vllm"}, "--backend vllm needs the vllm package"))
    if not torch.cuda.is_available():
        refused.append(({"device": "cuda"}, "--device cuda: this machine has 0 CUDA device"))
    for extra, message in refused:  # one line, before any claim or score is written
        out = tmp_path / next(iter(extra.values()))
        with pytest.raises(moot.MootError) as refusal:
            moot.eval.pd(**options, **extra, out=out)
        assert message in refused_in_one_line(refusal.value)
        assert not (out / ".moot").exists()
    # bfloat16 scores differently from float32, so one folder holds one of them
    out = tmp_path / "bf16"
    moot.eval.pd(**options, dtype="bfloat16", device="cpu", out=out)
    claim = json.loads((out / ".moot" / "pd.json").read_text(encoding="utf-8"))
    assert claim["dtype"] == "bfloat16" and "backend" not in claim
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["dtype"], summary["backend"]) == ("bfloat16", "transformers")
    with pytest.raises(moot.MootError) as again:
        moot.eval.pd(**options, out=out)
    assert "P.D. scores from another scorer or settings" in str(again.value)
