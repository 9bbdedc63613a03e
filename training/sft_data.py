"""One loader for SFT datasets, whatever shape they come in.

`load_sft_dataset` turns any of moot's dataset outputs, a JSON/JSONL file or a hub dataset into
rows of ``{id, source, messages}``, validated once here so the trainer and ``moot data mix`` can
trust them. Accepted record shapes, tried in this order:

* ``messages``: a list of ``{"role", "content"}`` turns (roles system, user, assistant);
* ``prompt`` and ``completion`` strings: one user turn and one assistant turn;
* ``instruction``, optional ``input``, ``output`` (Alpaca): the user turn is the instruction, then
  a blank line and the input when there is one.

The ``moot data`` builders also share their output-folder helpers from here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moot.core.data.hub_requests import bound_hub_requests
from moot.core.data.records import read_records, stable_id
from moot.core.errors import ConfigError, InputError, json_type

ROLES = ("system", "user", "assistant")
if TYPE_CHECKING:
    import datasets

_NEEDED = "'messages', 'prompt'+'completion', or 'instruction'+'output'"
_DATA_SUFFIXES = (".json", ".jsonl", ".csv", ".tsv", ".txt", ".parquet", ".arrow")


def sft_features() -> datasets.Features:
    """The `datasets.Features` of a loaded SFT dataset: ``id``, ``source``, ``messages``."""
    import datasets

    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "source": datasets.Value("string"),
            "messages": datasets.List(
                {"role": datasets.Value("string"), "content": datasets.Value("string")}
            ),
        }
    )


def load_sft_dataset(source: str | Path, *, split: str = "train") -> datasets.Dataset:
    """Load and validate an SFT dataset as a `datasets.Dataset` of ``id``, ``source``, ``messages``.

    The rows of `read_sft_rows`, which says what `source` may be and raises what it refuses
    (`InputError`, `ConfigError`).
    """
    import datasets

    datasets.disable_progress_bars()  # for good: the trainer's maps over these rows too
    records = read_sft_rows(source, split=split)
    columns = {name: [r[name] for r in records] for name in ("id", "source", "messages")}
    return datasets.Dataset.from_dict(columns, features=sft_features())


def read_sft_rows(source: str | Path, *, split: str = "train") -> list[dict[str, Any]]:
    """Read and validate an SFT dataset's rows: ``{id, source, messages}`` dicts, in order.

    `source` is, in this order: a folder holding a `datasets` DatasetDict (a ``moot data mix``
    output's ``dataset/``) or Dataset (``save_to_disk``); an output folder of ``moot debate``,
    ``moot data distill-compqa`` or ``moot data mix`` (its ``dataset/``, else its
    ``dataset.jsonl``); a JSON list or JSONL file; else a hub dataset name, loaded with
    ``datasets.load_dataset(name, split=split)`` (from the local cache only when offline).

    A file is read without importing `datasets` (seconds of imports, more under load), so the
    trainer and ``moot data mix`` refuse bad data files at once.

    A record's own ``id`` (as a string) is kept, else the id is a hash of its messages. A record's
    own non-empty ``source`` string is kept, else the source is `source` as given.

    Args:
        source: Where the data is (see above).
        split: The split of a DatasetDict or hub dataset. A file or a single Dataset is one split,
            ``train``: asking it for another split is an error, never its training rows.

    Raises:
        InputError: A missing split, an unreadable file, no recognised columns, no records, a bad
            role, an empty content, or a conversation that does not end with an assistant turn;
            the message names the file and the record.
        ConfigError: `source` is not a local path and cannot be loaded from the hub (or, offline,
            is not in the Hugging Face cache).
    """
    label = str(source)
    found, rows = dataset_rows(source, split)
    records = [_sft_row(found, item, where, label) for where, item in rows]
    if not records:
        raise InputError(found, "no records")
    return records


def dataset_rows(source: str | Path, split: str) -> tuple[Path | str, Iterator[tuple[str, Any]]]:
    """The file, folder or hub name `source` resolves to, and its split's raw records.

    Each record comes with where it is (``line 3``, ``row 2``). `source` is what
    `read_sft_rows` reads; the records are not yet checked.

    Raises:
        InputError: A missing file or split, or an unreadable one.
        ConfigError: A hub dataset that cannot be loaded.
    """
    label = str(source)
    path = _resolve(label)
    if path is None:
        return label, _hub_rows(label, split)
    if path.is_dir():
        return path, _disk_rows(path, split)
    _check_split(path, split, ["train"])
    return path, read_records(path)


def normalise_messages(messages: Any, path: object, where: str) -> list[dict[str, str]]:
    """Validated ``[{role, content}]`` turns (other keys dropped; contents kept as written).

    Raises:
        InputError: Not a list of turns, a bad role, an empty content, no user turn, or no
            assistant turn last.
    """
    if not isinstance(messages, list) or not messages:
        raise InputError(path, "'messages' must be a non-empty list of turns", where)
    turns = [
        checked_turn(turn, f"message {i}", ROLES, path, where) for i, turn in enumerate(messages)
    ]
    if not any(t["role"] == "user" for t in turns):
        raise InputError(path, "no user turn", where)
    if turns[-1]["role"] != "assistant":
        raise InputError(path, "the last turn must be the assistant's", where)
    return turns


def checked_turn(
    turn: Any, label: str, roles: Sequence[str], path: object, where: str
) -> dict[str, str]:
    """`turn` as ``{role, content}`` (other keys dropped), its role one of `roles`.

    Raises:
        InputError: A role not in `roles`, or an empty content; `label` names the turn
            (``message 2``).
    """
    role = turn.get("role") if isinstance(turn, dict) else None
    content = turn.get("content") if isinstance(turn, dict) else None
    if role not in roles:
        raise InputError(path, f"{label}: bad role {role!r} (expected {', '.join(roles)})", where)
    if not isinstance(content, str) or not content.strip():
        raise InputError(path, f"{label} ({role}): empty content", where)
    return {"role": role, "content": content}


def _sft_row(path: object, item: Any, where: str, label: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise InputError(path, f"expected a record object, got {json_type(item)}", where)
    if item.get("messages") is not None:
        messages = item["messages"]
    elif item.get("prompt") is not None and item.get("completion") is not None:
        messages = _pair(path, where, item["prompt"], item["completion"], "prompt", "completion")
    elif item.get("instruction") is not None and item.get("output") is not None:
        prompt = _text(path, where, item["instruction"], "instruction")
        extra = item.get("input")
        if extra is not None and _text(path, where, extra, "input", empty=True).strip():
            prompt = f"{prompt}\n\n{extra}"
        messages = _pair(path, where, prompt, item["output"], "instruction", "output")
    else:
        found = ", ".join(repr(k) for k in item) or "none"
        raise InputError(path, f"no recognised columns (found {found}; need {_NEEDED})", where)
    messages = normalise_messages(messages, path, where)
    own_id, own_source = item.get("id"), item.get("source")
    if isinstance(own_id, int | str) and not isinstance(own_id, bool) and str(own_id):
        record_id = str(own_id)
    else:
        record_id = stable_id("sft", messages)
    source = own_source if isinstance(own_source, str) and own_source.strip() else label
    return {"id": record_id, "source": source, "messages": messages}


def _pair(
    path: object, where: str, prompt: Any, completion: Any, p_name: str, c_name: str
) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": _text(path, where, prompt, p_name)},
        {"role": "assistant", "content": _text(path, where, completion, c_name)},
    ]


def _text(path: object, where: str, value: Any, name: str, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(path, f"{name!r} must be text, got {json_type(value)}", where)
    if not empty and not value.strip():
        raise InputError(path, f"empty {name!r}", where)
    return value


def _resolve(source: str) -> Path | None:
    """The file or `datasets` folder to read, or None for a hub name."""
    path = Path(source)
    if path.is_dir():
        if _is_saved_dataset(path):
            return path
        if _is_saved_dataset(path / "dataset"):  # moot debate, distill-compqa and mix outputs
            return path / "dataset"
        if (path / "dataset.jsonl").is_file():
            return path / "dataset.jsonl"
        raise InputError(
            path, "not a dataset folder (no dataset/, dataset.jsonl or datasets save_to_disk files)"
        )
    if path.exists():
        return path
    # a path's shape, or a folder it names that exists, says it was meant as a local path
    local = source.startswith((".", "/", "~")) or path.suffix.lower() in _DATA_SUFFIXES
    if local or (len(path.parts) > 1 and path.parent.is_dir()):
        raise InputError(path, "file not found")
    return None


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()


def _check_split(path: object, split: str, splits: list[str]) -> None:
    if split not in splits:
        raise InputError(path, f"no {split!r} split (splits: {', '.join(splits)})")


def _disk_rows(path: Path, split: str) -> Iterator[tuple[str, Any]]:
    import datasets

    datasets.disable_progress_bars()
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # datasets raises many types; all mean "cannot read this folder"
        raise InputError(path, f"cannot load as a dataset: {str(exc).splitlines()[0]}") from None
    if isinstance(loaded, datasets.DatasetDict):
        _check_split(path, split, list(loaded))
        loaded = loaded[split]
    else:
        _check_split(path, split, ["train"])
    return _rows(loaded)


def _hub_rows(name: str, split: str) -> Iterator[tuple[str, Any]]:
    import datasets

    bound_hub_requests()
    datasets.disable_progress_bars()
    try:
        loaded = datasets.load_dataset(name, split=split)
    except ValueError as exc:
        if "split" in str(exc).lower():
            raise InputError(name, f"no {split!r} split: {str(exc).splitlines()[0]}") from None
        raise ConfigError(f"{name}: cannot load dataset: {str(exc).splitlines()[0]}") from None
    except Exception as exc:  # offline, missing or private: one line is what the user needs
        if datasets.config.HF_HUB_OFFLINE:
            raise ConfigError(
                f"{name}: not a local file or folder, and not in the Hugging Face cache (offline)"
            ) from None
        raise ConfigError(
            f"{name}: not a local file or folder, and cannot load it from the Hugging Face hub: "
            f"{str(exc).splitlines()[0]}"
        ) from None
    return _rows(loaded)


def _rows(loaded: datasets.Dataset) -> Iterator[tuple[str, Any]]:
    return ((f"row {n}", row) for n, row in enumerate(loaded))


# The output folders of `moot data` builders share these conventions.


def source_digest(source: str | Path) -> str | None:
    """SHA-256 of a file, or of a folder's non-hidden files (paths and bytes); None for a name."""
    path = Path(source)
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if not path.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(path.rglob("*")):
        relative = file.relative_to(path)
        if file.is_file() and not any(part.startswith(".") for part in relative.parts):
            digest.update(f"{relative.as_posix()}\0".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
