from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.data.compqa import file_generator, load_judged
from moot.core.errors import ConfigError, InputError
from moot.training.compqa_data import distill_compqa, question
from moot.training.sft_data import load_sft_dataset
from tests.conftest import released_files, shared_data

CRITERIA = {str(c): (2 if 9 <= c <= 12 else 1) for c in range(1, 16)}  # 19 points


def answer(text: str = "A is faster; B is cheaper.", score: int = 19, **fields: object) -> dict:
    criteria, missing = dict(CRITERIA), 19 - score if isinstance(score, int) else 0
    for c in (*range(1, 9), 13, 14, 15, 9, 10, 11, 12):  # one-point criteria first
        taken = min(criteria[str(c)], max(missing, 0))
        criteria[str(c)] -= taken
        missing -= taken
    record = {"object1": "A", "object2": "B", "aspect": "speed", "comparison": text}
    return {**record, "score_dict": criteria, "score": score, **fields}


def write(path: Path, answers: list[object]) -> Path:
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def test_file_names_give_generator_and_scenario() -> None:
    assert file_generator("x/gpt4_scenario_3.json") == ("gpt4", 3)
    assert file_generator("llama3-70b_scenario_1.json") == ("llama3-70b", 1)
    assert file_generator("cam.json") == ("cam", None)


def test_question_template() -> None:
    assert question("A", "B", "speed") == "What is better: A or B? Focus on speed."
    assert question("A", "B", None) == "What is better: A or B?"


def test_threshold_records_and_string_score_dict(tmp_path: Path) -> None:
    high = answer("High.", 19)
    as_text = answer("Text dict.", 18, score_dict=json.dumps(answer(score=18)["score_dict"]))
    ones = repr({str(c): 1 for c in range(1, 16)})  # a Python dict's text, summing to 15
    python_repr = answer("Repr dict.", 15, aspect="", score_dict=ones)
    unreadable = answer("Unreadable.", 19, score_dict="eighteen points")  # an invalid judgment
    unchecked = answer("No dict.", 18, aspect=None, score_dict=None)
    low = answer("Low.", 17)
    answers = [high, as_text, python_repr, unreadable, unchecked, low]
    judged = write(tmp_path / "gpt4_scenario_2.json", answers)
    summary = distill_compqa([judged], tmp_path / "out")
    assert (summary.read, summary.kept) == (6, 3)
    assert (summary.invalid_judgments, summary.unchecked_scores) == (1, 1)
    assert summary.by_generator == {"gpt4": {"read": 6, "kept": 3}}
    assert summary.by_scenario == {"2": {"read": 6, "kept": 3}}
    records = [json.loads(x) for x in (tmp_path / "out" / "dataset.jsonl").read_text().splitlines()]
    assert [r["completion"] for r in records] == ["High.", "Text dict.", "No dict."]
    first = records[0]
    assert first["source"] == "compqa:gpt4" and (first["generator"], first["scenario"]) == (
        "gpt4",
        2,
    )
    assert first["prompt"] == "What is better: A or B? Focus on speed."
    assert first["messages"][1] == {"role": "assistant", "content": "High."}
    assert records[2]["aspect"] is None and records[2]["prompt"] == "What is better: A or B?"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"] == {
        "read": 6,
        "kept": 3,
        "below_min_score": 2,
        "duplicates": 0,
        "invalid_judgments": 1,
        "unchecked_scores": 1,
    }
    assert len(manifest["inputs"][0]["sha256"]) == 64
    assert load_sft_dataset(tmp_path / "out")["id"] == [r["id"] for r in records]


def test_ids_are_stable_and_duplicates_dropped(tmp_path: Path) -> None:
    same = answer("Same  text.")
    judged = write(tmp_path / "mixtral.json", [same, answer("Same text."), answer("Other.")])
    summary = distill_compqa([judged, judged], tmp_path / "out", min_score=0)
    assert (summary.read, summary.kept, summary.duplicates) == (6, 2, 4)
    first = (tmp_path / "out" / "dataset.jsonl").read_bytes()
    distill_compqa([judged, judged], tmp_path / "out", min_score=0)  # rerun replaces
    assert (tmp_path / "out" / "dataset.jsonl").read_bytes() == first


def test_nothing_kept_writes_nothing(tmp_path: Path) -> None:
    judged = write(tmp_path / "cam.json", [answer(score=9)])
    summary = distill_compqa([judged], tmp_path / "out")
    assert summary.kept == 0 and not (tmp_path / "out").exists()


