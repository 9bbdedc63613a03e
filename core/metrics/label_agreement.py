"""How far a judge agrees with people, and people with each other, on one labelled field.

For one field (`moot.core.labels.LabelField`) of a run's items, each item's judge value and
its labellers' values: judge against human over every (item, labeller) pair (accuracy, Cohen's
kappa and a confusion matrix for a categorical verdict; Pearson and Spearman with p-values for a
number; RMSE × 100 on PanelBench's scale for Debatrix), Krippendorff's alpha of the judge and
the labellers together, and human against human where several labellers labelled one item
(alpha of the labellers, and each pair's agreement). Each figure of the judge against humans has
a 95% percentile-bootstrap interval over items (an item's pairs drawn together), seeded: the
same labels give the same report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from moot.core.labels import LabelField
from moot.core.metrics.agreement import cohen_kappa, krippendorff_alpha, pearson, spearman
from moot.core.metrics.panelbench import rmse

#: Bootstrap resamples of the items, unless told otherwise.
RESAMPLES = 1000


@dataclass(frozen=True)
class Rated:
    """One item's verdicts on a field.

    Attributes:
        item: The item's id in the run.
        judge: The judge's value, or None where it gave none.
        humans: Each labeller's value.
    """

    item: str
    judge: Any
    humans: dict[str, Any] = field(default_factory=dict)


def level(found: LabelField) -> str:
    """The field's level of measurement: ``interval`` (a scale), ``ordinal`` or ``nominal``."""
    return "interval" if found.scale else "ordinal" if found.ordinal else "nominal"


