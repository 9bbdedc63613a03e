"""Preference datasets as ``moot train dpo`` reads them: trl's ``{prompt, chosen, rejected}``.

A record's ``prompt`` is a string or chat messages (``[{role, content}]``, ending with a user
turn); ``chosen`` and ``rejected`` are strings or the assistant's turns. When any of the three is
messages, the strings become turns (the prompt a user turn, an answer an assistant turn), so
the tokenizer's chat template frames every pair alike (and so for every record, when one
record is messages). Other fields (a judge's reasons, the
source, scores) are metadata: kept in the file, not trained on. Read without torch or
`datasets` for a file, so a bad record is refused at once, naming the file and the record.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from moot.core.errors import InputError, json_type
from moot.training.sft_data import checked_turn, dataset_rows

if TYPE_CHECKING:
    import datasets

#: The fields trl's DPOTrainer trains on, in order.
FIELDS = ("prompt", "chosen", "rejected")


def read_preference_rows(source: str | Path, *, split: str = "train") -> list[dict[str, Any]]:
    """Read and check a preference dataset's rows: ``{prompt, chosen, rejected}`` dicts.

    `source` is what `moot.training.read_sft_rows` reads: a JSON/JSONL file, a `datasets` folder
    (or a folder holding ``dataset/`` or ``dataset.jsonl``), or a cached hub dataset.

    Raises:
        InputError: A missing file or split, no records, or a record without the three fields, with
            an empty one, a bad turn, or chosen equal to rejected; the file and record named.
        ConfigError: A hub dataset that cannot be loaded.
    """
    found, records = dataset_rows(source, split)
    rows = [_pair(found, where, item) for where, item in records]
    if not rows:
        raise InputError(found, "no records")
    if any(chat for _, chat in rows):  # one record in messages: every record in messages
        return [pair for pair, _ in rows]
    return [{name: turns[0]["content"] for name, turns in pair.items()} for pair, _ in rows]


def load_preference_dataset(source: str | Path, *, split: str = "train") -> datasets.Dataset:
    """The rows of `read_preference_rows` as a `datasets.Dataset` (trl's preference format)."""
    import datasets

    datasets.disable_progress_bars()
    rows = read_preference_rows(source, split=split)
    return datasets.Dataset.from_list(rows)


def _pair(path: object, where: str, item: Any) -> tuple[dict[str, list], bool]:
    """The record's three fields as checked turns, and whether any was given as turns."""
    if not isinstance(item, dict):
        raise InputError(path, f"expected a record object, got {json_type(item)}", where)
    missing = [name for name in FIELDS if item.get(name) is None]
    if missing:
        named = ", ".join(map(repr, missing))
        problem = f"no {named} (a preference record is {{prompt, chosen, rejected}})"
        raise InputError(path, problem, where)
    chat = any(isinstance(item[name], list) for name in FIELDS)
    pair = {
        "prompt": _turns(path, where, item["prompt"], "prompt", ("system", "user", "assistant")),
        "chosen": _turns(path, where, item["chosen"], "chosen", ("assistant",)),
        "rejected": _turns(path, where, item["rejected"], "rejected", ("assistant",)),
    }
    if pair["prompt"][-1]["role"] != "user":
        raise InputError(path, "'prompt' must end with a user turn", where)
    if pair["chosen"] == pair["rejected"]:
        raise InputError(path, "'chosen' and 'rejected' are the same", where)
    return pair, chat


def _turns(path: object, where: str, value: Any, name: str, roles: tuple[str, ...]) -> list:
    """`value` (text, or turns of `roles`) as checked ``[{role, content}]`` turns."""
    if isinstance(value, str):
        value = [{"role": "user" if name == "prompt" else "assistant", "content": value}]
    if not isinstance(value, list) or not value:
        problem = f"{name!r} must be text or a non-empty list of turns, got {json_type(value)}"
        raise InputError(path, problem, where)
    return [
        checked_turn(turn, f"{name} turn {i}", roles, path, where) for i, turn in enumerate(value)
    ]
