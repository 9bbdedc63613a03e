"""DebateQA's combined score (Equation 4) of P.D. and D.A. across models, with the paper's filter.

Xu et al. 2024 (arXiv:2408.01419), §5.2 "Integrating the P.D. and D.A. metrics": a model's P.D.
is first inverted (so higher is better, like D.A.), then both are z-normalised across the
models compared, and

    mu_w = k * Z-norm(P.D.^-1) + (1 - k) * Z-norm(D.A.)                      (Equation 4)

Figure 3 ranks the 12 models by mu_w at k = 0, 0.25, 0.5, 0.75, 1. Z-norm is the standard score
the paper links (Wikipedia "Standard score": (x - mean) / population standard deviation); the
paper does not say population or sample deviation, and the choice scales every mu_w by one
factor, so it never changes a ranking.

The filter: §A.3 drops questions with fewer than three perspectives (POVs) before annotation;
`keep_ids` applies a minimum number of partial answers to a run's questions (the released test
set is already filtered, a ``moot curate`` output is not).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.questions import PartialAnswers
from moot.core.data.records import read_records
from moot.core.errors import InputError

#: Figure 3's weights.
FIGURE_3_K = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class ModelScores:
    """One model's P.D. and D.A. over the questions kept.

    Attributes:
        name: The model's name in the report.
        pd: Mean of the per-answer P.D. (each as its run's variant aggregates it).
        pd_count: Answers with a P.D.
        da: Share of answers judged dispute-aware.
        da_count: Answers with a readable D.A. judgment.
    """

    name: str
    pd: float
    pd_count: int
    da: float
    da_count: int


def keep_ids(partial_sets: Iterable[PartialAnswers], min_povs: int) -> set[str]:
    """The ids of the questions with at least `min_povs` partial answers (§A.3 uses 3)."""
    return {s.id for s in partial_sets if len(s.partial_answers) >= min_povs}


def model_scores(
    name: str,
    pd_records: Iterable[Mapping[str, Any]],
    da_records: Iterable[Mapping[str, Any]],
    keep: set[str] | None = None,
) -> ModelScores:
    """A model's mean P.D. and D.A. from ``moot eval pd`` / ``moot eval da`` records.

    Only ``ok`` records count (a P.D. window error or an unreadable D.A. reply is no score); with
    `keep`, only answers whose id is in it.

    Raises:
        ValueError: No P.D. or no D.A. is left to average.
    """
    pds = [r["pd"] for r in pd_records if r.get("status") == "ok" and _kept(r["id"], keep)]
    das = [
        r["judgment"]["label"]
        for r in da_records
        if r.get("status") == "ok" and r["judgment"].get("ok") and _kept(r["answer_id"], keep)
    ]
    if not pds or not das:
        raise ValueError(f"{name}: no {'P.D.' if not pds else 'D.A.'} score among the kept answers")
    return ModelScores(name, math.fsum(pds) / len(pds), len(pds), sum(das) / len(das), len(das))


def read_scores(path: Path) -> list[dict[str, Any]]:
    """A ``moot eval pd`` ``scores.jsonl``, the last record per id, each checked.

    Raises:
        InputError: A record without an id or status, or an ``ok`` one whose ``pd`` is not a
            finite number >= 1 (a perplexity), naming the file and line.
    """
    return _read_log(path, _pd_problem)


def read_judgments(path: Path) -> list[dict[str, Any]]:
    """A ``moot eval da`` ``judgments.jsonl``, the last record per id, each checked.

    Raises:
        InputError: A record without an id, ``answer_id`` or status, or an ``ok`` one without a
            judgment, or whose read judgment's label is not 0 or 1, naming the file and line.
    """
    return _read_log(path, _da_problem)


def _read_log(
    path: Path, problem_of: Callable[[dict[str, Any]], str | None]
) -> list[dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for place, record in read_records(path):
        if not isinstance(record, dict):
            raise InputError(path, "not a JSON object", place)
        problem = _id_problem(record, "id") or _status_problem(record) or problem_of(record)
        if problem:
            raise InputError(path, problem, place)
        records[str(record["id"])] = record
    return list(records.values())


def _id_problem(record: Mapping[str, Any], key: str) -> str | None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return f"no {key!r} (a string or an integer)"
    return None


def _status_problem(record: Mapping[str, Any]) -> str | None:
    return None if isinstance(record.get("status"), str) else "no 'status' string"


def _pd_problem(record: Mapping[str, Any]) -> str | None:
    if record["status"] != "ok":
        return None
    pd = record.get("pd")
    if isinstance(pd, bool) or not isinstance(pd, int | float) or not math.isfinite(pd) or pd < 1:
        return f"'pd' must be a finite number >= 1 (a perplexity), got {pd!r}"
    return None


def _da_problem(record: Mapping[str, Any]) -> str | None:
    if problem := _id_problem(record, "answer_id"):
        return problem
    if record["status"] != "ok":
        return None
    judgment = record.get("judgment")
    if not isinstance(judgment, dict) or not isinstance(judgment.get("ok"), bool):
        return "an ok record needs a 'judgment' object with an 'ok' true/false"
    label = judgment.get("label")
    if judgment["ok"] and (type(label) is not int or label not in (0, 1)):
        return f"a read judgment's 'label' must be 0 or 1, got {label!r}"
    return None


def z_norm(values: Sequence[float]) -> list[float]:
    """Standard scores, (x - mean) / population standard deviation.

    Raises:
        ValueError: Fewer than two values, or all equal (no spread to normalise by).
    """
    if len(values) < 2:
        raise ValueError("z-normalisation needs at least two models")
    centre = math.fsum(values) / len(values)
    spread = math.sqrt(math.fsum((v - centre) ** 2 for v in values) / len(values))
    if spread == 0:
        raise ValueError("z-normalisation needs scores that differ between the models")
    return [(v - centre) / spread for v in values]


def combined(models: Sequence[ModelScores], k: float) -> list[float]:
    """Equation 4's mu_w of each model, in order, for weight `k` in [0, 1] on P.D.^-1.

    Raises:
        ValueError: `k` outside [0, 1]; see `z_norm`.
    """
    if not 0 <= k <= 1:
        raise ValueError(f"k must be in [0, 1], got {k:g}")
    zero = [0.0] * len(models)  # a term of weight 0 need not be normalisable
    inverse = z_norm([1 / m.pd for m in models]) if k > 0 else zero
    da = z_norm([m.da for m in models]) if k < 1 else zero
    return [k * p + (1 - k) * d for p, d in zip(inverse, da, strict=True)]


def _kept(answer_id: Any, keep: set[str] | None) -> bool:
    return keep is None or str(answer_id) in keep
