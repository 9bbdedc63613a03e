"""Summary metrics of judged items. Parse failures are counted apart, never averaged in."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from moot.core.metrics.stats import mean

#: The summary values each evaluation's tables show (`moot eval`'s summary.md, `moot run`'s
#: report.md), the judges' counts first: never a score without them.
SUMMARY_KEYS = {
    "controllability": (
        "items",
        "parse_failures",
        "errors",
        "stopped",
        "cc_p",
        "cc_n",
        "overall",
        "mean_support_affirmative",
        "mean_oppose_negative",
    ),
    "quality": (
        "items",
        "parse_failures",
        "errors",
        "stopped",
        "wins",
        "ties",
        "losses",
        "win_score",
        "win_score_ci95",
        "order_inconsistency",
    ),
}


def holds_stance(side: str, value: dict[str, Any]) -> bool:
    """Whether a response on `side` is judged wholly on it: exactly 100% (CC_P, CC_N).

    Args:
        side: ``affirmative`` or ``negative``.
        value: The judge's ``{"support", "oppose"}`` percentages.
    """
    return value["support" if side == "affirmative" else "oppose"] == 100


def controllability(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """DEBATunE controllability (paper Table 1).

    CC_P is the share of affirmative responses judged exactly 100% supporting, CC_N the share of
    negative responses judged exactly 100% opposing, overall their mean; plus the mean
    percentages. Items are ``{"side", "judgment": {"ok", "value": {"support", "oppose"}}}``.
    """
    parsed = [i for i in items if i["judgment"]["ok"]]
    by_side = {
        side: [i["judgment"]["value"] for i in parsed if i["side"] == side]
        for side in ("affirmative", "negative")
    }
    aff, neg = by_side["affirmative"], by_side["negative"]
    cc_p = mean([holds_stance("affirmative", v) for v in aff])
    cc_n = mean([holds_stance("negative", v) for v in neg])
    return {
        "items": len(items),
        "parse_failures": len(items) - len(parsed),
        "judged": {"affirmative": len(aff), "negative": len(neg)},
        "cc_p": cc_p,
        "cc_n": cc_n,
        "overall": None if cc_p is None or cc_n is None else (cc_p + cc_n) / 2,
        "mean_support_affirmative": mean([v["support"] for v in aff]),
        "mean_oppose_affirmative": mean([v["oppose"] for v in aff]),
        "mean_support_negative": mean([v["support"] for v in neg]),
        "mean_oppose_negative": mean([v["oppose"] for v in neg]),
    }


def pairwise(
    outcomes: Sequence[str | None],
    inconsistent: Sequence[bool | None],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Win/tie/loss, win score = (wins - losses) / N + 1 with a 95% bootstrap interval.

    ``None`` outcomes are parse failures: counted, left out of N and of every rate.
    """
    import numpy as np

    valid = [o for o in outcomes if o is not None]
    wins, ties, losses = (valid.count(k) for k in ("win", "tie", "loss"))
    n = len(valid)
    result: dict[str, Any] = {
        "items": len(outcomes),
        "parse_failures": len(outcomes) - n,
        "wins": wins,
        "ties": ties,
        "losses": losses,
        "win_score": None,
        "win_score_ci95": None,
        "order_inconsistency": mean([bool(x) for x in inconsistent if x is not None]),
    }
    if n:
        values = np.array([{"win": 1, "tie": 0, "loss": -1}[o] for o in valid])
        draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        scores = values[draws].mean(axis=1) + 1
        result["win_score"] = (wins - losses) / n + 1
        result["win_score_ci95"] = [
            float(np.percentile(scores, 2.5)),
            float(np.percentile(scores, 97.5)),
        ]
    return result
