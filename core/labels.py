"""People's labels on a run's items, next to what the judge said (`moot view --serve`, reports).

For each kind of run folder `moot view` reads (`moot.core.view.payload.KINDS`), `label_fields`
says which verdicts a person can give on an item and `judge_values` what the judge gave. A
labeller's labels live in ``RUN/labels/<labeller>.jsonl``, one record a line, append-only:
``{"item", "field", "value", "note"?, "time", "labeller"}``; a labeller's latest line for an
(item, field) is their label, earlier lines stay (several sittings, nothing overwritten).

Fields: ``winner`` (a debate's winner), ``score:<dimension>`` (a Debatrix dimension's verdict on
PanelBench's scale: 0 the pro side won, 0.5 a tie, 1 the con side), ``support`` and ``oppose``
(DEBATunE controllability, 0-100%), ``outcome`` (DEBATunE pairwise quality: win, tie or loss
against the baseline), ``criterion:C<n>`` (CompQA's 15 rubric criteria, in points), ``label``
(D.A.: 1 the answer says the question is debated; BERDS detector: 1 the document supports the
perspective).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moot.core.data.compqa import CRITERIA
from moot.core.data.debates import LABELS, TIE_MARGINS, Debate, score_label
from moot.core.data.records import ResultLog
from moot.core.errors import InputError

Record = dict[str, Any]

#: A labeller's name, which is also their file's: ``labels/<labeller>.jsonl``.
LABELLER = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: The folder of a run's labels.
LABELS_FOLDER = "labels"
#: The longest note kept with a label.
NOTE_LIMIT = 4000
#: The keys of a label record (`item`, `field` and `value` required).
KEYS = ("item", "field", "value", "note", "time", "labeller")
_APPENDING = threading.Lock()


@dataclass(frozen=True)
class LabelField:
    """One verdict a person can give on an item.

    Attributes:
        name: Its stable name (``winner``, ``score:<dimension>``, ``criterion:C7``, ...).
        values: The values it takes (a categorical verdict, or a score's levels), or None.
        scale: A score's range (``(low, high)``, both included), or None for a category.
        ordinal: Whether the values are ordered (CompQA's points, win > tie > loss).
        title: What the page calls it.
    """

    name: str
    values: tuple[Any, ...] | None = None
    scale: tuple[float, float] | None = None
    ordinal: bool = False
    title: str = ""

    def check(self, value: Any) -> Any:
        """`value` as this field keeps it (one of `values`, or a number on the `scale`).

        Raises:
            ValueError: One line saying what the field takes.
        """
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if self.values is not None:
            text = isinstance(value, str)
            for allowed in self.values:  # 1 is 1.0, but neither is "1" nor true
                if (number or text) and value == allowed and text == isinstance(allowed, str):
                    return allowed
            shown = ", ".join(json.dumps(v) for v in self.values)
            raise ValueError(f"{self.name} takes one of {shown}, not {json.dumps(value)}")
        low, high = self.scale or (0.0, 0.0)
        if not number or math.isnan(value) or not low <= value <= high:
            raise ValueError(f"{self.name} takes a number from {low} to {high}, not {value!r}")
        return value

    def to_json(self) -> Record:
        """The field as the page reads it."""
        return {
            "name": self.name,
            "values": None if self.values is None else list(self.values),
            "scale": None if self.scale is None else list(self.scale),
            "ordinal": self.ordinal,
            "title": self.title or self.name,
        }


#: A Debatrix dimension's verdict on PanelBench's scale (its levels: pro, tie, con).
PANELBENCH = tuple(LABELS.values())


def label_fields(kind: str, record: Record, summary: Record) -> list[LabelField]:
    """The verdicts a person can give on one item of a run of `kind`.

    Args:
        kind: The run's kind (a key of `moot.core.view.payload.KINDS`).
        record: The item's record in the run's log.
        summary: The run's summary (``{}`` when it has none).

    Returns:
        The fields; none for a kind nobody judges (a debate, an answer, ...).
    """
    if kind == "judge":
        return _debate_fields(record, summary)
    if kind == "controllability":
        return [LabelField(s, scale=(0, 100), title=f"{s} %") for s in ("support", "oppose")]
    if kind == "quality":
        return [LabelField("outcome", ("win", "tie", "loss"), ordinal=True, title="vs baseline")]
    if kind == "da":
        return [LabelField("label", (0, 1), title="says the question is debated (1)")]
    if kind == "detector":
        return [LabelField("label", (0, 1), title="the document supports the perspective (1)")]
    if kind == "compqa":
        return [
            LabelField(
                f"criterion:C{c.number}",
                tuple(range(c.maximum + 1)),
                ordinal=True,
                title=f"C{c.number} {c.name}",
            )
            for c in CRITERIA
        ]
    return []


def judge_values(kind: str, record: Record, summary: Record) -> dict[str, Any]:
    """The judge's verdict on each of the item's fields; a verdict it did not give is absent.

    Args:
        kind: The run's kind.
        record: The item's record in the run's log.
        summary: The run's summary.
    """
    found: dict[str, Any] = {}
    if kind == "judge" and record.get("status") == "complete":
        final = record.get("final") or {}
        if final.get("winner") is not None:
            found["winner"] = final["winner"]
        if record.get("format") != "bp":
            debate = sides(record)
            for name, verdict in (record.get("dimensions") or {}).items():
                debaters = (verdict or {}).get("debaters") or {}
                label = score_label(debate, debaters, TIE_MARGINS.get(name, 0.0))
                if name != "general" and label is not None:
                    found[f"score:{name}"] = label
    elif kind == "controllability" and record.get("status") == "ok":
        judgment = record.get("judgment") or {}
        value = judgment.get("value") or {}
        found = {k: value[k] for k in ("support", "oppose") if judgment.get("ok") and k in value}
    elif kind == "quality" and record.get("status") == "ok":
        if record.get("outcome") is not None:
            found["outcome"] = record["outcome"]
    elif kind in ("da", "detector") and record.get("status") == "ok":
        judgment = record.get("judgment") or {}
        if judgment.get("ok") and judgment.get("label") is not None:
            found["label"] = judgment["label"]
    elif kind == "compqa" and record.get("status") == "ok":
        scores = record.get("score_dict") or {}
        found = {f"criterion:C{n}": scores[n] for n in map(str, range(1, 16)) if n in scores}
    return found


def _debate_fields(record: Record, summary: Record) -> list[LabelField]:
    """A judgment's fields: the winner, and each dimension's verdict (1v1: PanelBench's)."""
    pro, con = list(record.get("pro") or []), list(record.get("con") or [])
    bp = record.get("format") == "bp"
    winner = LabelField("winner", tuple(pro + con + ([] if bp else ["tie"])), title="winner")
    if bp:  # PanelBench judges BP debates by their winning team alone
        return [winner]
    # a judgment that did not finish names no dimension: the run's own, if it names them
    names = list(record.get("dimensions") or summary.get("dimensions") or [])
    return [winner] + [
        LabelField(
            f"score:{name}",
            PANELBENCH,
            scale=(0.0, 1.0),
            ordinal=True,
            title=f"{name} (0 pro, 0.5 tie, 1 con)",
        )
        for name in names
        if name != "general"
    ]


def sides(record: Record) -> Debate:
    """The judged debate's sides, as `score_label` reads them."""
    pro, con = tuple(record.get("pro") or ()), tuple(record.get("con") or ())
    return Debate(id=str(record.get("debate")), motion="", pro=pro, con=con, speeches=())


def run_fields(run: Record) -> dict[str, list[LabelField]]:
    """Each item's fields in a run as `moot.core.view.payload.read_run` reads it, by item id."""
    summary = run.get("summary") or {}
    return {item["id"]: label_fields(run["kind"], item["record"], summary) for item in run["items"]}


def check_label(record: Any, fields_by_item: Mapping[str, Sequence[LabelField]]) -> Record:
    """A label record checked against the run's items and their fields.

    Args:
        record: ``{"item", "field", "value", "note"?}``; ``time`` and ``labeller`` too when read
            back from a file.
        fields_by_item: Each item's fields (`run_fields`).

    Returns:
        The record as kept: its keys in `KEYS` order, the value as its field takes it.

    Raises:
        ValueError: One line naming the problem (a wrong item id, field, value or key).
    """
    if not isinstance(record, dict):
        raise ValueError("a label is a JSON object")
    unknown = sorted(set(record) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (a label has {', '.join(KEYS)})")
    missing = [key for key in KEYS[:3] if key not in record]
    if missing:
        raise ValueError(f"no {missing[0]!r}")
    item, name = record["item"], record["field"]
    if not isinstance(item, str) or item not in fields_by_item:
        raise ValueError(f"no item {json.dumps(item)} in this run")
    fields = {f.name: f for f in fields_by_item[item]}
    if name not in fields:
        offered = ", ".join(fields) or "nothing to label"
        raise ValueError(f"item {item} has no field {json.dumps(name)} ({offered})")
    checked = {"item": item, "field": name, "value": fields[name].check(record["value"])}
    note = record.get("note")
    if note is not None:
        if not isinstance(note, str) or len(note) > NOTE_LIMIT:
            raise ValueError(f"a note is text of at most {NOTE_LIMIT} characters")
        checked["note"] = note
    if "time" in record:
        checked["time"] = _time(record["time"])
    if "labeller" in record:
        checked["labeller"] = check_labeller(record["labeller"])
    return checked


def check_labeller(name: Any) -> str:
    """A labeller's name (``[A-Za-z0-9._-]{1,64}``, not dots alone: it names their file).

    Raises:
        ValueError: The name cannot be a labeller's.
    """
    if not isinstance(name, str) or not LABELLER.fullmatch(name) or not name.strip("."):
        raise ValueError(f"a labeller's name is 1-64 of A-Z a-z 0-9 . _ -, not {name!r}")
    return name


def _time(value: Any) -> str:
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise ValueError(f"time {value!r} is not an ISO 8601 time with its UTC offset")
    return value


def append_label(run_dir: Path, labeller: str, record: Record) -> Record:
    """Append one label, checked by `check_label`, to ``run_dir/labels/<labeller>.jsonl``.

    The line gets this moment's time (UTC) and the labeller, and is on disk (fsynced) when this
    returns. A line a crash tore at the end of the file is cut first: it was never kept.

    Returns:
        The line written.

    Raises:
        ValueError: A labeller's name that cannot be, or a record with a key not in `KEYS`.
        WriteError: The OS refused the write.
    """
    if set(record) - set(KEYS[:4]) or not set(KEYS[:3]) <= set(record):
        raise ValueError("append_label takes a record checked by check_label")
    path = Path(run_dir) / LABELS_FOLDER / f"{check_labeller(labeller)}.jsonl"
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    line = {**record, "time": now, "labeller": labeller}
    with _APPENDING:  # one append at a time: none may take another's line for a torn one
        _cut_torn_tail(path)
        ResultLog(path).append(line)
    return line


def _cut_torn_tail(path: Path) -> None:
    """Cut a last line with no line end that is not JSON: an append a crash tore."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    if _json(data[start:]) is None:
        with path.open("r+b") as f:
            f.truncate(start)
            os.fsync(f.fileno())


def _json(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except ValueError:
        return None


def read_labels(
    folder: Path, fields_by_item: Mapping[str, Sequence[LabelField]] | None = None
) -> list[Record]:
    """Every labeller's labels in a labels folder: each one's latest per (item, field).

    Args:
        folder: The folder of ``<labeller>.jsonl`` files (``RUN/labels``).
        fields_by_item: The run's items and their fields (`run_fields`): each label is checked
            against them. Without them, only the record's shape is checked.

    Returns:
        The labels, by labeller (file name order), then in the order of their latest lines.

    Raises:
        InputError: The folder is missing, a file is named for no labeller, or a line (not a
            torn last one) is no label of this run: naming the file, the line and the problem.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder" if folder.exists() else "no labels folder")
    found: list[Record] = []
    for path in sorted(folder.glob("*.jsonl")):
        try:
            labeller = check_labeller(path.stem)
        except ValueError as exc:
            raise InputError(path, str(exc)) from None
        if not path.is_file():  # a FIFO would make the read wait for ever
            raise InputError(path, "not a regular file")
        latest: dict[tuple[str, str], Record] = {}
        for where, record in _lines(path):
            try:
                known = _any_item(record) if fields_by_item is None else fields_by_item
                label = check_label(record, known)
                if label.get("labeller", labeller) != labeller or "time" not in label:
                    raise ValueError(f"not a label of {labeller} (its time and labeller)")
            except ValueError as exc:
                raise InputError(path, str(exc), where) from None
            latest.pop((label["item"], label["field"]), None)
            latest[label["item"], label["field"]] = {**label, "labeller": labeller}
        found += latest.values()
    return found


def _any_item(record: Any) -> dict[str, list[LabelField]]:
    """Fields that take any value of the record's: its shape alone is checked."""
    if not isinstance(record, dict) or not isinstance(record.get("item"), str):
        return {}
    value = record.get("value")
    return {record["item"]: [LabelField(str(record.get("field")), (value,))]}


def _lines(path: Path) -> list[tuple[str, Any]]:
    """A labels file's records with their line numbers; a torn last line is left out."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    found = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = _json(line)
        if record is None:
            if number == len(lines):  # no line end after it: torn by a crash while appended
                continue
            raise InputError(path, "not a JSON label record", f"line {number}")
        found.append((f"line {number}", record))
    return found
