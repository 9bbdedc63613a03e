"""`datasets` folders moot writes: `load_from_disk` reads every table, an empty one included."""

from __future__ import annotations

import datasets

from moot.training.dataset_folder import save_splits

FEATURES = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int32")})


def test_splits_load_back_as_written_and_an_empty_split_as_zero_rows(tmp_path):
    rows = [{"id": f"r{i}", "n": i, "extra": "not a column"} for i in range(250)]  # 3 batches
    save_splits({"train": rows, "eval": []}, tmp_path / "dataset", FEATURES)
    loaded = datasets.load_from_disk(str(tmp_path / "dataset"))
    assert list(loaded) == ["train", "eval"]
    assert loaded["train"].features == FEATURES
    assert loaded["train"].to_list() == [{"id": r["id"], "n": r["n"]} for r in rows]
    assert loaded["eval"].num_rows == 0 and loaded["eval"].features == FEATURES
    # the rows' own fingerprint, so two tables' transforms never share a cache file
    assert loaded["train"]._fingerprint != loaded["eval"]._fingerprint
