"""DEBATunE evaluations on the run engine: controllability and pairwise quality.

Each judged item goes through `moot.core.runs.run_items` into ``judgments.jsonl`` under a stable
id (judge, prompts, item), so a rerun judges only what is missing (and the request cache makes
even those free if asked before). A model call that fails for good is recorded as an error, makes
the command exit 1, and is judged again on rerun; a reply that cannot be parsed is a final
parse-failure record, counted apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.agents.debatune_judges import (
    CONTROLLABILITY,
    QUALITY,
    judge_pair,
    run_judge,
)
from moot.core.charts import NEUTRAL, PALETTE, chart, save_png
from moot.core.data.records import write_json
from moot.core.data.responses import Response, controllability_id, quality_id
from moot.core.llm.spec import Role
from moot.core.metrics import debatune as metrics
from moot.core.runs import outcome_counts
from moot.core.tables import render_table, show
from moot.graphs.judging import EvalResult, Judging, judge_identity


async def evaluate_controllability(
    responses: Sequence[Response],
    judging: Judging,
    *,
    constrained: bool = False,
) -> EvalResult:
    """Judge each response's supporting and opposing shares, not telling the judge the side.

    Args:
        responses: The responses to judge.
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.
        constrained: Ask for schema-constrained JSON.

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    identity, claim, items, texts = _controllability_items(responses, judging.role, constrained)

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        variables = {"topic": item["topic"], "arguments": texts[item["id"]]}
        judgment = await run_judge(
            judging.client,
            judging.role,
            CONTROLLABILITY,
            variables,
            seed=judging.seed,
            constrained=constrained,
        )
        return {**item, "status": "ok", "judgment": judgment.to_json()}

    run = await judging.run(items, task, claim)
    records = run.records
    judged = [r for r in records if r["status"] == "ok"]
    summary = {
        "evaluation": "controllability",
        **identity,
        **metrics.controllability(judged),
        **outcome_counts(records),
        "ledger": judging.client.ledger.to_json(),
    }
    return EvalResult(records, summary, [run.tally])


def _controllability_items(
    responses: Sequence[Response], role: Role, constrained: bool
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """The judge's identity, the folder's claim, the items and each item's judged text."""
    judge = CONTROLLABILITY
    identity = judge_identity(role, (judge.system, judge.prompt), constrained=constrained)
    items = [
        {
            "id": controllability_id(identity, r),
            "topic": r.topic,
            "side": r.side,
            "argument": r.argument,
        }
        for r in responses
    ]
    texts = {item["id"]: r.response for item, r in zip(items, responses, strict=True)}
    return identity, {"evaluation": "controllability", **identity}, items, texts


async def evaluate_quality(
    responses: Sequence[Response],
    baseline: Sequence[Response],
    judging: Judging,
    *,
    stride: int = 1,
    mask: Sequence[str] = (),
    constrained: bool = False,
) -> EvalResult:
    """Judge each response against the baseline's in both orders (win = both, or one and a tie).

    Args:
        responses: The responses to judge.
        baseline: The baseline's responses, aligned with `responses`
            (`moot.core.data.responses.align`).
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.
        stride: Judge every stride-th pair.
        mask: Words masked in both responses.
        constrained: Ask for schema-constrained JSON.

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    identity, claim, items, texts = _quality_items(
        responses, baseline, judging.role, stride, mask, constrained
    )

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        mine, theirs = texts[item["id"]]
        judged = await judge_pair(
            judging.client,
            judging.role,
            QUALITY,
            mine.instruction,
            mine.response,
            theirs.response,
            seed=judging.seed,
            mask=mask,
            constrained=constrained,
        )
        return {**item, "status": "ok", **judged.to_json()}

    run = await judging.run(items, task, claim)
    records = run.records
    judged = [r for r in records if r["status"] == "ok"]
    summary = {
        "evaluation": "quality",
        **identity,
        "stride": stride,
        **metrics.pairwise(
            [r["outcome"] for r in judged], [r["inconsistent"] for r in judged], seed=judging.seed
        ),
        **outcome_counts(records),
        "ledger": judging.client.ledger.to_json(),
    }
    return EvalResult(records, summary, [run.tally])


def _quality_items(
    responses: Sequence[Response],
    baseline: Sequence[Response],
    role: Role,
    stride: int,
    mask: Sequence[str],
    constrained: bool,
) -> tuple[
    dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, tuple[Response, Response]]
]:
    """The judge's identity, the folder's claim, the items and each item's pair of responses."""
    identity = judge_identity(role, (QUALITY.system, QUALITY.prompt), constrained=constrained)
    pairs = list(zip(responses, baseline, strict=True))[::stride]
    items = [
        {
            "id": quality_id(identity, a, b, mask),
            "topic": a.topic,
            "side": a.side,
            "argument": a.argument,
        }
        for a, b in pairs
    ]
    texts = {item["id"]: pair for item, pair in zip(items, pairs, strict=True)}
    claim = {"evaluation": "quality", **identity, "stride": stride, "mask": list(mask)}
    return identity, claim, items, texts


def write_report(result: EvalResult, out_dir: Path, sources: dict[str, str]) -> None:
    """``summary.json``, ``summary.md`` and ``chart.png`` next to ``judgments.jsonl``."""
    summary = {**result.summary, "sources": sources}
    write_json(Path(out_dir) / "summary.json", summary)
    table = render_table([("metric", "value"), *_table_rows(summary)], markdown=True)
    (Path(out_dir) / "summary.md").write_text(f"# {summary['evaluation']}\n\n{table}\n", "utf-8")
    _chart(summary, Path(out_dir) / "chart.png")


def _table_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    return [(key, show(summary[key])) for key in metrics.SUMMARY_KEYS[summary["evaluation"]]]


def _chart(summary: dict[str, Any], path: Path) -> None:
    with chart(5, 3.2) as (fig, (ax,)):
        if summary["evaluation"] == "controllability":
            labels, values = (
                ["CC_P", "CC_N", "overall"],
                [summary["cc_p"], summary["cc_n"], summary["overall"]],
            )
            ax.set_ylim(0, 1.12)  # room for the value labels
            ax.set_ylabel("share judged 100% on its side")
        else:
            labels, values = (
                ["win", "tie", "loss"],
                [summary["wins"], summary["ties"], summary["losses"]],
            )
            ax.set_ylabel("items")
            ax.margins(y=0.15)
        bars = ax.bar(labels, [v or 0 for v in values], color=[PALETTE[0], NEUTRAL, PALETTE[1]])
        ax.bar_label(bars, [show(v) for v in values], fontsize=9)
        failures = summary["parse_failures"]
        ax.set_title(
            f"{summary['evaluation']} — judge {summary['judge']} "
            f"({summary['items']} items, {failures} unparsed)",
            fontsize=9,
        )
        fig.tight_layout()
        save_png(fig, path)
