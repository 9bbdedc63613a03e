"""The CompQA report: mean rubric scores of judged answers and agreement with human annotators.

Judged files (moot's own or CompQA's ``evaluated_summaries``) are read with
`moot.core.data.compqa.load_judged`; `TOTAL_NOTE` says which totals are in the means and `STD`
what ± is (the paper's convention: Table 3's ± is the mean of its Table 5 cells' standard
deviations). Category and criterion means cover valid judgments only.

Agreement with human annotation tables is `moot.core.metrics.compqa_human`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from moot.core.data.compqa import CATEGORIES, MAXIMA, Comparison, Judged, category_sums
from moot.core.errors import ConfigError
from moot.core.metrics.compqa_human import SHOWN, HumanTable, agreement_report
from moot.core.metrics.stats import mean, stdev
from moot.core.runs import STOPPED
from moot.core.tables import render_table

BY_KEYS = ("generator", "scenario")
STD = (
    "the paper's convention (Tables 3 and 5): a (generator, scenario) cell is its mean ± sample "
    "standard deviation (n - 1); a group of several cells is the mean of its cells' means ± the "
    "mean of their standard deviations (pooled_mean and pooled_std are the plain statistics of "
    "all its totals)"
)
TOTAL_NOTE = (
    "A judgment's total is the sum of its criteria, as the paper computes it (Section 2.1). An "
    "invalid judgment (criteria missing, renamed or out of range, points as words, a total "
    "outside 0-19) is counted and listed; when all fifteen criteria are numbers, their sum "
    "still counts in the means of files judged elsewhere (the rule under which CompQA's "
    "published means reproduce: 'invalid, total kept'); moot's own invalid or failed judgments "
    "have no total and are in no mean. A total recorded without criteria ('unchecked') counts "
    "in the total only; category and criterion means cover valid judgments only. ± is " + STD + "."
)
_LISTED = (("unmatched", "unmatched_rows"), ("ambiguous", "ambiguous_rows"))
_LISTED += (("duplicates", "duplicate_rows"),)


# ---- aggregation ------------------------------------------------------------------------------


def group_stats(judged: Sequence[Judged]) -> dict[str, Any]:
    """Counts, mean ± std of the total (see `STD`), and category / criterion means of `judged`."""
    totals = [j.total for j in judged if j.total is not None]
    cells: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for j in judged:
        if j.total is not None:
            cells[(j.answer.generator, j.answer.scenario)].append(j.total)
    spreads = [s for s in map(stdev, cells.values()) if s is not None]
    valid = [j.scores for j in judged if j.scores is not None]
    criteria = {n: mean([s[n] for s in valid]) for n in MAXIMA}
    sums = [category_sums(s) for s in valid]
    return {
        "n": len(judged),
        "n_total": len(totals),
        "cells": len(cells),
        "mean": mean([mean(v) for v in cells.values()]),  # type: ignore[misc]
        "std": mean(spreads),
        "pooled_mean": mean(totals),
        "pooled_std": stdev(totals),
        "n_valid": len(valid),
        "invalid": sum(j.status == "invalid" for j in judged),
        "errors": sum(j.status == "error" for j in judged),
        "stopped": sum(j.status == STOPPED for j in judged),
        "categories": {name: mean([s[name] for s in sums]) for name in CATEGORIES},
        "criteria": {f"C{n}": m for n, m in criteria.items()},
        "lost": {f"C{n}": None if m is None else 1 - m / MAXIMA[n] for n, m in criteria.items()},
    }


def aggregate(judged: Sequence[Judged], by: Sequence[str] = BY_KEYS) -> list[dict[str, Any]]:
    """`group_stats` per group of equal `by` keys (``generator``, ``scenario``), sorted.

    Raises:
        ConfigError: An unknown or repeated key, or no key.
    """
    by = check_by(by)
    groups: dict[tuple[Any, ...], list[Judged]] = defaultdict(list)
    for j in judged:
        groups[tuple(getattr(j.answer, key) for key in by)].append(j)
    ordered = sorted(groups, key=lambda keys: [(v is None, v) for v in keys])
    return [dict(zip(by, keys, strict=True)) | group_stats(groups[keys]) for keys in ordered]


def check_by(by: Sequence[str]) -> tuple[str, ...]:
    """The grouping keys, validated.

    Raises:
        ConfigError: An unknown or repeated key, or no key.
    """
    keys = tuple(k.strip() for k in by if k.strip())
    unknown = [k for k in keys if k not in BY_KEYS]
    if not keys or unknown or len(set(keys)) != len(keys):
        bad = f"unknown {', '.join(unknown)}" if unknown else "empty or repeated keys"
        raise ConfigError(f"--by: {bad} (use any of {', '.join(BY_KEYS)})")
    return keys


def file_summary(path: Path, judged: Sequence[Judged]) -> dict[str, Any]:
    """A judged file's counts, with its first few invalid or failed records and why.

    ``unchecked`` counts records with a recorded total but no criteria; ``invalid_total_kept``
    counts invalid records (judged elsewhere) whose criteria sum is still in the means.
    """
    bad = [j for j in judged if j.status != "ok"]
    return {
        "file": str(path),
        "generators": sorted({j.answer.generator for j in judged}),
        "scenarios": sorted({j.answer.scenario for j in judged if j.answer.scenario}),
        "n": len(judged),
        "invalid": sum(j.status == "invalid" for j in bad),
        "errors": sum(j.status == "error" for j in bad),
        "stopped": sum(j.status == STOPPED for j in bad),
        "unchecked": sum(j.status == "ok" and not j.valid for j in judged),
        "invalid_total_kept": sum(j.total is not None for j in bad),
        "problems": [
            {"where": j.answer.where, "status": j.status, "problem": j.problem} for j in bad[:SHOWN]
        ],
    }


# ---- the report -------------------------------------------------------------------------------


def build_report(
    judged_files: Mapping[Path, Sequence[Judged]],
    tables: Sequence[HumanTable] = (),
    by: Sequence[str] = BY_KEYS,
) -> dict[str, Any]:
    """Everything ``report.json`` holds.

    Args:
        judged_files: Each judged file's judgments (`load_judged`), in the order given.
        tables: Human annotation tables (`read_human_table`).
        by: Grouping keys for the means (``generator``, ``scenario``).

    Raises:
        ConfigError: Bad `by` keys, or one table given twice.
        InputError: A table none of whose rows matches a judged answer.
    """
    by = check_by(by)
    judged = [j for items in judged_files.values() for j in items]
    groups = aggregate(judged, by)
    cells = groups if by == BY_KEYS else aggregate(judged, BY_KEYS)  # the chart's
    return {
        "judged": [str(p) for p in judged_files],
        "human": [str(t.path) for t in tables],
        "by": list(by),
        "std": STD,
        "note": TOTAL_NOTE,
        "groups": groups,
        "overall": group_stats(judged),
        "generator_scenario": [
            {k: g[k] for k in ("generator", "scenario", "n_total", "mean", "std")} for g in cells
        ],
        "files": [file_summary(p, items) for p, items in judged_files.items()],
        "agreement": agreement_report(judged, tables) if tables else None,
        "human_means": [human_means(t) for t in tables],
    }


def human_means(table: HumanTable) -> dict[str, Any]:
    """Each rater's mean total by generator and scenario, and by generator (Table 3's Human*).

    A row's generator and scenario are its ``model`` and ``scenario`` columns, else its
    ``filename``'s; a row's total is the sum of its 15 criteria (none when one is missing). The
    convention is the judges' (`STD`): CompQA's human_evaluation_367.tsv gives Tables 3 and 5's
    human columns this way.
    """
    raters = {}
    for name in table.raters:
        judged = [
            Judged(
                Comparison(row.object1, row.object2, None, row.text, *row.source, table.path,
                           f"line {row.line}", {}),
                None,
                row.total(name),
                None,
                "ok",
            )
            for row in table.rows
            if row.source is not None and row.total(name) is not None
        ]  # fmt: skip
        raters[name] = {
            "generator_scenario": aggregate(judged),
            "generator": aggregate(judged, ["generator"]),
        }
    return {"file": str(table.path), "raters": raters}


def report_markdown(report: dict[str, Any], full: bool = True) -> str:
    """The report's tables as Markdown (`full`: with per-criterion tables and notes)."""
    by = report["by"]
    overall = report["overall"]
    lines = ["# CompQA report", ""]
    if full:
        lines += [report["note"], ""]
    header = [*by, "n", "mean ± std", *CATEGORIES, "invalid", "errors", "stopped"]
    rows = [header]
    for group in [*report["groups"], dict.fromkeys(by, "") | {by[0]: "all"} | overall]:
        rows.append(
            [
                *(_key(group[k]) for k in by),
                str(group["n_total"]),
                _mean_std(group),
                *(_fixed(group["categories"][c], 2) for c in CATEGORIES),
                str(group["invalid"]),
                str(group["errors"]),
                str(group["stopped"]),
            ]
        )
    lines += [
        f"## Mean total (0-19) by {', '.join(by)}",
        "",
        render_table(rows, left=len(by), markdown=True),
        "",
    ]
    if full:
        rows = [[*by, *(f"C{n}" for n in MAXIMA)]]
        for group in report["groups"]:
            rows.append(
                [*(_key(group[k]) for k in by), *(_fixed(v, 2) for v in group["criteria"].values())]
            )
        title = "## Mean points per criterion (valid judgments)"
        lines += [title, "", render_table(rows, left=len(by), markdown=True), ""]
    lines += _files_markdown(report["files"])
    if report["agreement"]:
        lines += _agreement_markdown(report["agreement"], full)
    for table in report["human_means"]:
        for rater, means in table["raters"].items():
            rows = [["generator", "scenario", "n", "mean ± std"]]
            for group in means["generator"] + means["generator_scenario"]:
                cells = [_key(group["generator"]), _key(group.get("scenario", "all"))]
                rows.append([*cells, str(group["n_total"]), _mean_std(group)])
            title = f"## Human means: {rater} (sum of the row's criteria)"
            lines += [title, "", render_table(rows, left=2, markdown=True), ""]
    return "\n".join(lines).rstrip() + "\n"


