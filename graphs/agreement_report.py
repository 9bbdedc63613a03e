"""`moot report agreement`: a run's judge against people's labels, and people against each other.

Each run is read as `moot view` reads it (`moot.core.view.payload.read_run`), its labels
(``RUN/labels`` or the folder given) checked against its items' fields
(`moot.core.labels.read_labels`), and for each judge model and field the figures of
`moot.core.metrics.label_agreement`. A 1v1 debate's winner is compared on PanelBench's scale
(0 pro, 0.5 tie, 1 con), as the paper compares it: its debaters' names differ from one debate
to the next. Written as ``report.json``, ``report.md`` and ``chart.png``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.core.data.records import atomic_write, write_json
from moot.core.errors import InputError
from moot.core.labels import (
    LABELS_FOLDER,
    PANELBENCH,
    LabelField,
    judge_values,
    read_labels,
    run_fields,
    sides,
)
from moot.core.metrics.label_agreement import RESAMPLES, Rated, field_agreement
from moot.core.tables import render_table, show
from moot.core.view.payload import read_run

#: What the report writes in its folder, by name.
FILES = {"report": "report.json", "markdown": "report.md", "chart": "chart.png"}
#: A 1v1 debate's winner as the report compares it.
SIDE_WINNER = LabelField(
    "winner", PANELBENCH, scale=(0.0, 1.0), ordinal=True, title="winner (0 pro, 0.5 tie, 1 con)"
)


def agreement_report(
    runs: Sequence[Path],
    labels: Path | None,
    out: Path,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Read the runs and their labels, write the report's `FILES` in `out`; the report.

    Args:
        runs: Run folders of a judged kind (`moot judge`, `moot eval ...`).
        labels: The labels folder of the one run; None: each run's ``labels/``.
        out: The report's folder.
        resamples: Bootstrap resamples for the intervals.
        seed: The bootstrap's seed.

    Raises:
        InputError: A run that cannot be read or that nobody labels, a missing labels folder,
            a label that is no label of its run's items (the file and line named), or no labels.
    """
    groups, read = [], []
    for folder in runs:
        run = read_run(folder)
        fields = run_fields(run)
        if not any(fields.values()):
            raise InputError(folder, f"a {run['kind']} run: moot labels no verdict in it")
        where = labels if labels is not None else Path(folder) / LABELS_FOLDER
        found = read_labels(where, fields)
        if not found:
            raise InputError(where, "no labels")
        read.append(
            {
                "run": str(folder),
                "kind": run["kind"],
                "labels": str(where),
                "items": len(run["items"]),
                "labelled": len({label["item"] for label in found}),
                "labellers": _counts(found),
            }
        )
        groups += _groups(run, fields, found, resamples, seed)
    report = {
        "report": "agreement",
        "resamples": resamples,
        "seed": seed,
        "runs": read,
        "groups": groups,
    }
    write_json(out / FILES["report"], report)
    markdown = report_markdown(report)
    atomic_write(out / FILES["markdown"], lambda f: f.write(markdown))
    _chart(report, out / FILES["chart"])
    return report


