"""CompQA's report: mean rubric scores by generator and scenario, agreement with humans, charts.

The figures are `moot.core.metrics.compqa_report`'s (Tables 4-6 of the CompQA paper); this writes
them as ``report.json`` and ``report.md``, with a bar chart of the mean total per generator and
scenario and a heatmap of the share of points lost per criterion and group.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.core.data.compqa import load_judged
from moot.core.data.records import atomic_write, write_json
from moot.core.metrics.compqa_human import read_human_table
from moot.core.metrics.compqa_report import build_report, report_markdown

#: What the report writes in its folder, by name.
FILES = {
    "report": "report.json",
    "markdown": "report.md",
    "chart": "chart.png",
    "heatmap": "heatmap.png",
}


def write_report(
    judged: Sequence[Path],
    human: Sequence[Path],
    by: tuple[str, ...],
    out: Path,
    drop_out_of_range: bool = False,
    keep_out_of_range: bool = False,
) -> dict[str, Any]:
    """Read the judged files and human tables, write the report's `FILES` in `out`; the report.

    Args:
        judged: `moot eval compqa` outputs (judged answer files).
        human: Human score tables to measure agreement with.
        by: The keys the report groups by (`moot.core.metrics.compqa_report.check_by`).
        out: The report's folder.
        drop_out_of_range: Drop (and list) human scores outside their criterion's range.
        keep_out_of_range: Keep (and list) them in the row's total, as the paper's human
            columns count them (`moot.core.metrics.compqa_human.read_human_table`).

    Raises:
        InputError: A judged file or human table is refused.
    """
    judged_files = {path: load_judged(path) for path in judged}
    tables = [read_human_table(path, drop_out_of_range, keep_out_of_range) for path in human]
    report = build_report(judged_files, tables, by)
    write_json(out / FILES["report"], report)
    markdown = report_markdown(report)
    atomic_write(out / FILES["markdown"], lambda f: f.write(markdown))
    _chart(report["generator_scenario"], out / FILES["chart"])
    _heatmap(report["groups"], by, out / FILES["heatmap"])
    return report


def _chart(cells: list[dict[str, Any]], path: Path) -> None:
    """Mean total by generator (x) and scenario (bars), sample std as error bars."""
    from matplotlib.patches import Patch

    from moot.core.charts import NEUTRAL, chart, save_png

    generators = list(dict.fromkeys(c["generator"] for c in cells))
    scenarios = sorted({c["scenario"] for c in cells}, key=lambda s: (s is None, s))
    shown = [c for c in cells if c["mean"] is not None]
    per_generator = {g: [c for c in shown if c["generator"] == g] for g in generators}
    width = 0.8 / (max(len(group) for group in per_generator.values()) or 1)
    colors = {s: f"C{k}" for k, s in enumerate(scenarios)}
    labels = {s: "no scenario" if s is None else f"scenario {s}" for s in scenarios}
    with chart(max(6.0, 0.9 * len(generators) + 2), 4.2) as (fig, (ax,)):
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
        ax.axhline(19, color=NEUTRAL, linestyle=":", linewidth=0.8)
        ax.set_xticks(range(len(generators)), generators, rotation=30, ha="right")
        ax.set_ylim(0, 21)
        ax.set_ylabel("mean total (0-19) ± sample std")
        ax.set_title("CompQA: mean rubric total by generator and scenario")
        handles = [Patch(color=colors[s], label=labels[s]) for s in scenarios]
        ax.legend(
            handles=handles,
            fontsize=7,
            ncol=len(scenarios),
            loc="lower center",
            bbox_to_anchor=(0.5, 1.08),
        )
        fig.tight_layout()
        save_png(fig, path)


def _heatmap(groups: list[dict[str, Any]], by: tuple[str, ...], path: Path) -> None:
    """Share of points lost per criterion (columns) and group (rows)."""
    import numpy as np

    from moot.core.charts import chart, save_png

    values = np.array(
        [[np.nan if v is None else v for v in g["lost"].values()] for g in groups], dtype=float
    )
    labels = [" / ".join("-" if g[k] is None else str(g[k]) for k in by) for g in groups]
    with chart(9, 1.2 + 0.32 * len(groups)) as (fig, (ax,)):
        image = ax.imshow(values, cmap="Reds", vmin=0, vmax=1, aspect="auto")
        for (row, col), value in np.ndenumerate(values):
            if not np.isnan(value):
                color = "white" if value > 0.6 else "black"
                ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=6, color=color)
        ax.set_xticks(range(values.shape[1]), list(groups[0]["lost"]) if groups else [])
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_title("Share of points lost per criterion (valid judgments)")
        fig.colorbar(image, ax=ax, fraction=0.03)
        fig.tight_layout()
        save_png(fig, path)
