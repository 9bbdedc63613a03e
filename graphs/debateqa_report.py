"""DebateQA's combined report: P.D., D.A. and Equation 4 over several models (Xu et al., 2024).

Each model is a `moot eval pd` folder and a `moot eval da` folder of its answers. Only scores made
with one scorer, variant and window, and one judge, prompt and seed, are comparable: the folders'
claims must agree. The combined score μ_w (Equation 4) z-normalises P.D. and D.A. across the
models, so a model's rank depends on the others in the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.core.data.folders import EVAL_CLAIM, RunFolder
from moot.core.data.questions import load_partial_answers
from moot.core.data.records import atomic_write, write_json
from moot.core.errors import ConfigError
from moot.core.metrics.debateqa_combined import (
    combined,
    keep_ids,
    model_scores,
    read_judgments,
    read_scores,
)
from moot.core.tables import render_table, show


def write_report(
    pd: Sequence[Path],
    da: Sequence[Path],
    names: Sequence[str],
    k: Sequence[float],
    out: Path,
    min_povs: int | None = None,
    partial_answers: Path | None = None,
) -> str:
    """Write ``report.json`` and ``report.md`` for the models in `out`; the Markdown.

    Args:
        pd: Each model's `moot eval pd` folder.
        da: Each model's `moot eval da` folder, in the same order.
        names: Each model's name.
        k: The weights of Equation 4 to report μ_w at.
        out: The report's folder.
        min_povs: Only questions with at least this many partial answers (with
            `partial_answers`).
        partial_answers: The partial answers file `min_povs` counts in.

    Raises:
        ConfigError: Folders whose settings differ, that are not P.D. and D.A. runs, or leave
            nothing to score.
    """
    settings = {
        "pd": RunFolder.common_claim(pd, "pd", "moot eval pd"),
        "da": RunFolder.common_claim(da, EVAL_CLAIM, "moot eval da"),
    }
    for name, folders, kind in (("pd", pd, "perspective_diversity"), ("da", da, "da")):
        if settings[name].get("evaluation") != kind:
            found = settings[name].get("evaluation")
            raise ConfigError(f"{folders[0]} holds a {found} run, not moot eval {name}")
    keep = None
    if min_povs:
        keep = keep_ids(load_partial_answers(partial_answers), min_povs)
    logs = []
    for pd_dir, da_dir in zip(pd, da, strict=True):
        pair = (pd_dir / "scores.jsonl", da_dir / "judgments.jsonl")
        for log in pair:
            if not log.is_file():
                raise ConfigError(f"{log}: no such file (is it a moot eval pd/da folder?)")
        logs.append(pair)
    try:
        models = [
            model_scores(name, read_scores(pd_log), read_judgments(da_log), keep)
            for name, (pd_log, da_log) in zip(names, logs, strict=True)
        ]
        scores = {weight: combined(models, weight) for weight in k}
    except ValueError as exc:  # nothing left to score, or no spread to z-normalise by
        raise ConfigError(str(exc)) from None
    rows = [_row(index, model, scores) for index, model in enumerate(models)]
    report = {"report": "debateqa", "k": list(k), "min_povs": min_povs}
    report |= {"pd_settings": settings["pd"], "da_settings": settings["da"], "models": rows}
    write_json(out / "report.json", report)
    header = ("model", "P.D.", "n", "D.A.", "n", *(f"mu_w k={weight:g} (rank)" for weight in k))
    table = [header] + [
        (
            r["model"], show(r["pd"], 3), r["pd_answers"], show(r["da"], 3), r["da_answers"],
            *(f"{show(m['score'], 3)} ({m['rank']})" for m in r["mu_w"].values()),
        )
        for r in rows
    ]  # fmt: skip
    kept = f", questions with at least {min_povs} partial answers" if keep is not None else ""
    text = f"# DebateQA: P.D., D.A. and Equation 4{kept}\n\n{render_table(table, markdown=True)}\n"
    atomic_write(out / "report.md", lambda f: f.write(text))
    return text


def _row(index: int, model: Any, scores: dict[float, list[float]]) -> dict[str, Any]:
    """A model's line of the report: its P.D., D.A. and μ_w with its rank at each weight."""
    row = {"model": model.name, "pd": model.pd, "pd_answers": model.pd_count}
    row |= {"da": model.da, "da_answers": model.da_count, "mu_w": {}}
    for weight, values in scores.items():
        rank = 1 + sum(1 for v in values if v > values[index])
        row["mu_w"][f"{weight:g}"] = {"score": values[index], "rank": rank}
    return row
