"""CompQA human annotation tables, their matching to judged answers, and agreement.

Human annotation tables (TSV, or CSV by suffix) come in CompQA's three layouts: ``score_dict.N``
columns, ``C1``-``C15`` columns (half points where annotators were averaged), or cells holding
``{rater: points}`` dicts (several raters per row). Each row is matched to a judged answer by
`moot.core.data.compqa.Comparison.key`; see `match_table`. Agreement between the judge and every
rater, and between raters, is Pearson, Spearman and Krippendorff's alpha (interval) on totals,
per criterion, and on all criteria pooled (the paper's "separately").
"""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from moot.core.data.compqa import MAXIMA, Judged, file_generator, text_key
from moot.core.data.records import read_input_text
from moot.core.errors import ConfigError, InputError
from moot.core.metrics.agreement import krippendorff_alpha, pearson, spearman

JUDGE = "judge"
SHOWN = 5  # problem records and unmatched rows named per file
AGREEMENT_NOTE = (
    "A human total is the sum of the row's 15 criteria (a row missing a criterion has none); "
    "the tables' own score/sum columns are not used. Rows match judged answers by both objects "
    "and the answer text reduced to letters and digits; failing that, by its ASCII letters and "
    "digits only ('loose': the tables hold mojibake such as ‚Äô for ’); the row's filename "
    "breaks ties. Krippendorff's alpha uses the interval metric; 'undefined' means a constant "
    "column or too few pairs."
)
_CRITERION_COLUMNS = {
    "score_dict": [f"score_dict.{n}" for n in MAXIMA],
    "C": [f"C{n}" for n in MAXIMA],
}


@dataclass(frozen=True)
class HumanRow:
    """One annotated row of a human table.

    Attributes:
        line: The line the row starts on.
        object1: The first object.
        object2: The second object.
        text: The annotated answer.
        source: (generator, scenario) named by the row's ``filename``, or None.
        ratings: Per rater, the criteria given (a criterion left blank is absent).
        recorded: Per rater, the total the table records (``score``/``sum``), if a number.
    """

    line: int
    object1: str
    object2: str
    text: str
    source: tuple[str, int | None] | None
    ratings: dict[str, dict[int, float]]
    recorded: dict[str, float | None] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        """The same identity as `moot.core.data.compqa.Comparison.key`."""
        return (self.object1.strip().lower(), self.object2.strip().lower(), text_key(self.text))

    def total(self, rater: str) -> float | None:
        """The rater's sum of all 15 criteria, or None when one is missing."""
        points = self.ratings.get(rater, {})
        return float(sum(points.values())) if len(points) == len(MAXIMA) else None


@dataclass(frozen=True)
class HumanTable:
    """A human annotation table as read.

    Attributes:
        path: The file.
        layout: ``score_dict``, ``C`` or ``multi`` (cells of ``{rater: points}``).
        raters: Rater names: the file's stem, or ``<stem>:<rater>`` for multi-rater cells.
        rows: The annotated rows.
        blank: Rows without any annotation (skipped).
        dropped: Out-of-range cells dropped (with ``drop_out_of_range``), as ``line N: ...``.
    """

    path: Path
    layout: str
    raters: tuple[str, ...]
    rows: tuple[HumanRow, ...]
    blank: int
    dropped: tuple[str, ...] = ()


