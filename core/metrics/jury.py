"""A jury's verdicts: each item's verdict from its jurors', their agreement, a mean's interval.

`moot eval judge` (`moot.graphs.custom_judge`) asks every juror about every item; an item's
verdict is its jurors' `mean` or `majority` (an unread verdict is left out, never counted as a
vote). Agreement is Krippendorff's alpha (`moot.core.metrics.agreement`): of the whole jury, of
each pair of jurors, and of each juror with the jury's verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from moot.core.metrics.agreement import krippendorff_alpha
from moot.core.metrics.stats import mean


def verdict_of(values: Sequence[Any], method: str) -> Any:
    """The jury's verdict on one item: the `mean` of its jurors' read verdicts, or their `majority`.

    None when no juror's verdict was read, or (majority) when the top values tie: a split jury.
    """
    read = [v for v in values if v is not None]
    if not read:
        return None
    if method == "mean":
        return mean(read)
    (top, votes), *rest = Counter(read).most_common()
    return None if rest and rest[0][1] == votes else top


def agreement(
    verdicts: Mapping[str, Sequence[Any]], jury: Sequence[Any], level: str
) -> dict[str, Any]:
    """Krippendorff's alpha of the jurors, of each pair, and of each juror with the jury.

    Args:
        verdicts: Each juror's verdict per item (None: unread), items in one order.
        jury: The jury's verdict per item, in that order.
        level: ``interval`` (numbers averaged) or ``nominal`` (labels voted on).

    Returns:
        ``{"alpha", "pairwise": {"A vs B": alpha}, "with_jury": {juror: alpha}}``; an
        undefined alpha (no two values to pair, no variation) is None.
    """
    codes = _codes([*jury, *(v for row in verdicts.values() for v in row)], level)
    table = {name: [codes(v) for v in row] for name, row in verdicts.items()}
    verdict = [codes(v) for v in jury]
    return {
        "alpha": krippendorff_alpha(list(table.values()), level),
        "pairwise": {
            f"{a} vs {b}": krippendorff_alpha([table[a], table[b]], level)
            for a, b in combinations(table, 2)
        },
        "with_jury": {
            name: krippendorff_alpha([row, verdict], level) for name, row in table.items()
        },
    }


def _codes(values: Sequence[Any], level: str) -> Any:
    """How a verdict enters alpha's table: a number as itself (interval), a label by its index."""
    if level == "interval":
        return lambda v: None if v is None else float(v)
    labels = {json_key: i for i, json_key in enumerate(dict.fromkeys(map(repr, values)))}
    return lambda v: None if v is None else labels[repr(v)]


def mean_ci95(
    values: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> list[float] | None:
    """A 95% percentile-bootstrap interval of the mean of `values`; None with no values."""
    import numpy as np

    if not values:
        return None
    data = np.asarray(values, dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    means = data[draws].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]
