"""Files a dry run takes as written: what earlier stages of `moot run --dry-run` would write.

`moot run --dry-run` plans a stage that reads an earlier stage's output before that output
exists: the earlier stage's plan says what its run would write (`moot.core.plan.Plan.outputs`,
records with stand-ins for replies not yet made), and while the later stage is planned those
records are what `moot.core.data.records.read_input_text` reads at that path, so every reader
and every planner works unchanged. A folder a stage would make (`moot train sft`'s) has no
known contents: a path in it only counts as existing (`moot generate --model {sft}/adapter`).
Nothing is written; outside `planned_files` nothing is planned.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PlannedFiles:
    """What earlier stages would write.

    Attributes:
        files: The records of each file, by absolute path.
        folders: Folders (or files) that would exist, contents unknown, by absolute path.
    """

    files: dict[str, list[Any]] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)

    def add_file(self, path: Path, records: list[Any]) -> None:
        """File `path` would hold `records`."""
        self.files[_key(path)] = records

    def add_folder(self, path: Path) -> None:
        """`path` would exist (a folder, or a file whose records are unknown)."""
        self.folders.add(_key(path))

    def records(self, path: str | Path) -> list[Any] | None:
        """The records file `path` would hold, or None if it is not planned."""
        return self.files.get(_key(path))


_PLANNED: ContextVar[PlannedFiles | None] = ContextVar("moot_planned_files", default=None)


@contextlib.contextmanager
def planned_files() -> Iterator[PlannedFiles]:
    """Within this block, what is added to the `PlannedFiles` it gives counts as written."""
    token = _PLANNED.set(PlannedFiles())
    try:
        yield _PLANNED.get()  # type: ignore[misc]
    finally:
        _PLANNED.reset(token)


def planned_text(path: str | Path) -> str | None:
    """The text a planned file would hold (its records as a JSON list), or None."""
    planned = _PLANNED.get()
    records = planned.records(path) if planned else None
    return None if records is None else json.dumps(records, ensure_ascii=False)


def is_planned(path: str | Path) -> bool:
    """Whether an earlier stage would write `path`, or a folder that holds it."""
    planned = _PLANNED.get()
    if planned is None:
        return False
    key = _key(path)
    if key in planned.files or key in planned.folders:
        return True
    return any(key.startswith(folder + os.sep) for folder in planned.folders)


def _key(path: str | Path) -> str:
    return os.path.abspath(os.fspath(path))  # by name: nothing of it need exist
