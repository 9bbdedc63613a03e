from __future__ import annotations

import json
from pathlib import Path

import pytest

from moot.core.errors import ConfigError, InputError
from moot.training.debatune_data import write_sft_dataset
from moot.training.mixing import is_eval, mix_datasets
from moot.training.sft_data import load_sft_dataset


def pairs(path: Path, texts: list[str], **extra: object) -> Path:
    lines = [json.dumps({"prompt": f"Q {t}", "completion": f"A {t}", **extra}) for t in texts]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_mix_writes_splits_manifest_and_card(tmp_path: Path) -> None:
    debates = [
        {"id": f"d{i}", "topic": "T", "stance": "Negative", "argument": f"Arg {i}"}
        | {"conclusion": f"Conclusion {i}.", "status": "ok"}
        for i in range(40)
    ]
    write_sft_dataset(debates, tmp_path / "run")
    extra = pairs(tmp_path / "extra.jsonl", [str(i) for i in range(60)])
    out = tmp_path / "mix"
    summary = mix_datasets([tmp_path / "run", extra], out, eval_fraction=0.25, seed=3)
    assert summary.train + summary.eval == 100 and 10 < summary.eval < 40
    train, evaluation = read(out / "train.jsonl"), read(out / "eval.jsonl")
    assert {r["id"] for r in train}.isdisjoint(r["id"] for r in evaluation)
    assert all(is_eval(r["id"], 3, 0.25) for r in evaluation)
    assert load_sft_dataset(out)["id"] == [r["id"] for r in train]
    assert load_sft_dataset(out, split="eval")["id"] == [r["id"] for r in evaluation]
    assert {r["source"] for r in train} == {str(tmp_path / "run"), str(extra)}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "mix" and manifest["seed"] == 3
    first, second = manifest["inputs"]
    assert (first["rows"], second["rows"]) == (40, 60)
    assert first["train"] + first["eval"] == 40 and len(second["sha256"]) == 64
    card = (out / "README.md").read_text()
    assert "moot train sft" in card and f"train: {out}" in card
    header = "| source | weight | rows | duplicates | train | eval |"
    marks = "| --- | ---: | ---: | ---: | ---: | ---: |"
    assert f"{header}\n{marks}\n| {tmp_path / 'run'} | 1 | 40 | 0 |" in card


def test_split_is_stable_when_data_is_added(tmp_path: Path) -> None:
    small = pairs(tmp_path / "small.jsonl", [str(i) for i in range(50)])
    more = pairs(tmp_path / "more.jsonl", [str(i) for i in range(50, 150)])
    mix_datasets([small], tmp_path / "a", eval_fraction=0.2)
    mix_datasets([small, more], tmp_path / "b", eval_fraction=0.2)
    small_ids = {r["id"] for r in load_sft_dataset(small)}
    before = {r["id"] for r in read(tmp_path / "a" / "eval.jsonl")}
    after = {r["id"] for r in read(tmp_path / "b" / "eval.jsonl")}
    assert before and before == after & small_ids  # no earlier row moved between splits
    assert after - small_ids  # and the new data has eval rows of its own


def test_rerun_is_byte_identical(tmp_path: Path) -> None:
    source = pairs(tmp_path / "s.jsonl", [str(i) for i in range(30)])
    mix_datasets([source], tmp_path / "out", weights=[1.5], seed=7)
    first = files(tmp_path / "out")
    mix_datasets([source], tmp_path / "out", weights=[1.5], seed=7)
    assert files(tmp_path / "out") == first
    assert {"dataset/dataset_dict.json", "train.jsonl", "eval.jsonl", "README.md"} <= set(first)


def test_duplicates_are_dropped_per_source(tmp_path: Path) -> None:
    one = pairs(tmp_path / "one.jsonl", ["a", "b", "b"])
    two = tmp_path / "two.jsonl"
    rows = [
        {"prompt": "Q  a", "completion": "A a "},  # the same after collapsing whitespace
        {"prompt": "q a", "completion": "A a"},  # case kept: not the same
    ]
    two.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = mix_datasets([one, two], tmp_path / "out", eval_fraction=0)
    assert [(s["rows"], s["duplicates"]) for s in summary.sources] == [(3, 1), (2, 1)]
    assert (summary.train, summary.eval, summary.duplicates) == (3, 0, 2)
    assert not (tmp_path / "out" / "eval.jsonl").exists()
    with pytest.raises(InputError, match="no 'eval' split"):
        load_sft_dataset(tmp_path / "out", split="eval")


def test_weights_repeat_and_sample(tmp_path: Path) -> None:
    a = pairs(tmp_path / "a.jsonl", [f"a{i}" for i in range(40)])
    b = pairs(tmp_path / "b.jsonl", [f"b{i}" for i in range(40)])
    summary = mix_datasets([a, b], tmp_path / "out", weights=[2, 0.5], eval_fraction=0)
    assert [s["train"] for s in summary.sources] == [80, 20]
    rows = read(tmp_path / "out" / "train.jsonl")
    assert len({r["id"] for r in rows[:80]}) == 40
    again = mix_datasets([a, b], tmp_path / "again", weights=[2, 0.5], eval_fraction=0)
    assert read(tmp_path / "again" / "train.jsonl") == rows and again.train == 100
    other_seed = mix_datasets([b], tmp_path / "seed", weights=[0.5], eval_fraction=0, seed=1)
    assert other_seed.train == 20
    assert read(tmp_path / "seed" / "train.jsonl") != rows[80:]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"weights": [1, 2]}, "--weights: got 2 for 1 input"),
        ({"weights": [0]}, "--weights must be numbers above 0"),
        ({"eval_fraction": 1.0}, "--eval-fraction must be in \\[0, 1\\)"),
        ({"eval_fraction": 0.999}, "the train split would be empty"),
    ],
)
def test_bad_options(tmp_path: Path, options: dict, message: str) -> None:
    source = pairs(tmp_path / "s.jsonl", ["x"])
    with pytest.raises(ConfigError, match=message):
        mix_datasets([source], tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()


def test_a_bad_input_leaves_the_earlier_output_whole(tmp_path: Path) -> None:
    good = pairs(tmp_path / "good.jsonl", ["x", "y"])
    mix_datasets([good], tmp_path / "out")
    before = files(tmp_path / "out")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "P", "completion": "C"}\n{"prompt": "P"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="bad.jsonl, line 2: no recognised columns"):
        mix_datasets([good, bad], tmp_path / "out")
    assert files(tmp_path / "out") == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_out_must_not_be_an_input_or_foreign(tmp_path: Path) -> None:
    good = pairs(tmp_path / "good.jsonl", ["x"])
    with pytest.raises(ConfigError, match="must not be, hold or sit inside an input"):
        mix_datasets([good], tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="not an earlier mix output"):
        mix_datasets([good], tmp_path / "notes")