def read_human_table(
    path: Path, drop_out_of_range: bool = False, keep_out_of_range: bool = False
) -> HumanTable:
    """Read a human annotation table (tab-separated; comma-separated when named ``*.csv``).

    Args:
        path: The table: columns ``object1``, ``object2``, ``comparison``, the criteria
            (``score_dict.1``-``score_dict.15`` or ``C1``-``C15``), optionally ``filename``
            and ``score``/``sum``.
        drop_out_of_range: Drop (and list) criterion values outside their range instead of
            failing; CompQA's own tables hold a few (C2 = 2, C13 = 2).
        keep_out_of_range: Keep (and list, marked "kept") such values in the row's total, as
            the paper's human columns count them (Tables 3 and 5 reproduce only so).

    Raises:
        InputError: Missing columns, a row with the wrong number of fields, a value that is not
            a number or (unless dropped) outside its criterion's range, a row without objects or
            text, or no annotated row.
    """
    path = Path(path)
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 26))
    delimiter = "," if path.suffix.lower() == ".csv" else "\t"
    reader = csv.reader(io.StringIO(read_input_text(path), newline=""), delimiter=delimiter)
    try:
        header = [name.strip() for name in next(reader)]
        columns = _criterion_columns(path, header)
        rows, blank, dropped, multi = [], 0, [], None
        previous = reader.line_num
        for fields in reader:
            line, previous = previous + 1, reader.line_num
            if not any(f.strip() for f in fields):
                continue
            if len(fields) != len(header):
                problem = f"bad row: {len(fields)} fields, the header has {len(header)}"
                raise InputError(path, problem, f"line {line}")
            record = dict(zip(header, fields, strict=True))
            cells = [record[c].strip() for c in columns]
            if multi is None and any(cells):
                multi = next(c for c in cells if c).startswith("{")
            keep = "keep" if keep_out_of_range else "drop" if drop_out_of_range else ""
            row = _row(path, line, record, cells, bool(multi), keep, dropped)
            if row is None:
                blank += 1
            else:
                rows.append(row)
    except csv.Error as exc:
        raise InputError(path, f"unreadable table: {exc}", f"line {reader.line_num}") from None
    if not rows:
        raise InputError(path, "no annotated rows")
    if multi:
        raters = tuple(dict.fromkeys(r for row in rows for r in row.ratings))
        layout = "multi"
    else:
        raters, layout = (path.stem,), "C" if columns[0] == "C1" else "score_dict"
    return HumanTable(path, layout, raters, tuple(rows), blank, tuple(dropped))


def _criterion_columns(path: Path, header: list[str]) -> list[str]:
    missing = [c for c in ("object1", "object2", "comparison") if c not in header]
    found = [cols for cols in _CRITERION_COLUMNS.values() if set(cols) <= set(header)]
    if missing or not found:
        need = ", ".join(missing + ([] if found else ["score_dict.1-15 or C1-C15"]))
        raise InputError(path, f"missing columns: {need}", "line 1")
    return found[0]


def _row(
    path: Path,
    line: int,
    record: dict[str, str],
    cells: list[str],
    multi: bool,
    out_of_range: str,
    dropped: list[str],
) -> HumanRow | None:
    """The row's ratings, or None when it holds none (`out_of_range`: "", drop or keep)."""
    where = f"line {line}"

    def rater(name: str) -> str:
        return f"{path.stem}:{name}" if multi else path.stem

    ratings: dict[str, dict[int, float]] = defaultdict(dict)
    for number, cell in zip(MAXIMA, cells, strict=True):
        if not cell:
            continue
        for name, value in _cell(path, where, number, cell, multi).items():
            points = _value(path, where, number, value)
            if points is None:
                continue
            label = f"C{number} = {points:g}" + (f" ({name})" if multi else "")
            if not 0 <= points <= MAXIMA[number]:
                if not out_of_range:
                    problem = (
                        f"{label} is outside 0-{MAXIMA[number]} "
                        "(--drop-out-of-range skips such cells, --keep-out-of-range keeps them)"
                    )
                    raise InputError(path, problem, where)
                dropped.append(f"{where}: {label}" + (" (kept)" if out_of_range == "keep" else ""))
                if out_of_range == "drop":
                    continue
            ratings[rater(name)][number] = points
    if not ratings:
        return None
    texts = {name: record[name].strip() for name in ("object1", "object2", "comparison")}
    for name, text in texts.items():
        if not text:
            raise InputError(path, f"an annotated row without {name!r}", where)
    recorded = record.get("score", record.get("sum", "")).strip()
    totals = _cell(path, where, 0, recorded, multi) if recorded else {}
    numbers = {rater(name): _number(value) for name, value in totals.items()}
    return HumanRow(
        line,
        texts["object1"],
        texts["object2"],
        texts["comparison"],
        _source(record.get("filename", "")),
        dict(ratings),
        {name: number for name, number in numbers.items() if number is not None},
    )


def _cell(path: Path, where: str, number: int, cell: str, multi: bool) -> dict[str, Any]:
    """``{rater: value}`` of a cell: a JSON or Python-repr dict when `multi`, else one value."""
    name = f"C{number}" if number else "the total"
    if not multi:
        if cell.startswith("{"):
            raise InputError(path, f"{name} holds a dict where the table has plain values", where)
        return {"": cell}
    for load in (json.loads, ast.literal_eval):
        with contextlib.suppress(ValueError, SyntaxError, TypeError, MemoryError):
            value = load(cell)
            if isinstance(value, dict) and all(isinstance(k, str) for k in value):
                return value
    raise InputError(path, f"{name} is not a {{rater: points}} dict: {cell[:60]!r}", where)


