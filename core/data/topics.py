"""Reading debate topics from files or `datasets`.

Accepted inputs, for ``moot debate --topics``:

* a JSON list of topic strings (DEBATunE ``debate_train_v1.json``);
* JSONL or a JSON list of records shaped like DEBATunE's ``debate_test_v1_arg.jsonl``:
  ``{"topic": ..., "Affirmative": {"arguments": [...]}, "Negative": {"arguments": [...]}}``
  (the argument lists are optional: without them moot generates arguments);
* CSV with a ``topic`` column;
* a local `datasets` folder, or a hub dataset name (``owner/name`` or ``owner/name:split``) with a
  ``topic`` column, loaded with ``datasets.load_dataset``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.hub_requests import bound_hub_requests
from moot.core.data.planned import is_planned
from moot.core.data.records import csv_rows, read_input_text, read_records
from moot.core.errors import InputError, json_type

STANCES = ("Affirmative", "Negative")
_COLUMNS = ("topic", *STANCES)


@dataclass(frozen=True)
class Topic:
    """One debate topic, with the given arguments per stance if the input had them."""

    topic: str
    arguments: dict[str, tuple[str, ...]] | None = None


def load_topics(source: str) -> list[Topic]:
    """Load and validate topics from `source` (see the module docstring for formats).

    Raises:
        InputError: Missing, empty, non-UTF-8 or malformed input; unknown columns; empty topics.
    """
    path = Path(source)
    if path.is_dir():
        return _from_dataset(source, _load_local_dataset(path))
    if not path.exists() and not is_planned(path):  # planned: `moot run --dry-run`'s
        if _looks_like_hub_name(source):
            return _from_dataset(source, _load_hub_dataset(source))
        raise InputError(source, "file not found")
    if path.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(read_input_text(source), newline=""))
        rows = csv_rows(source, reader)
        if "topic" not in (reader.fieldnames or []):
            columns = ", ".join(reader.fieldnames or []) or "none"
            raise InputError(source, f"missing 'topic' column (columns: {columns})")
        return _validate(source, ((f"line {i + 2}", row) for i, row in enumerate(rows)))
    return _validate(source, read_records(source))


def _validate(source: str, items: Iterable[tuple[str, Any]]) -> list[Topic]:
    topics: list[Topic] = []
    seen: set[str] = set()
    for where, item in items:
        topic = _parse_item(source, item, where)
        if topic.topic in seen:
            continue  # the same topic twice would be the same debates: keep the first
        seen.add(topic.topic)
        topics.append(topic)
    if not topics:
        raise InputError(source, "no topics found")
    return topics


def _parse_item(source: str, item: Any, where: str) -> Topic:
    if isinstance(item, str):
        item = {"topic": item}
    if not isinstance(item, dict):
        raise InputError(source, f"expected a topic string or object, got {json_type(item)}", where)
    unknown = [k for k in item if k not in _COLUMNS]
    if unknown:
        raise InputError(
            source, f"unknown column {unknown[0]!r} (expected {', '.join(_COLUMNS)})", where
        )
    if "topic" not in item:
        raise InputError(source, "missing 'topic' column", where)
    topic = item["topic"]
    if not isinstance(topic, str):
        raise InputError(source, f"'topic' must be text, got {json_type(topic)}", where)
    if not topic.strip():
        raise InputError(source, "empty topic", where)
    given = {stance: item[stance] for stance in STANCES if item.get(stance) not in (None, "")}
    if not given:
        return Topic(" ".join(topic.split()))
    arguments: dict[str, tuple[str, ...]] = {}
    for stance in STANCES:
        value = given.get(stance)
        if value is not None and not isinstance(value, dict):
            kind = json_type(value)
            problem = f"{stance!r} must be an object with an 'arguments' list, got {kind}"
            raise InputError(source, problem, where)
        values = (value or {}).get("arguments")
        if values is not None and not isinstance(values, list):
            problem = f"{stance!r}: 'arguments' must be a list, got {json_type(values)}"
            raise InputError(source, problem, where)
        if not values:
            raise InputError(source, f"{stance!r} needs a non-empty 'arguments' list", where)
        for number, argument in enumerate(values, start=1):
            if not isinstance(argument, str):
                problem = f"{stance!r} argument {number} must be text, got {json_type(argument)}"
                raise InputError(source, problem, where)
            if not argument.strip():
                raise InputError(source, f"{stance!r} argument {number} is empty", where)
        arguments[stance] = tuple(a.strip() for a in values)
    return Topic(" ".join(topic.split()), arguments)


def _from_dataset(source: str, rows: Any) -> list[Topic]:
    columns = list(getattr(rows, "column_names", []) or [])
    if "topic" not in columns:
        raise InputError(source, f"no 'topic' column (columns: {', '.join(columns) or 'none'})")
    return _validate(source, ((f"row {i}", {"topic": t}) for i, t in enumerate(rows["topic"])))


#: What `datasets` unpacks whole before reading a word of it: a few kilobytes of gzip can hold
#: gigabytes (a 1 MB file held 8 GB of memory, and a crash, before this check).
ARCHIVES = (".gz", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".lz4", ".zip", ".tar", ".tgz", ".7z")


def _load_local_dataset(path: Path) -> Any:
    import datasets

    packed = next((p for p in sorted(path.rglob("*")) if p.suffix.lower() in ARCHIVES), None)
    if packed is not None:
        raise InputError(packed, "a compressed file: moot unpacks none (its size is unknown)")
    try:
        if (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists():
            loaded = datasets.load_from_disk(str(path))
        else:
            loaded = datasets.load_dataset(str(path))
    except Exception as exc:  # datasets raises many types; all mean "cannot read this folder"
        raise InputError(path, f"cannot load as a dataset: {str(exc).splitlines()[0]}") from None
    return _first_split(loaded)


def _load_hub_dataset(source: str) -> Any:
    import datasets

    bound_hub_requests()
    name, _, split = source.partition(":")
    try:
        return datasets.load_dataset(name, split=split or "train")
    except Exception as exc:  # offline, missing, or private: one line is what the user needs
        raise InputError(source, f"cannot load dataset: {str(exc).splitlines()[0]}") from None


def _first_split(loaded: Any) -> Any:
    import datasets

    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded.keys())
        return loaded["train" if "train" in splits else splits[0]]
    return loaded


def _looks_like_hub_name(source: str) -> bool:
    """``owner/name[:split]`` that is not a path into an existing folder or a data file name."""
    name = source.partition(":")[0]
    parts = name.split("/")
    if len(parts) != 2 or not all(parts) or Path(parts[0]).is_dir():
        return False
    return Path(parts[1]).suffix.lower() not in (".json", ".jsonl", ".csv", ".txt", ".tsv")