BAD = {
    "status": (answer(status="done"), "index 1: unknown status 'done'"),
    "comparison": (answer(" "), "index 1: missing or empty 'comparison'"),
    "object": ({**answer(), "object2": None}, "index 1: missing or empty 'object2'"),
    "aspect": (answer(aspect=3), "index 1: 'aspect' must be text, got a number"),
}
# malformed judgments: invalid, counted and skipped, never a reason to reject the file
INVALID = {
    "score": (answer(score=None, score_dict=None), "no 'score' and no 'score_dict'"),
    "text": ({**answer(), "score": "nineteen"}, "'score' 'nineteen' is not a whole number"),
    "range": (answer(score=20, score_dict=None), "'score' 20 is not a whole number in 0-19"),
    "sum": ({**answer(), "score": 18}, "'score' 18 is not the sum of 'score_dict' (19)"),
    "renamed": (
        {**answer(), "score_dict": {f"C{n}": 1 for n in range(16, 31)}},
        "unknown criteria C16",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_records_name_file_and_index(tmp_path: Path, case: str) -> None:
    bad, message = BAD[case]
    judged = write(tmp_path / "gpt4_scenario_1.json", [answer(), bad])
    with pytest.raises(InputError) as info:
        distill_compqa([judged], tmp_path / "out")
    assert str(info.value) == f"{judged}, {message}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", sorted(INVALID))
def test_malformed_judgments_are_skipped_and_counted(tmp_path: Path, case: str) -> None:
    bad, problem = INVALID[case]
    judged = write(tmp_path / "gpt4_scenario_1.json", [answer(), bad])
    assert problem in load_judged(judged)[1].problem
    summary = distill_compqa([judged], tmp_path / "out")
    assert (summary.read, summary.kept, summary.invalid_judgments) == (2, 1, 1)


def test_bad_files_and_options(tmp_path: Path) -> None:
    (tmp_path / "obj.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(InputError, match="obj.json, index 0: missing or empty 'object1'"):
        distill_compqa([tmp_path / "obj.json"], tmp_path / "out")
    with pytest.raises(ConfigError, match="--min-score must be between 0 and 19"):
        distill_compqa([tmp_path / "obj.json"], tmp_path / "out", min_score=20)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine", encoding="utf-8")
    judged = write(tmp_path / "j.json", [answer()])
    with pytest.raises(ConfigError, match="is not an earlier compqa-distill output"):
        distill_compqa([judged], tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


KEPT_AT_18 = {  # measured on ../shared/data/compqa/evaluated_summaries/gpt-4
    "cam": (50, 0),
    "gpt3-5": (600, 268),  # 269 pass; one is a repeat of an earlier answer
    "gpt4": (600, 370),
    "human": (80, 39),
    "llama3-70b": (200, 81),
    "llama3-8b": (200, 87),
    "mixtral": (200, 97),
    "perplexity": (200, 113),  # index 39 of scenario 2 scores 18 with C5 = C6 = 2: invalid
    "yahoo": (28, 1),
}


def test_real_compqa_files(tmp_path: Path) -> None:
    files = sorted(shared_data("compqa", "evaluated_summaries", "gpt-4").glob("*.json"))
    assert len(files) == 27
    summary = distill_compqa(files, tmp_path / "out")
    counts = {g: (c["read"], c["kept"]) for g, c in summary.by_generator.items()}
    assert counts == KEPT_AT_18
    assert (summary.read, summary.kept, summary.duplicates) == (2158, 1056, 1)
    assert (summary.invalid_judgments, summary.unchecked_scores) == (1, 0)
    assert summary.by_scenario["3"] == {"read": 500, "kept": 403}
    assert summary.by_scenario["none"] == {"read": 158, "kept": 40}
    loaded = load_sft_dataset(tmp_path / "out")
    assert len(loaded) == 1056 and len(set(loaded["id"])) == 1056
    at_19 = distill_compqa(files, tmp_path / "out19", min_score=19)
    assert at_19.by_generator["gpt4"]["kept"] < 370


@pytest.mark.parametrize(
    ("judge", "kept", "invalid"), [("gpt-3.5", 1092, 65), ("perplexity", 1490, 0)]
)
def test_other_judges_files_and_the_papers_1244(
    tmp_path: Path, judge: str, kept: int, invalid: int
) -> None:
    """The paper keeps 1,244 pairs (Section 4); no released judge's files give that number
    (GPT-4: 1,056, test_real_compqa_files), see docs/faithfulness.md."""
    folder = released_files(
        tmp_path, "lilaspourpre/cqa-evaluation-framework", f"data/evaluated_summaries/{judge}"
    )
    summary = distill_compqa(sorted((folder / "fewshot").glob("*.json")), tmp_path / "out")
    assert (summary.read, summary.kept, summary.invalid_judgments) == (2158, kept, invalid)
    assert summary.kept != 1244