def _value(path: Path, where: str, number: int, value: Any) -> float | None:
    """Points as a float; None when blank."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    points = _number(value)
    if points is None:
        raise InputError(path, f"C{number} is {value!r}, not a number", where)
    return points


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    with contextlib.suppress(TypeError, ValueError):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _source(filename: str) -> tuple[str, int | None] | None:
    """``.../scored_gpt4_scenario_3_comparison.json`` → (gpt4, 3); ``human_summaries`` → human."""
    name = re.split(r"[\\/]", filename.strip())[-1].removesuffix(".json")
    name = name.removeprefix("scored_").removesuffix("_comparison")
    if not name:
        return None
    return ("human", None) if name == "human_summaries" else file_generator(name + ".json")


# ---- matching ---------------------------------------------------------------------------------


@dataclass
class Matching:
    """How a table's rows matched the judged answers.

    Attributes:
        table: The table.
        matched: ``(row, index into the judged answers)`` per matched row.
        loose: How many of them matched only by the ASCII letters and digits of the text.
        unmatched: Rows naming no judged answer.
        ambiguous: Rows naming several judged answers with different judgments, even after the
            ``filename`` tie-break.
        duplicates: Rows naming an answer that earlier rows already gave every one of their
            raters' ratings for (skipped; a repeated row that adds a rater counts as matched).
    """

    table: HumanTable
    matched: list[tuple[HumanRow, int]] = field(default_factory=list)
    loose: int = 0
    unmatched: list[HumanRow] = field(default_factory=list)
    ambiguous: list[HumanRow] = field(default_factory=list)
    duplicates: list[HumanRow] = field(default_factory=list)


class AnswerIndex:
    """Judged answers by `Comparison.key`, and by its ASCII-only variant for mojibake copies."""

    def __init__(self, judged: Sequence[Judged]) -> None:
        self.judged = judged
        self.exact: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        self.loose: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for i, j in enumerate(judged):
            self.exact[j.answer.key].append(i)
            loose = _ascii(j.answer.key)
            if loose:
                self.loose[loose].append(i)

    def find(self, row: HumanRow) -> tuple[list[int], bool]:
        """Candidate answers for `row` (filename tie-break applied) and whether matched loosely."""
        found, loose = self.exact.get(row.key), False
        if not found:
            key = _ascii(row.key)
            found, loose = (self.loose.get(key, []) if key else []), True
        if len(found) > 1 and row.source:
            named = [i for i in found if self._source(i) == row.source]
            found = named or found
        if len({self._judgment(i) for i in found}) == 1:
            found = found[:1]  # copies of one answer judged alike: any of them will do
        return found, loose

    def _source(self, i: int) -> tuple[str, int | None]:
        return self.judged[i].answer.generator, self.judged[i].answer.scenario

    def _judgment(self, i: int) -> tuple[Any, ...]:
        j = self.judged[i]
        return j.total, tuple(sorted((j.scores or {}).items()))


def match_table(table: HumanTable, index: AnswerIndex) -> Matching:
    """Match each row of `table` to one judged answer.

    Raises:
        InputError: No row of the table matches a judged answer.
    """
    matching = Matching(table)
    rated: dict[int, set[str]] = defaultdict(set)  # answer -> raters that already rated it
    for row in table.rows:
        found, loose = index.find(row)
        if not found:
            matching.unmatched.append(row)
        elif len(found) > 1:
            matching.ambiguous.append(row)
        elif set(row.ratings) <= rated[found[0]]:
            matching.duplicates.append(row)
        else:  # a repeated row still counts for the raters it adds (multi-rater tables)
            rated[found[0]] |= set(row.ratings)
            matching.matched.append((row, found[0]))
            matching.loose += loose
    if not matching.matched:
        problem = f"none of its {len(table.rows)} annotated rows matches a judged answer"
        if matching.ambiguous:
            problem += f" ({len(matching.ambiguous)} match several differently judged answers)"
        raise InputError(table.path, problem + " (by both objects and the comparison text)")
    return matching


def _ascii(key: tuple[str, str, str]) -> tuple[str, str, str] | None:
    """The key with only the ASCII letters and digits of the text.

    None for mostly non-ASCII text: so little would be left that different answers could share it.
    """
    text = re.sub(r"[^a-z0-9]", "", key[2])
    return (key[0], key[1], text) if len(text) * 2 >= len(key[2]) else None


# ---- agreement --------------------------------------------------------------------------------


Ratings = dict[int, tuple[dict[int, float], float | None]]  # answer -> (criteria, total)


def rater_ratings(judged: Sequence[Judged], matchings: Sequence[Matching]) -> dict[str, Ratings]:
    """Every rater's ratings by judged-answer index: the judge first, then each table's raters."""
    raters: dict[str, Ratings] = {
        JUDGE: {
            i: ({n: float(p) for n, p in (j.scores or {}).items()}, j.total)
            for i, j in enumerate(judged)
        }
    }
    for matching in matchings:
        for name in matching.table.raters:
            if name in raters:
                raise ConfigError(f"rater {name!r} is given twice (same table twice?)")
            ratings: Ratings = {}
            for row, i in matching.matched:
                if name in row.ratings:
                    ratings.setdefault(i, (row.ratings[name], row.total(name)))  # first row wins
            raters[name] = ratings
    return raters


def agreement(a: Ratings, b: Ratings) -> dict[str, Any]:
    """Pearson, Spearman and Krippendorff's alpha (interval) on totals and per criterion.

    ``separately`` is the paper's pooled variant (Table 2, "all scores concatenated for all
    answers"; Section 3's "0.71 for all scores"): every criterion of every shared answer as one
    pair, the coefficients over all of them; ``total`` is its "final score".
    """
    shared = sorted(set(a) & set(b))
    totals = [(a[i][1], b[i][1]) for i in shared]
    result = {"n": len(shared), "total": _coefficients(totals), "criteria": {}}
    pooled: list[tuple[float | None, float | None]] = []
    for n in MAXIMA:
        pairs = [(a[i][0].get(n), b[i][0].get(n)) for i in shared]
        result["criteria"][f"C{n}"] = _coefficients(pairs)
        pooled += pairs
    result["separately"] = _coefficients(pooled)
    return result


def agreement_report(judged: Sequence[Judged], tables: Sequence[HumanTable]) -> dict[str, Any]:
    """Match `tables` to `judged`, then agreement of the judge with every rater and between raters.

    Raises:
        InputError: A table none of whose rows matches a judged answer.
    """
    index = AnswerIndex(judged)
    matchings = [match_table(table, index) for table in tables]
    raters = rater_ratings(judged, matchings)
    names = list(raters)
    pairs = [(JUDGE, name) for name in names[1:]] + list(combinations(names[1:], 2))
    return {
        "note": AGREEMENT_NOTE,
        "tables": [_table_summary(m) for m in matchings],
        "pairs": [{"a": a, "b": b} | agreement(raters[a], raters[b]) for a, b in pairs],
    }


def _coefficients(pairs: Sequence[tuple[float | None, float | None]]) -> dict[str, Any]:
    both = [(x, y) for x, y in pairs if x is not None and y is not None]
    xs, ys = [x for x, _ in both], [y for _, y in both]
    coefficients: dict[str, Any] = {"n": len(both)}
    for name, correlation in (("pearson", pearson(xs, ys)), ("spearman", spearman(xs, ys))):
        coefficients[name] = None if correlation is None else correlation.r
        coefficients[f"{name}_p"] = None if correlation is None else correlation.p
    coefficients["alpha"] = krippendorff_alpha([xs, ys], "interval")
    return coefficients


def _table_summary(matching: Matching) -> dict[str, Any]:
    table = matching.table
    mismatch = {
        rater: sum(
            1
            for row in table.rows
            if row.recorded.get(rater) is not None
            and row.total(rater) is not None
            and abs(row.recorded[rater] - row.total(rater)) > 1e-9
        )
        for rater in table.raters
    }
    return {
        "file": str(table.path),
        "layout": table.layout,
        "raters": list(table.raters),
        "rows": len(table.rows) + table.blank,
        "blank": table.blank,
        "annotated": len(table.rows),
        "matched": len(matching.matched),
        "matched_loose": matching.loose,
        "unmatched": len(matching.unmatched),
        "ambiguous": len(matching.ambiguous),
        "duplicates": len(matching.duplicates),
        "unmatched_rows": [_row_name(r) for r in matching.unmatched[:SHOWN]],
        "ambiguous_rows": [_row_name(r) for r in matching.ambiguous[:SHOWN]],
        "duplicate_rows": [_row_name(r) for r in matching.duplicates[:SHOWN]],
        "dropped_cells": list(table.dropped),
        "recorded_total_mismatch": mismatch,
    }


def _row_name(row: HumanRow) -> str:
    source = ""
    if row.source:
        source = f", {row.source[0]}" + (f" scenario {row.source[1]}" if row.source[1] else "")
    return f"line {row.line} ({row.object1} vs {row.object2}{source})"
