"""`moot report compqa`: mean rubric scores of judged CompQA answers and agreement with humans."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(commands: Any, evaluations: Any) -> None:
    """Add ``moot report`` and its ``compqa`` subcommand to ``moot`` (`commands`)."""
    del evaluations
    report = commands.add_parser("report", help="aggregate judged outputs into reports")
    report.set_defaults(command_fn=lambda _: report.print_help() or 2)
    reports = report.add_subparsers(title="reports", metavar="REPORT")
    compqa = reports.add_parser(
        "compqa",
        help="CompQA: mean rubric scores by generator and scenario; agreement with humans",
        description="Aggregate judged CompQA files (`moot eval compqa` output, or files judged "
        "elsewhere such as CompQA's evaluated_summaries) into mean total ± sample std by "
        "group, category and criterion means, and invalid-judgment counts; with --human, "
        "agreement (Pearson, Spearman, Krippendorff's alpha) with human annotation tables. "
        "Writes report.json, report.md, chart.png and heatmap.png into --out.",
    )
    compqa.set_defaults(command_fn=_cmd_report_compqa)
    compqa.add_argument(
        "--judged", type=Path, nargs="+", required=True, metavar="FILE", help="judged files"
    )
    compqa.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    compqa.add_argument(
        "--human",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="human annotation table, TSV (repeatable; CompQA's evaluation_tables/*.tsv)",
    )
    compqa.add_argument(
        "--by",
        default="generator,scenario",
        metavar="KEYS",
        help="grouping keys, any of generator,scenario (default generator,scenario)",
    )
    compqa.add_argument(
        "--drop-out-of-range",
        action="store_true",
        help="drop (and list) human criterion values outside their range instead of failing",
    )
    compqa.add_argument("--quiet", action="store_true", help="print nothing but errors")
    compqa.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def _cmd_report_compqa(args: argparse.Namespace) -> int:
    from moot.core.data.compqa import load_judged
    from moot.core.data.records import atomic_write, write_json
    from moot.core.errors import ConfigError
    from moot.core.metrics.compqa_human import read_human_table
    from moot.core.metrics.compqa_report import build_report, check_by, report_markdown

    by = check_by(args.by.split(","))
    for flag, paths in (("--judged", args.judged), ("--human", args.human)):
        resolved = [p.resolve() for p in paths]
        twice = {str(p) for p, r in zip(paths, resolved, strict=True) if resolved.count(r) > 1}
        if twice:
            raise ConfigError(f"{flag}: {', '.join(sorted(twice))} given twice")
    judged_files = {path: load_judged(path) for path in args.judged}
    tables = [read_human_table(path, args.drop_out_of_range) for path in args.human]
    report = build_report(judged_files, tables, by)
    write_json(args.out / "report.json", report)
    markdown = report_markdown(report)
    atomic_write(args.out / "report.md", lambda f: f.write(markdown))
    _chart(report["generator_scenario"], args.out / "chart.png")
    _heatmap(report["groups"], by, args.out / "heatmap.png")
    if not args.quiet:
        print(report_markdown(report, full=False), end="")
        print(f"wrote report.json, report.md, chart.png and heatmap.png to {args.out}")
    if report["overall"]["n_total"] == 0:
        print("moot: no judgment has a total; see report.md for why", file=sys.stderr)
        return 1
    return 0


def _chart(cells: list[dict[str, Any]], path: Path) -> None:
    """Mean total by generator (x) and scenario (bars), sample std as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    generators = list(dict.fromkeys(c["generator"] for c in cells))
    scenarios = sorted({c["scenario"] for c in cells}, key=lambda s: (s is None, s))
    shown = [c for c in cells if c["mean"] is not None]
    per_generator = {g: [c for c in shown if c["generator"] == g] for g in generators}
    width = 0.8 / (max(len(group) for group in per_generator.values()) or 1)
    colors = {s: f"C{k}" for k, s in enumerate(scenarios)}
    labels = {s: "no scenario" if s is None else f"scenario {s}" for s in scenarios}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(generators) + 2), 4.2), dpi=120)
    for x, group in enumerate(per_generator.values()):
        for k, cell in enumerate(group):  # the generator's bars, centred on its tick
            ax.bar(
                x + (k - (len(group) - 1) / 2) * width,
                cell["mean"],
                width,
                yerr=float("nan") if cell["std"] is None else cell["std"],
                capsize=2,
                color=colors[cell["scenario"]],
            )
    ax.axhline(19, color="gray", linestyle=":", linewidth=0.8)
    ax.set_xticks(range(len(generators)), generators, rotation=30, ha="right")
    ax.set_ylim(0, 21)
    ax.set_ylabel("mean total (0-19) ± sample std")
    ax.set_title("CompQA: mean rubric total by generator and scenario", fontsize=10)
    handles = [Patch(color=colors[s], label=labels[s]) for s in scenarios]
    ax.legend(
        handles=handles,
        fontsize=7,
        ncol=len(scenarios),
        loc="lower center",
        bbox_to_anchor=(0.5, 1.08),
    )
    fig.tight_layout()
    _save(fig, path)


def _heatmap(groups: list[dict[str, Any]], by: tuple[str, ...], path: Path) -> None:
    """Share of points lost per criterion (columns) and group (rows)."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import pyplot as plt

    values = np.array(
        [[np.nan if v is None else v for v in g["lost"].values()] for g in groups], dtype=float
    )
    labels = [" / ".join("-" if g[k] is None else str(g[k]) for k in by) for g in groups]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(groups)), dpi=120)
    image = ax.imshow(values, cmap="Reds", vmin=0, vmax=1, aspect="auto")
    for (row, col), value in np.ndenumerate(values):
        if not np.isnan(value):
            color = "white" if value > 0.6 else "black"
            ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=6, color=color)
    ax.set_xticks(range(values.shape[1]), list(groups[0]["lost"]) if groups else [])
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_title("Share of points lost per criterion (valid judgments)", fontsize=10)
    fig.colorbar(image, ax=ax, fraction=0.03)
    fig.tight_layout()
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    from matplotlib import pyplot as plt

    from moot.core.data.records import atomic_write

    atomic_write(path, lambda f: fig.savefig(f, format="png"), binary=True)
    plt.close(fig)
