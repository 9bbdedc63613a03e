"""`moot data preferences` on real `moot eval quality` and `controllability` runs (in process)."""

from __future__ import annotations

import json

import pytest

import moot
from moot.testing import ScriptedServer
from moot.training.dpo_data import read_preference_rows
from tests.cli.helpers import read_jsonl, refused_in_one_line
from tests.cli.test_eval import CONTROL_RULES, QUALITY_RULES, eval_options, responses_file


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_preferences_from_quality_and_controllability_runs(tmp_path):
    kinds = ["GOOD", "BIASED", "BAD", "TIEWIN"]  # win, tie (orders disagree), loss, win + tie
    sides = ["affirmative", "negative"] * 2
    ours = responses_file(
        tmp_path / "ours.json", [(s, f"OURS-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    base = responses_file(
        tmp_path / "base.json", [(s, f"BASE-FOR-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    # two models' responses to the same two instructions: each holds its stance once
    first = responses_file(
        tmp_path / "a.json", [("affirmative", "AFF-FULL"), ("negative", "NEG-HALF")]
    )
    second = responses_file(
        tmp_path / "b.json", [("affirmative", "AFF-MOST"), ("negative", "NEG-FULL")]
    )
    runs = {name: tmp_path / name for name in ("quality", "control-a", "control-b")}
    with ScriptedServer(rules=[*QUALITY_RULES, *CONTROL_RULES]) as server:
        moot.eval.quality(**eval_options(server, runs["quality"], responses=ours, baseline=base))
        for name, responses in (("control-a", first), ("control-b", second)):
            moot.eval.controllability(**eval_options(server, runs[name], responses=responses))

    out = tmp_path / "prefs"
    result = moot.data.preferences(*runs.values(), out=out, eval_fraction=0)
    pairs = read_jsonl(out / "train.jsonl")
    assert [(p["source"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("quality", assistant("OURS-GOOD"), assistant("BASE-FOR-GOOD")),
        ("quality", assistant("BASE-FOR-BAD"), assistant("OURS-BAD")),
        ("controllability", assistant("AFF-FULL"), assistant("AFF-MOST")),
        ("controllability", assistant("NEG-FULL"), assistant("NEG-HALF")),
    ]
    assert pairs[0]["prompt"] == [{"role": "user", "content": "Argue affirmative for arg 0"}]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["pairs"] == {"controllability": 2, "quality": 2}
    assert manifest["counts"]["dropped"] == {"quality: orders disagree": 2}  # BIASED, TIEWIN
    assert not (out / "eval.jsonl").exists() and (out / "README.md").is_file()
    import datasets

    table = datasets.load_from_disk(str(out / "dataset"))["train"]
    assert table["chosen"] == [p["chosen"] for p in pairs] and len(table) == 4
    assert "4 train and 0 eval pairs" in result.lines[-1]
    # what `moot train dpo` reads of the folder: the same pairs
    read = read_preference_rows(out)
    assert read == [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs]

    # the same inputs give the same files; a split is seeded
    again = tmp_path / "again"
    moot.data.preferences(*runs.values(), out=again, eval_fraction=0)
    assert (again / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()
    split = tmp_path / "split"
    moot.data.preferences(*runs.values(), out=split, eval_fraction=0.5, seed=1)
    train, held = read_jsonl(split / "train.jsonl"), read_jsonl(split / "eval.jsonl")
    assert sorted(p["id"] for p in train + held) == sorted(p["id"] for p in pairs)

    # bad input: one line, nothing written
    (tmp_path / "ours.json").rename(tmp_path / "moved.json")
    refused = {
        "summary.json: its responses file": (runs["quality"],),
        "not a folder of moot eval quality, controllability, compqa or judge, or moot judge": (
            out,
        ),
    }
    for problem, given in refused.items():
        with pytest.raises(moot.MootError) as caught:
            moot.data.preferences(*given, out=tmp_path / "bad")
        assert problem in refused_in_one_line(caught.value)
    assert not (tmp_path / "bad").exists()


def score_dict(total: int) -> dict[str, int]:
    """CompQA points summing to `total`: C9-C12 take 0-2, the others 0-1 (19 at most)."""
    points = {}
    for criterion in range(1, 16):
        points[str(criterion)] = min(total, 2 if 9 <= criterion <= 12 else 1)
        total -= points[str(criterion)]
    return points


def test_compqa_answers_to_one_question_pair_at_the_margin(tmp_path):
    # a `moot eval compqa` folder as its schema has it (docs/schemas.md): judged/<input name>
    run = tmp_path / "compqa"
    (run / ".moot").mkdir(parents=True)
    (run / ".moot" / "owner.json").write_text(json.dumps({"command": "moot eval compqa"}))
    answers = [("gen-a", "twelve", 12), ("gen-b", "nine", 9), ("gen-c", "eleven", 11)]
    judged = [
        {"object1": "tea", "object2": "coffee", "aspect": None, "comparison": text,
         "generator": generator, "score_dict": score_dict(total), "score": total, "status": "ok",
         "problem": None, "repaired": False, "replies": [], "judge": "openai/judge"}
        for generator, text, total in answers
    ]  # fmt: skip
    (run / "judged").mkdir()
    (run / "judged" / "answers.json").write_text(json.dumps(judged))
    out = tmp_path / "prefs"
    moot.data.preferences(run, out=out, eval_fraction=0, min_margin=2)
    pairs = read_jsonl(out / "train.jsonl")
    assert [(p["chosen"], p["rejected"], p["meta"]["scores"]) for p in pairs] == [
        (assistant("twelve"), assistant("nine"), [12, 9]),
        (assistant("eleven"), assistant("nine"), [11, 9]),  # a margin of exactly 2
    ]
    assert pairs[0]["prompt"][0]["content"].startswith("What is better: tea or coffee?")
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["dropped"] == {"compqa: closer than the margin": 1}  # 12 vs 11