def _counts(found: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for label in found:
        counts[label["labeller"]] = counts.get(label["labeller"], 0) + 1
    return counts


def _groups(
    run: dict[str, Any],
    fields: dict[str, list[LabelField]],
    found: list[dict[str, Any]],
    resamples: int,
    seed: int,
) -> list[dict[str, Any]]:
    """One group per judge model of the run: each labelled field's figures."""
    items = {item["id"]: item for item in run["items"]}
    summary = run["summary"] or {}
    # (model, field) -> the field as compared, and each labelled item's verdicts
    cells: dict[tuple[str, str], tuple[list[LabelField], dict[str, Rated]]] = {}
    for label in found:
        item = items[label["item"]]
        record = item["record"]
        model = item["model"] or str(summary.get("judge") or "the judge")
        field = next(f for f in fields[label["item"]] if f.name == label["field"])
        said = judge_values(run["kind"], record, summary).get(field.name)
        compared, judge, human = _compared(run["kind"], record, field, said, label["value"])
        defs, rated = cells.setdefault((model, field.name), ([], {}))
        defs.append(compared)
        verdicts = rated.setdefault(label["item"], Rated(label["item"], judge))
        verdicts.humans[label["labeller"]] = human
    by_model: dict[str, list[dict[str, Any]]] = {}
    for (model, _), (defs, rated) in cells.items():
        field = _merged(defs)
        panelbench = run["kind"] == "judge" and field.values == PANELBENCH
        figures = field_agreement(
            field, list(rated.values()), panelbench=panelbench, resamples=resamples, seed=seed
        )
        by_model.setdefault(model, []).append(figures)
    return [
        {"run": run["name"], "kind": run["kind"], "model": model, "fields": figures}
        for model, figures in by_model.items()
    ]


def _compared(
    kind: str, record: dict[str, Any], field: LabelField, judge: Any, human: Any
) -> tuple[LabelField, Any, Any]:
    """The field as compared, the judge's value (None: none it could give) and the human's."""
    try:
        judge = None if judge is None else field.check(judge)
    except ValueError:  # a verdict off the field's values is none the labels can meet
        judge = None
    if kind == "judge" and field.name == "winner" and record.get("format") != "bp":
        debate = sides(record)
        on_scale = [None if v is None else debate.label(v) for v in (judge, human)]
        return SIDE_WINNER, on_scale[0], on_scale[1]
    return field, judge, human


def _merged(defs: list[LabelField]) -> LabelField:
    """One field over items whose values differ (a BP debate's teams): their values together."""
    first = defs[0]
    if first.values is None or all(d.values == first.values for d in defs):
        return first
    values = tuple(dict.fromkeys(v for d in defs for v in d.values or ()))
    return LabelField(first.name, values, first.scale, first.ordinal, first.title)


FIGURES = ("accuracy", "kappa", "alpha", "pearson", "spearman", "rmse")
HEADERS = {
    "accuracy": "accuracy",
    "kappa": "Cohen's κ",
    "alpha": "Krippendorff's α",
    "pearson": "Pearson r (p)",
    "spearman": "Spearman ρ (p)",
    "rmse": "RMSE ×100",
}


def judge_table(group: dict[str, Any], *, markdown: bool = True) -> str:
    """The judge against the labellers: one row per field, each figure with its interval.

    ``items`` and ``pairs`` are those with the judge's verdict; ``no verdict`` the labelled
    items the judge gave none on (a failure, an unread reply), left out of the figures.
    """
    rows: list[tuple[object, ...]] = [
        ("field", "level", "items", "pairs", "no verdict", *(HEADERS[k] for k in FIGURES))
    ]
    for field in group["fields"]:
        judge = field["judge"]
        rows.append(
            (
                field["field"],
                field["level"],
                judge["items"],
                judge["pairs"],
                field["judge_missing"],
                *(_cell(judge.get(k), k) for k in FIGURES),
            )
        )
    return render_table(rows, left=2, markdown=markdown)


def _cell(figure: dict[str, Any] | None, name: str) -> str:
    if figure is None:
        return ""
    digits = 1 if name == "rmse" else 3
    text = show(figure["value"], digits)
    if "p" in figure and figure["value"] is not None:
        text += f" (p {show(figure['p'], 2, 'g')})"
    if figure.get("ci95"):
        low, high = figure["ci95"]
        text += f" [{low:.{digits}f}, {high:.{digits}f}]"
    return text


def report_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: per run and judge model, the judge's and the labellers' tables."""
    lines = ["# Agreement with human labels", ""]
    for run in report["runs"]:
        counts = ", ".join(f"{name} {n}" for name, n in run["labellers"].items())
        lines.append(
            f"- {run['run']} ({run['kind']}): {run['labelled']} of {run['items']} items "
            f"labelled ({counts}), labels from {run['labels']}"
        )
    lines += [
        "",
        f"Intervals: 95% percentile bootstrap over items, {report['resamples']} resamples, "
        f"seed {report['seed']}; n/a: undefined (too few or constant values).",
    ]
    for group in report["groups"]:
        lines += ["", f"## {group['model']} ({group['run']})", "", "### Judge against humans"]
        lines += ["", judge_table(group)]
        humans = [(f["field"], f["humans"]) for f in group["fields"] if f["humans"]]
        if humans:
            rows: list[tuple[object, ...]] = [
                ("field", "labellers", "items", "Krippendorff's α", "pairs")
            ]
            for name, h in humans:
                pairs = "; ".join(
                    f"{pair}: {p['items']} items, agree {show(p['agreement'])}"
                    + "".join(f", {k} {show(p[k])}" for k in ("kappa", "pearson") if k in p)
                    for pair, p in h["pairs"].items()
                )
                rows.append((name, ", ".join(h["labellers"]), h["items"], show(h["alpha"]), pairs))
            table = render_table(rows, left=2, markdown=True)
            lines += ["", "### Humans against each other", "", table]
        for field in group["fields"]:
            confusion = field["judge"].get("confusion")
            if confusion and any(map(any, confusion["matrix"])):
                values = [show(v) for v in confusion["values"]]
                rows = [("judge \\ human", *values)]
                rows += [(v, *row) for v, row in zip(values, confusion["matrix"], strict=True)]
                lines += ["", f"### Confusion: {field['field']}", ""]
                lines += [render_table(rows, markdown=True)]
    return "\n".join(lines) + "\n"


def _chart(report: dict[str, Any], path: Path) -> None:
    """Krippendorff's α per field, one panel per run and judge model.

    The judge with the labellers (its 95% interval), and the labellers alone.
    """
    from moot.core.charts import NEUTRAL, PALETTE, chart, save_png

    groups = report["groups"]
    widest = max(len(g["fields"]) for g in groups)
    with chart(max(5.0, 0.6 * widest + 2) * len(groups), 4.0, panels=len(groups)) as (fig, axes):
        for ax, group in zip(axes, groups, strict=True):
            names = [f["field"] for f in group["fields"]]
            alphas = [f["judge"]["alpha"] for f in group["fields"]]
            xs = range(len(names))
            judge = [math.nan if a["value"] is None else a["value"] for a in alphas]
            errors = [
                [v - a["ci95"][0], a["ci95"][1] - v] if a["ci95"] and a["value"] is not None
                else [0, 0]
                for v, a in zip(judge, alphas, strict=True)
            ]  # fmt: skip
            yerr = list(zip(*errors, strict=True))
            ax.bar([x - 0.2 for x in xs], judge, 0.4, color=PALETTE[0], label="judge + humans")
            ax.errorbar([x - 0.2 for x in xs], judge, yerr=yerr, fmt="none", ecolor="black")
            humans = [(f["humans"] or {}).get("alpha") for f in group["fields"]]
            shown = [math.nan if h is None else h for h in humans]  # none shared, or undefined
            ax.bar([x + 0.2 for x in xs], shown, 0.4, color=NEUTRAL, label="humans alone")
            ax.axhline(0, color="black", linewidth=0.6)
            ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=7)
            ax.set_xlim(-0.6, len(names) - 0.4)
            ax.set_ylim(-1, 1.05)
            ax.set_ylabel("Krippendorff's α")
            ax.set_title(f"{group['model']}", fontsize=9)
            ax.legend(fontsize=7)
        fig.tight_layout()
        save_png(fig, path)
