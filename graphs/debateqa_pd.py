"""DebateQA Perspective Diversity (P.D.) of answers, on the run engine.

Each answer is scored against its partial answers by a local causal LM
(`moot.core.metrics.perspective_diversity.PerspectiveDiversityScorer`), one at a time off the
event loop, through `moot.core.runs.run_items` into ``scores.jsonl``. A record is finished while
its answer and partial answers are unchanged (its ``input`` key), whatever its status: a partial
answer longer than the scorer's window is a final error, kept and reported, never retried. The
folder is claimed for one scorer and its settings (``.moot/pd.json``); ``summary.json`` and
``summary.md`` are written from the records.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.folders import RunFolder
from moot.core.data.questions import Answer, PartialAnswers
from moot.core.data.records import ResultLog, atomic_write, stable_id, write_json
from moot.core.errors import InputError
from moot.core.metrics.perspective_diversity import (
    PartialTooLongError,
    PerspectiveDiversityScorer,
    scorer_identity,
)
from moot.core.runs import Progress, Tally, run_items
from moot.core.tables import render_table, show
from moot.prompts import overridden

#: What a claimed P.D. folder holds otherwise, for the refusal.
HOLDS = "P.D. scores from another scorer or settings"


def match_answers(
    answers: Sequence[Answer],
    partial_sets: Sequence[PartialAnswers],
    answers_path: Path,
    partials_path: Path,
) -> tuple[list[tuple[Answer, PartialAnswers]], list[str]]:
    """Pair answers with their partial answers by id; also return the ids no answer uses.

    Raises:
        InputError: An answer has no partial answers (naming how many and the first id).
    """
    by_id = {p.id: p for p in partial_sets}
    missing = [a.id for a in answers if a.id not in by_id]
    if missing:
        raise InputError(
            answers_path,
            f"{len(missing)} of {len(answers)} answers have no partial answers in {partials_path}",
            f"id {missing[0]}",
        )
    used = {a.id for a in answers}
    return [(a, by_id[a.id]) for a in answers], [p.id for p in partial_sets if p.id not in used]


@dataclass(frozen=True)
class PDRun:
    """What `score_answers` did.

    Attributes:
        records: ``scores.jsonl``'s records of the answers, in answer order (``status`` ``ok``
            with the `PDResult` fields, or ``error`` with ``error``).
        tallies: What its `run_items` call did.
        window: The scorer's window in tokens, when a scorer was built (something was scored).
    """

    records: list[dict[str, Any]]
    tallies: list[Tally]
    window: int | None

    @property
    def scored(self) -> int:
        """Answers scored by this run (the others were kept from earlier runs)."""
        return sum(t.done + t.failed for t in self.tallies)


async def score_answers(
    pairs: Sequence[tuple[Answer, PartialAnswers]],
    out_dir: Path,
    make_scorer: Callable[[], PerspectiveDiversityScorer],
    claim: dict[str, Any],
    *,
    progress: Progress | None = None,
) -> PDRun:
    """Score the answers whose P.D. is not yet in ``out_dir/scores.jsonl``.

    The folder is claimed for one scorer and its settings (``.moot/pd.json``) before any
    scoring, so a rerun with other settings cannot mix scores; a record whose answer or partial
    answers changed is scored again. The scorer is built only when something is left to score,
    and before a new claim is written: a scorer or window that is refused leaves nothing behind.

    Args:
        pairs: Answers and their partial answers (`match_answers`).
        out_dir: Output folder.
        make_scorer: Builds the scorer (called at most once).
        claim: The folder's settings: scorer identity, variant, window.
        progress: The command's progress bar.

    Raises:
        ConfigError: The folder holds scores from another scorer, variant or window; the scorer
            cannot be built (from `make_scorer`).
    """
    folder = RunFolder(out_dir)
    claimed = folder.claim_path("pd").exists()
    if claimed:  # refuse other settings before loading a scorer
        folder.claim("pd", claim, HOLDS)
    keys = {a.id: stable_id(a.text, [p.text for p in s.partial_answers]) for a, s in pairs}
    texts = {a.id: (a.text, s.partial_answers) for a, s in pairs}
    scorers: list[PerspectiveDiversityScorer] = []

    async def score(item: dict[str, Any]) -> dict[str, Any]:
        if not scorers:  # the first pending answer: only now is a scorer worth loading
            scorers.append(await asyncio.to_thread(make_scorer))
            folder.claim("pd", claim, HOLDS)  # only once the scorer is accepted
        try:
            result = await asyncio.to_thread(scorers[0].score, *texts[item["id"]])
        except PartialTooLongError as exc:  # deterministic: kept, reported, not retried
            return {**item, "status": "error", "error": str(exc)}
        return {**item, "status": "ok", **result.to_json()}

    # the question and the points of view travel with each score, for `moot view` to show
    items = [
        {"id": a.id, "input": keys[a.id], "question": s.question,
         "povs": [p.pov for p in s.partial_answers]}
        for a, s in pairs
    ]  # fmt: skip
    run = await run_items(
        items,
        score,
        ResultLog(Path(out_dir) / "scores.jsonl"),
        unit="answers",
        finished=lambda record: record.get("input") == keys.get(record["id"]),
        failed=lambda record: False,  # a window error is final: counted in the summary, not retried
        progress=progress,
    )
    if not claimed:
        folder.claim("pd", claim, HOLDS)  # nothing was pending: claim it now
    return PDRun(run.records, [run.tally], scorers[0].window if scorers else None)


def pd_claim(
    scorer: str, variant: str, max_length: int | None, dtype: str | None, backend: str
) -> dict[str, Any]:
    """What makes P.D. scores comparable, claimed for a `moot eval pd` folder.

    Args:
        scorer: The scorer model (its identity is claimed: `scorer_identity`).
        variant: The P.D. variant (``mean``, ``sum``, ``released``).
        max_length: The scorer's window, if given.
        dtype: The scorer's precision (None: auto).
        backend: ``transformers`` or ``vllm``.
    """
    claim = {
        "evaluation": "perspective_diversity",
        "scorer": scorer_identity(scorer),
        "variant": variant,
        "max_length": max_length,
    }
    # float32 through transformers was the only setting before these options: claims without
    # them stay valid, and any other precision or engine scores differently, so it is claimed
    if dtype != "float32":
        claim["dtype"] = dtype or "auto"
    if backend != "transformers":
        claim["backend"] = backend
    if overrides := overridden():  # `--prompts`: the scorer's turn is another text
        claim["prompt_overrides"] = overrides
    return claim


def summarize(records: Sequence[dict[str, Any]], **about: Any) -> dict[str, Any]:
    """Mean, median, count, truncated and error counts of per-answer records."""
    scores = [r["pd"] for r in records if r["status"] == "ok"]
    return {
        "evaluation": "perspective_diversity",
        **about,
        "lower_is_better": True,
        "count": len(scores),
        "mean": statistics.fmean(scores) if scores else None,
        "median": statistics.median(scores) if scores else None,
        "min": min(scores, default=None),
        "max": max(scores, default=None),
        "truncated": sum(1 for r in records if r.get("truncated")),
        "errors": len(records) - len(scores),
    }


def write_report(summary: dict[str, Any], out_dir: Path) -> None:
    """``summary.json`` and a one-table ``summary.md`` in `out_dir`."""
    write_json(Path(out_dir) / "summary.json", summary)
    combine = "sum" if summary["variant"] == "sum" else "mean"
    numbers = [show(summary[key], 4, "g") for key in ("mean", "median", "min", "max")]
    table = render_table(
        [
            ("answers", "mean P.D.", "median", "min", "max", "truncated", "errors"),
            (summary["count"], *numbers, summary["truncated"], summary["errors"]),
        ],
        left=0,
        markdown=True,
    )
    text = (
        f"# Perspective Diversity ({summary['variant']}: {combine} of perplexities, lower is "
        f"better)\n\nscorer `{summary['scorer']}`, window {summary['window']} tokens\n\n{table}\n"
    )
    atomic_write(Path(out_dir) / "summary.md", lambda f: f.write(text))