def field_agreement(
    found: LabelField,
    rated: Sequence[Rated],
    *,
    panelbench: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """The judge against the labellers, and the labellers against each other, on one field.

    Args:
        found: The field (its values, scale and order).
        rated: The items some labeller labelled, with the judge's value where it gave one.
        panelbench: The values are on PanelBench's scale (0 pro, 0.5 tie, 1 con): RMSE × 100.
        resamples: Bootstrap resamples of the items for the intervals.
        seed: The bootstrap's seed.

    Returns:
        ``{"field", "title", "level", "items", "judge_missing", "judge", "humans"}``: ``judge``
        over the items the judge gave a value on (each figure ``{"value", "ci95"}``, Pearson's
        and Spearman's with ``p`` and ``n``; the confusion matrix; each labeller's figures),
        ``humans`` (`human_figures`) over those two labellers or more labelled, or None.
    """
    judged = [r for r in rated if r.judge is not None]
    by_labeller = sorted({name for r in judged for name in r.humans})
    figures = _judge_figures(found, panelbench)

    def interval(name: str) -> Callable[[Sequence[Rated]], float | None]:
        return lambda sample: figures[name](sample, by_labeller)

    judge: dict[str, Any] = {"pairs": sum(len(r.humans) for r in judged), "items": len(judged)}
    for name in figures:
        value = figures[name](judged, by_labeller)
        judge[name] = {"value": value, "ci95": _bootstrap(judged, interval(name), resamples, seed)}
    for name, test in (("pearson", pearson), ("spearman", spearman)):
        if name in judge:
            judge[name] |= _p(_pairs(judged, by_labeller), test)
    if found.values is not None:
        judge["confusion"] = confusion(found, judged)
    judge["by_labeller"] = {}
    for name in by_labeller:  # each labeller's pairs alone (alpha wants the judge and them all)
        mine = [r for r in judged if name in r.humans]
        each = {k: f(mine, [name]) for k, f in figures.items() if k != "alpha"}
        judge["by_labeller"][name] = {"pairs": len(mine), **each}
    return {
        "field": found.name,
        "title": found.title or found.name,
        "level": level(found),
        "items": len(rated),
        "judge_missing": len(rated) - len(judged),
        "judge": judge,
        "humans": human_figures(found, rated),
    }


def _judge_figures(
    found: LabelField, panelbench: bool
) -> dict[str, Callable[[Sequence[Rated], list[str]], float | None]]:
    """The judge's figures for this field, each of a sample of items and its labellers."""
    figures: dict[str, Callable[[Sequence[Rated], list[str]], float | None]] = {}
    if found.values is not None:

        def accuracy(sample: Sequence[Rated], names: list[str]) -> float | None:
            pairs = _pairs(sample, names)
            return sum(j == h for j, h in pairs) / len(pairs) if pairs else None

        figures["accuracy"] = accuracy
        figures["kappa"] = lambda sample, names: cohen_kappa(*_columns(_pairs(sample, names)))
    if _numeric(found):
        for name, test in (("pearson", pearson), ("spearman", spearman)):
            figures[name] = lambda sample, names, test=test: _r(test, _pairs(sample, names))
    if panelbench:
        figures["rmse"] = lambda sample, names: rmse(*_columns(_pairs(sample, names)))
    figures["alpha"] = lambda sample, names: krippendorff_alpha(
        [[_code(found, r.judge) for r in sample]]
        + [[_code(found, r.humans.get(name)) for r in sample] for name in names],
        level(found),
    )
    return figures


def human_figures(found: LabelField, rated: Sequence[Rated]) -> dict[str, Any] | None:
    """The labellers against each other, over the items two of them or more labelled.

    Returns:
        ``{"labellers", "items", "alpha", "pairs": {"a vs b": {"items", "agreement", "kappa"
        | "pearson"}}}``, or None when no item has two labels.
    """
    shared = [r for r in rated if len(r.humans) > 1]
    if not shared:
        return None
    names = sorted({name for r in shared for name in r.humans})
    table = [[_code(found, r.humans.get(name)) for r in shared] for name in names]
    pairs = {}
    for a, b in combinations(names, 2):
        both = [(r.humans[a], r.humans[b]) for r in shared if a in r.humans and b in r.humans]
        if not both:
            continue
        figures: dict[str, Any] = {
            "items": len(both),
            "agreement": sum(x == y for x, y in both) / len(both),
        }
        if found.values is not None:
            figures["kappa"] = cohen_kappa(*_columns(both))
        if _numeric(found):
            figures["pearson"] = _r(pearson, both)
        pairs[f"{a} vs {b}"] = figures
    return {
        "labellers": names,
        "items": len(shared),
        "alpha": krippendorff_alpha(table, level(found)),
        "pairs": pairs,
    }


def confusion(found: LabelField, rated: Sequence[Rated]) -> dict[str, Any]:
    """Counts of (judge, human) verdicts: ``{"values", "matrix"}``, a row per judge's value."""
    values = list(found.values or ())
    matrix = [[0] * len(values) for _ in values]
    for j, h in _pairs(rated, sorted({name for r in rated for name in r.humans})):
        matrix[values.index(j)][values.index(h)] += 1
    return {"values": values, "matrix": matrix}


def _numeric(found: LabelField) -> bool:
    """Whether correlations mean something: a scale, or ordered numbers."""
    numbers = all(isinstance(v, int | float) for v in found.values or ())
    return found.scale is not None or (found.ordinal and numbers)


def _pairs(sample: Sequence[Rated], names: Sequence[str]) -> list[tuple[Any, Any]]:
    """Every (judge, human) pair of the sample's items, of the labellers `names`."""
    return [(r.judge, r.humans[name]) for r in sample for name in names if name in r.humans]


def _columns(pairs: Sequence[tuple[Any, Any]]) -> tuple[list[Any], list[Any]]:
    return [a for a, _ in pairs], [b for _, b in pairs]


def _r(test: Callable[..., Any], pairs: Sequence[tuple[Any, Any]]) -> float | None:
    found = test(*_columns(pairs)) if pairs else None
    return None if found is None else found.r


def _p(pairs: Sequence[tuple[Any, Any]], test: Callable[..., Any]) -> dict[str, Any]:
    found = test(*_columns(pairs)) if pairs else None
    return {"p": None if found is None else found.p, "n": len(pairs)}


def _code(found: LabelField, value: Any) -> float | None:
    """A value as alpha's table takes it: a number as itself, a category by its place."""
    if value is None:
        return None
    if found.scale is not None or found.values is None:
        return float(value)
    return float(found.values.index(value))


def _bootstrap(
    items: Sequence[Rated],
    figure: Callable[[Sequence[Rated]], float | None],
    resamples: int,
    seed: int,
) -> list[float] | None:
    """A 95% percentile interval of `figure` over `resamples` draws of the items.

    The items are drawn with replacement; a draw where `figure` is undefined is left out.
    None: no draw defined it.
    """
    if not items or not resamples:
        return None
    draws = np.random.default_rng(seed).integers(0, len(items), size=(resamples, len(items)))
    values = [figure([items[i] for i in draw]) for draw in draws]
    defined = [v for v in values if v is not None]
    if not defined:
        return None
    return [float(np.percentile(defined, 2.5)), float(np.percentile(defined, 97.5))]
