"""`moot view --serve`: the page's runs followed while they run, by cursors into their logs.

A run's cursor says where the page's copy of it ends: its log's inode and the offset after the
last complete line read, and a digest of the other files its items come from (the summary,
`Kind.also`). What is new since a cursor is read from the log itself, from that offset: a last
line still being written (no line feed yet) waits for the next look. A log replaced or cut
(the engine compacts it at the end of a stage; a rerun resumes it) or another file changed
sends the run whole again (``reset``). The server keeps nothing per page: each look reads the
files as they are, so a run killed, resumed or rerun is shown as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.core.data.folders import PROGRESS
from moot.core.view.payload import (
    Kind,
    inside,
    items_of,
    join_debates,
    judged_debates,
    kind_of,
    read_json_file,
    read_run,
    read_summary,
    run_folders,
    with_labels,
)

Record = dict[str, Any]


def follow(path: Path, ino: int, offset: int) -> tuple[dict[str, Record] | None, int, int]:
    """The records of `path`'s complete lines from `offset`, last per id, in first-seen order.

    Args:
        path: A JSONL log (`moot.core.data.records.ResultLog`): a line that is not a record
            with an id is skipped, as its reader does.
        ino: The inode the offset is in (0: none yet, read from the start).
        offset: Where the last read ended.

    Returns:
        The records (None: the log was replaced or cut since, read it whole again), and the
        inode and offset the next read starts from.
    """
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return ({} if ino == 0 else None), 0, 0
    with f:
        stat = os.fstat(f.fileno())
        if ino not in (0, stat.st_ino) or stat.st_size < offset:
            return None, stat.st_ino, 0
        f.seek(offset)
        records: dict[str, Record] = {}
        for line in f:
            if not line.endswith(b"\n"):  # still being written: the next look reads it
                break
            offset += len(line)
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "id" in record:
                records[str(record["id"])] = record  # a later line wins, as `ResultLog`'s
        return records, stat.st_ino, offset


def _digest(folder: Path, names: Sequence[str]) -> str:
    """What the files `names` in `folder` are now (a folder: its files): equal when unchanged."""
    found = []
    for name in names:
        path = inside(folder, name)
        paths = sorted(path.iterdir()) if path.is_dir() else [path]
        for file in paths:
            try:
                stat = file.stat()
            except FileNotFoundError:
                continue
            found.append((file.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return hashlib.blake2b(repr(found).encode(), digest_size=8).hexdigest()


class LiveRuns:
    """The runs of `moot view --serve`: the page's data, and what is new since its cursors.

    Args:
        folders: The run folders as given (a `moot run` folder: its stages).
        debates: The debates a `moot judge` folder judged (its ``--debates``).

    Raises:
        InputError: A folder `moot view` cannot show, or a bad debates file.
    """

    def __init__(self, folders: Sequence[Path], debates: Path | None = None) -> None:
        self.folders = [Path(folder) for folder in folders]
        self.debates = judged_debates(debates) if debates is not None else None
        self.payload()  # every folder read once: one it cannot show is refused now

    def shown(self) -> list[tuple[Path, str]]:
        """Each run folder the page shows (a `moot run` folder's stages), with its name."""
        return [
            (path, name or str(path))
            for folder in self.folders
            for path, name in run_folders(folder)
        ]

    def payload(self) -> Record:
        """The page's data (`moot.core.view.payload.view_payload`), each run with its cursor."""
        return {"format": 1, "runs": [self._read(path, name) for path, name in self.shown()]}

    def _read(self, folder: Path, name: str) -> Record:
        """The run whole, and its cursor: where its log was read to."""
        cursor = {"name": name, "ino": 0, "offset": 0, "also": _others(folder, kind_of(folder))}

        def records(path: Path) -> list[Record]:
            found, cursor["ino"], cursor["offset"] = follow(path, 0, 0)
            return list((found or {}).values())

        run = with_labels(folder, read_run(folder, name, records))
        self._join(run["kind"], run["items"])
        return {**run, "cursor": cursor}

    def _join(self, kind: str, items: list[Record]) -> None:
        """A judgment's debate (``--debates``) with each of `items`."""
        if self.debates is not None and kind == "judge":
            join_debates(items, self.debates)

    def update(self, cursors: list[Record]) -> Record:
        """What is new in each run since its cursor (the page's, as the last look gave it).

        Returns:
            ``{"runs": [...]}``, per run its new or changed ``items``, its ``progress`` and its
            new ``cursor``; a run read whole again is all of `read_run`'s with ``reset``.
            ``{"reload": true}`` when the runs are other than the cursors' (a `moot run`
            folder's next stage began).
        """
        runs = self.shown()
        if [name for _, name in runs] != [c.get("name") for c in cursors]:
            return {"reload": True}
        return {"runs": [self._since(p, n, c) for (p, n), c in zip(runs, cursors, strict=True)]}

    def _since(self, folder: Path, name: str, cursor: Record) -> Record:
        kind = kind_of(folder)
        found: dict[str, Record] | None = {}
        ino, offset = cursor["ino"], cursor["offset"]
        if _others(folder, kind) != cursor["also"]:
            found = None
        elif kind.log and not _whole(kind):
            found, ino, offset = follow(inside(folder, kind.log), ino, offset)
        if found is None:
            return {**self._read(folder, name), "reset": True}
        items = []
        if found:
            items = items_of(folder, kind, list(found.values()), read_summary(folder, kind))
            self._join(kind.name, items)
        progress = inside(folder, PROGRESS)
        return {
            "items": items,
            "progress": read_json_file(progress) if progress.is_file() else None,
            "cursor": {**cursor, "ino": ino, "offset": offset},
        }


def _whole(kind: Kind) -> bool:
    """A kind whose log is a folder of files written whole (CompQA's ``judged/``)."""
    return kind.name == "compqa"


def _others(folder: Path, kind: Kind) -> str:
    """The digest of the files other than the log that a run's items come from (`_digest`)."""
    return _digest(folder, (kind.summary, *kind.also, *([kind.log] if _whole(kind) else [])))


def parse_cursors(text: str) -> list[Record]:
    """The page's cursors (`LiveRuns.update`) from the JSON it sends.

    Raises:
        ValueError: Not a list of cursors.
    """
    try:
        cursors = json.loads(text)
    except ValueError:
        cursors = None
    fields = {"name": str, "ino": int, "offset": int, "also": str}
    if not isinstance(cursors, list) or not all(
        isinstance(c, dict) and all(isinstance(c.get(k), t) for k, t in fields.items())
        for c in cursors
    ):
        raise ValueError("cursor: expected a list of {name, ino, offset, also}")
    return cursors