def _files_markdown(files: list[dict[str, Any]]) -> list[str]:
    keys = ("n", "invalid", "errors", "stopped", "unchecked", "invalid_total_kept")
    rows = [["file", "n", "invalid", "errors", "stopped", "unchecked", "invalid, total kept"]]
    rows += [[Path(f["file"]).name, *(str(f[k]) for k in keys)] for f in files]
    lines = ["## Judged files", "", render_table(rows, left=1, markdown=True), ""]
    for f in files:
        for p in f["problems"]:
            lines.append(f"- {Path(f['file']).name}, {p['where']}: {p['status']}: {p['problem']}")
        more = f["invalid"] + f["errors"] + f["stopped"] - len(f["problems"])
        if more > 0:
            lines.append(f"- {Path(f['file']).name}: {more} more")
    return [*lines, ""] if lines[-1] else lines


_PER_CRITERION = (
    ("pearson", "Pearson r"),
    ("pearson_p", "Pearson r's p-value"),
    ("alpha", "Krippendorff's α (interval)"),
)


def _agreement_markdown(agreement: dict[str, Any], full: bool) -> list[str]:
    lines = ["## Agreement with human annotations", ""]
    if full:
        lines += [agreement["note"], ""]
    keys = ["layout", "annotated", "matched", "matched_loose", "unmatched", "ambiguous"]
    rows = [["table", *keys, "duplicates", "dropped cells"]]
    for t in agreement["tables"]:
        rows.append(
            [Path(t["file"]).name, *(str(t[k]) for k in keys)]
            + [str(t["duplicates"]), str(len(t["dropped_cells"]))]
        )
    lines += [render_table(rows, left=2, markdown=True), ""]
    for t in agreement["tables"]:
        name = Path(t["file"]).name
        for label, key in _LISTED:
            listed = t[key]
            if listed:
                more = t[label] - len(listed)
                lines.append(
                    f"- {name} {label}: {'; '.join(listed)}{f'; {more} more' if more else ''}"
                )
        if t["dropped_cells"]:
            lines.append(f"- {name} dropped: {'; '.join(t['dropped_cells'])}")
        wrong = {r: c for r, c in t["recorded_total_mismatch"].items() if c}
        if wrong:
            counts = ", ".join(f"{r} {c}" for r, c in wrong.items())
            lines.append(f"- {name}: recorded totals that differ from the criteria sum: {counts}")
    lines += ["", "### Totals", ""]
    rows = [
        ["a", "b", "n", "Pearson r (p)", "Spearman ρ (p)", "α (interval)", "separately: ρ (p)", "α"]
    ]
    for pair in agreement["pairs"]:
        total, pooled = pair["total"], pair["separately"]
        rows.append(
            [pair["a"], pair["b"], str(total["n"])]
            + [_with_p(total, "pearson"), _with_p(total, "spearman")]
            + [_fixed(total["alpha"], 3, "undefined"), _with_p(pooled, "spearman")]
            + [_fixed(pooled["alpha"], 3, "undefined")]
        )
    lines += [render_table(rows, left=2, markdown=True), ""]
    if full:
        for key, title in _PER_CRITERION:
            rows = [["a", "b", *(f"C{n}" for n in MAXIMA)]]
            for pair in agreement["pairs"]:
                cells = [_number(c[key], key) for c in pair["criteria"].values()]
                rows.append([pair["a"], pair["b"], *cells])
            lines += [
                f"### Per criterion: {title}",
                "",
                render_table(rows, left=2, markdown=True),
                "",
            ]
    return lines


