"""moot's charts: one shared style, drawn through matplotlib's object-oriented API.

Every chart is a `matplotlib.figure.Figure` made directly, never through ``pyplot``: pyplot keeps
each figure in a process-wide registry until it is closed (a leak when a chart raises half way,
and shared state between threads), and needs a backend chosen before its first import. A bare
`Figure` renders PNG with Agg on ``savefig`` and is freed with its last reference. The style
(`STYLE`) applies through `matplotlib.rc_context` while a chart is drawn and saved, so it never
changes the caller's own rcParams.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from moot.core.data.records import atomic_write

# Blue and orange first (for/against, win/loss), then distinguishable hues; grey is for the
# neutral outcome (a tie) and reference lines, not a series.
PALETTE = ("#3b7dd8", "#d8643b", "#4c9f70", "#8e6cc0", "#c9a227", "#3bb3c3", "#c45c8a")
NEUTRAL = "#9aa5b1"

STYLE: dict[str, Any] = {
    "figure.dpi": 120,
    "savefig.dpi": "figure",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,  # grid lines behind the bars
    "grid.alpha": 0.3,
}


@contextmanager
def chart(width: float, height: float, *, panels: int = 1) -> Iterator[tuple[Any, list[Any]]]:
    """A new figure in moot's style and its axes, side by side; draw and save inside the block.

    Args:
        width: Figure width in inches (at 120 dpi).
        height: Figure height in inches.
        panels: Number of axes, in one row.

    Yields:
        The `Figure` and a list of its `panels` axes.
    """
    import matplotlib
    from cycler import cycler
    from matplotlib.figure import Figure

    with matplotlib.rc_context({**STYLE, "axes.prop_cycle": cycler(color=PALETTE)}):
        fig = Figure(figsize=(width, height))
        yield fig, list(fig.subplots(1, panels, squeeze=False)[0])


def save_png(fig: Any, path: Path) -> None:
    """Write `fig` as a PNG at `path`, atomically (inside `chart`'s block, so the style holds)."""
    atomic_write(path, lambda f: fig.savefig(f, format="png"), binary=True)
