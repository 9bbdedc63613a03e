from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from moot.core.errors import ConfigError, InputError
from moot.training.debatune_data import write_sft_dataset
from moot.training.sft_data import load_sft_dataset

PAIR = [{"role": "user", "content": "Q?"}, {"role": "assistant", "content": "A."}]


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def debate(i: int) -> dict[str, object]:
    return {
        "id": f"d{i}",
        "topic": f"Topic {i}",
        "stance": "Affirmative",
        "argument": f"Argument {i}",
        "conclusion": f"Conclusion {i}.",
        "status": "ok",
    }


def test_three_record_shapes_become_messages(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "mixed.jsonl",
        [
            {"messages": [{"role": "system", "content": "Be brief."}, *PAIR], "id": "m"},
            {"prompt": "P", "completion": "C"},
            {"instruction": "Do", "input": "this", "output": "Done", "id": 7},
            {"instruction": "Do", "input": "", "output": "Done", "source": "alpaca"},
        ],
    )
    rows = load_sft_dataset(path)
    assert rows.column_names == ["id", "source", "messages"]
    assert rows[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert rows[1]["messages"] == [
        {"role": "user", "content": "P"},
        {"role": "assistant", "content": "C"},
    ]
    assert rows[2]["messages"][0]["content"] == "Do\n\nthis" and rows[2]["id"] == "7"
    assert rows[3]["messages"][0]["content"] == "Do"
    assert rows["source"] == [str(path)] * 3 + ["alpaca"]
    assert rows[1]["id"] == load_sft_dataset(path)[1]["id"]  # hashed ids are stable


def test_json_list_and_debate_folder(tmp_path: Path) -> None:
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([{"prompt": "P", "completion": "C"}]), encoding="utf-8")
    assert len(load_sft_dataset(listed)) == 1
    out = tmp_path / "run"
    write_sft_dataset([debate(i) for i in range(3)], out)
    from_folder = load_sft_dataset(out)  # its dataset/ copy
    assert from_folder["id"] == ["d0", "d1", "d2"]
    (out / "dataset.jsonl").rename(tmp_path / "moved.jsonl")
    assert load_sft_dataset(out / "dataset")["id"] == from_folder["id"]
    import shutil

    shutil.rmtree(out / "dataset")
    (tmp_path / "moved.jsonl").rename(out / "dataset.jsonl")
    assert load_sft_dataset(out)["messages"] == from_folder["messages"]


def test_the_dataset_is_written_a_record_at_a_time_and_a_rerun_leaves_it_alone(tmp_path):
    """Issue 33: a run of 100,000 debates held every SFT record at its end (several copies:
    the list, the JSONL text, the columns); now the memory it takes does not grow with them."""
    import tracemalloc

    def debates(n: int):  # 2 KB conclusions: 2,000 debates are ~8 MB of SFT records
        return ({**debate(i), "conclusion": f"{i} " + "long " * 400} for i in range(n))

    out = tmp_path / "run"
    tracemalloc.start()
    try:
        assert write_sft_dataset(debates(2000), out, reuse=True) == 2000
        first = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        mark = (out / ".moot" / "dataset.json").stat().st_mtime_ns
        assert write_sft_dataset(debates(2000), out, reuse=True) == 2000
        again = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert first < 3_000_000 and again < 1_000_000, (first, again)
    assert (out / ".moot" / "dataset.json").stat().st_mtime_ns == mark  # nothing rewritten
    rows = load_sft_dataset(out / "dataset")
    assert len(rows) == 2000 and rows[1999]["messages"][1]["content"].startswith("1999 long")
    assert [json.loads(line)["id"] for line in (out / "dataset.jsonl").open()] == rows["id"]
    # the records' own fingerprint (`datasets` names a loaded dataset's transform caches by it)
    assert write_sft_dataset(debates(3), tmp_path / "other", reuse=True) == 3
    prints = [
        datasets.load_from_disk(str(p / "dataset"))._fingerprint for p in (out, tmp_path / "other")
    ]
    assert len({*prints, datasets.Dataset.from_dict({})._fingerprint}) == 3, prints


def test_dataset_dict_split_is_chosen_and_checked(tmp_path: Path) -> None:
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "messages": datasets.List(
                {"role": datasets.Value("string"), "content": datasets.Value("string")}
            ),
        }
    )
    split = {
        name: datasets.Dataset.from_dict({"id": [name], "messages": [PAIR]}, features=features)
        for name in ("train", "eval")
    }
    datasets.DatasetDict(split).save_to_disk(str(tmp_path / "mix" / "dataset"))
    assert load_sft_dataset(tmp_path / "mix")["id"] == ["train"]
    assert load_sft_dataset(tmp_path / "mix", split="eval")["id"] == ["eval"]
    with pytest.raises(InputError, match="no 'test' split \\(splits: train, eval\\)"):
        load_sft_dataset(tmp_path / "mix", split="test")


def test_a_file_is_only_a_train_split(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"prompt": "P", "completion": "C"}])
    with pytest.raises(InputError, match="no 'eval' split"):
        load_sft_dataset(path, split="eval")


BAD = {
    "columns": ([{"text": "x", "n": 1}], "line 1: no recognised columns (found 'text', 'n'"),
    "role": (
        [{"messages": [{"role": "user", "content": "u"}, {"role": "bot", "content": "a"}]}],
        "line 1: message 1: bad role 'bot'",
    ),
    "content": (
        [{"prompt": "P", "completion": "C"}, {"messages": [PAIR[0], {"role": "assistant"}]}],
        "line 2: message 1 (assistant): empty content",
    ),
    "last": ([{"messages": [PAIR[1], PAIR[0]]}], "line 1: the last turn must be the assistant's"),
    "nouser": ([{"messages": [PAIR[1]]}], "line 1: no user turn"),
    "prompt": ([{"prompt": " ", "completion": "C"}], "line 1: empty 'prompt'"),
    "type": (["just text"], "line 1: expected a record object, got text"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_records_name_file_and_record(tmp_path: Path, case: str) -> None:
    records, message = BAD[case]
    path = write_jsonl(tmp_path / f"{case}.jsonl", records)
    with pytest.raises(InputError) as info:
        load_sft_dataset(path)
    assert str(info.value).startswith(f"{path}, {message}"), str(info.value)


def test_empty_and_missing_inputs(tmp_path: Path) -> None:
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    with pytest.raises(InputError, match="empty.json: no records"):
        load_sft_dataset(tmp_path / "empty.json")
    with pytest.raises(InputError, match="file not found"):
        load_sft_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="not a dataset folder"):
        load_sft_dataset(tmp_path)
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"prompt": "P", "completion": "C"}\n{"prompt": \n', encoding="utf-8")
    with pytest.raises(InputError, match="bad.jsonl, line 2: invalid JSON"):
        load_sft_dataset(bad_json)


def test_saved_dataset_rows_are_validated(tmp_path: Path) -> None:
    datasets.Dataset.from_dict({"prompt": ["P", "Q"], "completion": ["C", ""]}).save_to_disk(
        str(tmp_path / "ds")
    )
    with pytest.raises(InputError, match="ds, row 1: empty 'completion'"):
        load_sft_dataset(tmp_path / "ds")


def test_uncached_hub_name_is_a_config_error() -> None:
    assert datasets.config.HF_HUB_OFFLINE  # tests/conftest.py: nothing downloads
    with pytest.raises(ConfigError, match="not in the Hugging Face cache \\(offline\\)"):
        load_sft_dataset("nobody-moot/not-a-dataset")