def _mean_std(group: dict[str, Any]) -> str:
    if group["mean"] is None:
        return "—"
    std = "" if group["std"] is None else f" ± {group['std']:.2f}"
    return f"{group['mean']:.4f}{std}"


def _fixed(value: float | None, digits: int, missing: str = "—") -> str:
    return missing if value is None else f"{value:.{digits}f}"


def _with_p(coefficients: dict[str, Any], key: str) -> str:
    """``0.567 (p=1.2e-22)``: a correlation with its p-value, each "undefined" where it is."""
    r, p = coefficients[key], coefficients[f"{key}_p"]
    if r is None:
        return "undefined"
    text = _p_value(p)
    return f"{r:.3f} (p{'' if text.startswith('<') else '='}{text})"


def _number(value: float | None, key: str) -> str:
    """A per-criterion cell: p-values in two significant digits, coefficients in two decimals."""
    if value is None:
        return "undef."
    return _p_value(value) if key.endswith("_p") else f"{value:.2f}"


def _p_value(p: float | None) -> str:
    """``1.2e-22``; ``<1e-300`` where scipy's p underflowed to 0.0 (thousands of pairs)."""
    if p is None:
        return "undefined"
    return "<1e-300" if p == 0 else f"{p:.2g}"


def _key(value: Any) -> str:
    return "-" if value is None else str(value)
