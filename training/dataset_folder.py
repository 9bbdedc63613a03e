"""`datasets` folders as ``save_to_disk`` lays them out, written a batch of rows at a time.

One shard per table, even for no rows: `datasets` 5.2 cannot load a folder ``save_to_disk``
wrote for an empty table (it writes no shard, and ``load_from_disk`` fails on the missing
table), so an empty split is written as a shard holding only the schema, which loads as 0 rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SHARD = "data-00000-of-00001.arrow"
#: Rows per batch of a table's Arrow file: what writing it holds at once.
BATCH = 100


def save_table(rows: Iterable[dict[str, Any]], folder: Path, features: Any) -> int:
    """Write `rows` (their `features` columns) to `folder` as one ``save_to_disk`` table.

    Returns:
        The number of rows written.
    """
    import datasets
    from datasets.arrow_writer import ArrowWriter

    datasets.disable_progress_bars()
    empty = datasets.Dataset.from_dict({name: [] for name in features}, features=features)
    empty.save_to_disk(str(folder))  # its state.json and dataset_info.json, and no shard
    digest, count = hashlib.sha256(), 0
    with ArrowWriter(features=features, path=str(folder / SHARD), writer_batch_size=BATCH) as w:
        for row in rows:
            columns = {name: row[name] for name in features}
            digest.update(json.dumps(columns, ensure_ascii=False).encode() + b"\n")
            w.write(columns)
            count += 1
        w.finalize()
    state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
    # the rows' own fingerprint, not the empty table's (the same for every table): `datasets`
    # names the cache files of a loaded dataset's transforms by it
    state["_data_files"], state["_fingerprint"] = [{"filename": SHARD}], digest.hexdigest()[:16]
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    return count


def save_splits(splits: dict[str, Iterable[dict[str, Any]]], folder: Path, features: Any) -> None:
    """Write each split as a table of a ``DatasetDict`` folder (``load_from_disk`` reads it)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        (folder / name).mkdir()
        save_table(rows, folder / name, features)
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}))
