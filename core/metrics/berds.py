"""BERDS retrieval-diversity metrics (MRecall@k, Precision@k) and perspective-detector scores.

A question's detections form a support matrix: ``support[p][d]`` is 1 when the detector judged
that the d-th retrieved document supports perspective p, 0 when it did not, and None when its
reply could not be parsed. As in BERDS (timchen0618/berds, eval/eval.py):

* MRecall@k = 1 iff every perspective is supported by some top-k document; with more
  perspectives than k, iff at least k distinct perspectives are;
* Precision@k = share of the top-k documents that support any perspective.

A question with any unparsed detection among its top-k is counted apart, never averaged in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from moot.core.errors import ConfigError
from moot.core.metrics.stats import mean

Support = Sequence[Sequence[int | None]]


def _top_k(support: Support, k: int) -> list[list[int | None]]:
    if k < 1:
        raise ConfigError(f"k must be a positive integer, got {k}")
    if not support:
        raise ConfigError("a question needs at least one perspective")
    short = min(len(row) for row in support)
    if short < k:
        raise ConfigError(f"k = {k} is larger than the {short} retrieved documents")
    return [list(row[:k]) for row in support]


def mrecall_at_k(support: Support, k: int) -> int:
    """1 iff the top-k documents cover every perspective (or k of them, if there are more).

    Raises:
        ConfigError: k < 1, no perspectives, or fewer than k documents.
        ValueError: An unparsed (None) detection in the top k.
    """
    rows = _complete(_top_k(support, k))
    covered = sum(1 for row in rows if any(row))
    return int(covered >= k) if len(rows) > k else int(covered == len(rows))


def precision_at_k(support: Support, k: int) -> float:
    """Share of the top-k documents that support at least one perspective.

    Raises:
        ConfigError: k < 1, no perspectives, or fewer than k documents.
        ValueError: An unparsed (None) detection in the top k.
    """
    rows = _complete(_top_k(support, k))
    return sum(1 for d in range(k) if any(row[d] for row in rows)) / k


def berds_summary(instances: Mapping[str, Support], k: int) -> dict[str, Any]:
    """Per-question and mean MRecall@k and Precision@k; questions with unparsed detections apart.

    Args:
        instances: Support matrices by question id.
        k: The cutoff (every question must have at least k documents).

    Returns:
        ``questions``, ``scored``, ``parse_failures`` (questions set apart), ``mrecall``,
        ``precision`` (means over scored questions, None when none scored) and ``per_question``
        (``{id: {"mrecall", "precision"}}``, None values for questions set apart).
    """
    per_question: dict[str, dict[str, Any]] = {}
    for qid, support in instances.items():
        rows = _top_k(support, k)
        if any(v is None for row in rows for v in row):
            per_question[qid] = {"mrecall": None, "precision": None, "parse_failure": True}
        else:
            per_question[qid] = {
                "mrecall": mrecall_at_k(rows, k),
                "precision": precision_at_k(rows, k),
                "parse_failure": False,
            }
    scored = [s for s in per_question.values() if not s["parse_failure"]]
    return {
        "k": k,
        "questions": len(per_question),
        "scored": len(scored),
        "parse_failures": len(per_question) - len(scored),
        "mrecall": mean([s["mrecall"] for s in scored]),
        "precision": mean([s["precision"] for s in scored]),
        "per_question": per_question,
    }


def detector_scores(pairs: Sequence[tuple[int, int | None]]) -> dict[str, Any]:
    """Accuracy, precision, recall and F1 (positive = Yes = label 1) of a perspective detector.

    Args:
        pairs: ``(gold label, predicted label or None when the reply did not parse)``.

    Returns:
        Counts (``pairs``, ``scored``, ``parse_failures``, ``tp``, ``fp``, ``fn``, ``tn``) and
        ``accuracy``, ``precision``, ``recall``, ``f1`` over parsed pairs (None when undefined;
        F1 is 0 when there are positives or Yes predictions but no true positive, as BERDS).
    """
    scored = [(gold, pred) for gold, pred in pairs if pred is not None]
    tp = sum(1 for gold, pred in scored if gold == 1 and pred == 1)
    fp = sum(1 for gold, pred in scored if gold == 0 and pred == 1)
    fn = sum(1 for gold, pred in scored if gold == 1 and pred == 0)
    tn = len(scored) - tp - fp - fn
    return {
        "pairs": len(pairs),
        "scored": len(scored),
        "parse_failures": len(pairs) - len(scored),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "accuracy": (tp + tn) / len(scored) if scored else None,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None,
    }


def _complete(rows: list[list[int | None]]) -> list[list[int]]:
    if any(v is None for row in rows for v in row):
        raise ValueError("unparsed detections cannot be scored; count the question apart")
    return rows  # type: ignore[return-value]
