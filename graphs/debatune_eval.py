"""DEBATunE evaluations as a LangGraph fan-out: controllability and pairwise quality.

    START ─Send per item→ judge ─→ END      (bounded by the run's ``max_concurrency``)

Each judged item is appended to ``judgments.jsonl`` under a stable id (judge, prompts, item), so a
rerun judges only what is missing (and the request cache makes even those free if asked before).
A model call that fails for good is recorded as an error, makes the command exit 1, and is judged
again on rerun; a reply that cannot be parsed is a final parse-failure record, counted apart.
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from moot.agents.debatune_judges import CONTROLLABILITY, QUALITY, Judge, judge_pair, run_judge
from moot.core.data.records import ResultLog, atomic_write, claim_folder, stable_id, write_json
from moot.core.data.responses import Response
from moot.core.errors import InputError, ModelCallError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.metrics import debatune as metrics
from moot.prompts import template_digest

Task = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class _EvalState(TypedDict, total=False):
    items: list[dict[str, Any]]
    results: Annotated[list[dict[str, Any]], operator.add]


@dataclass(frozen=True)
class _EvalContext:
    task: Task
    log: ResultLog


async def _judge_node(state: dict[str, Any], runtime: Runtime[_EvalContext]) -> _EvalState:
    item = state["item"]
    try:
        record = {**item, "status": "ok", **await runtime.context.task(item)}
    except ModelCallError as exc:
        record = {**item, "status": "error", "error": str(exc)}
    await asyncio.to_thread(runtime.context.log.append, record)
    return {"results": [record]}


def _fan_out(state: _EvalState) -> list[Send]:
    return [Send("judge", {"item": item}) for item in state["items"]]


@functools.cache
def _graph() -> Any:
    graph = StateGraph(_EvalState, context_schema=_EvalContext)
    graph.add_node("judge", _judge_node)
    graph.add_conditional_edges(START, _fan_out, ["judge"])
    graph.add_edge("judge", END)
    return graph.compile()


async def _run(
    items: list[dict[str, Any]],
    out_dir: Path,
    task: Task,
    concurrency: int,
    claim: dict,
    log_name: str = "judgments.jsonl",
) -> list:
    """Run `task` on the items not yet done; return every record, in item order.

    The folder is claimed for one evaluation and judge, or one answering run
    (``.moot/eval.json``), before any call, so a rerun with other settings cannot drop or mix
    earlier records. Records are appended to ``out_dir/log_name`` as they finish; at the end the
    log holds one line per id: this run's items in order, then those of earlier runs with other
    inputs (kept, so that running those inputs again costs nothing).
    """
    claim_folder(out_dir, "eval", claim, "a run with another model, judge or settings")
    log = ResultLog(Path(out_dir) / log_name)
    done = {k: r for k, r in log.load().items() if r.get("status") == "ok"}
    pending = [item for item in items if item["id"] not in done]
    if pending:
        await _graph().ainvoke(
            {"items": pending, "results": []},
            {"max_concurrency": max(1, concurrency), "recursion_limit": 10},
            context=_EvalContext(task, log),
        )
    return log.compact_current_first([item["id"] for item in items])


def _judge_identity(role: Role, judge: Judge, constrained: bool) -> dict[str, Any]:
    return {
        "judge": role.spec.name,
        "temperature": role.temperature,
        "constrained": constrained,
        "prompts": template_digest(judge.system, judge.prompt),
    }


@dataclass(frozen=True)
class EvalResult:
    """Summary and per-item records of an evaluation."""

    summary: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def errors(self) -> int:
        """Items whose judge call failed (rerun to retry)."""
        return sum(1 for r in self.records if r["status"] != "ok")

    @property
    def nothing_read(self) -> bool:
        """The judge answered, but not one of its replies could be read: nothing was measured."""
        answered = [r for r in self.records if r["status"] == "ok"]
        return bool(answered) and not any(_read(r) for r in answered)


def _read(record: dict[str, Any]) -> bool:
    """Whether a judged item's reply was read: its judgment, or a pair's outcome."""
    if "judgment" in record:
        return bool(record["judgment"]["ok"])
    return record.get("outcome") is not None


async def evaluate_controllability(
    responses: Sequence[Response],
    out_dir: Path,
    role: Role,
    client: ModelClient,
    *,
    concurrency: int = 16,
    seed: int = 0,
    constrained: bool = False,
) -> EvalResult:
    """Judge each response's supporting and opposing shares, not telling the judge the side."""
    identity = _judge_identity(role, CONTROLLABILITY, constrained)
    items = [
        {
            "id": stable_id("controllability", identity, r.key, r.response),
            "topic": r.topic,
            "side": r.side,
            "argument": r.argument,
        }
        for r in responses
    ]
    texts = {item["id"]: r.response for item, r in zip(items, responses, strict=True)}

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        variables = {"topic": item["topic"], "arguments": texts[item["id"]]}
        judgment = await run_judge(
            client, role, CONTROLLABILITY, variables, seed=seed, constrained=constrained
        )
        return {"judgment": judgment.to_json()}

    claim = {"evaluation": "controllability", **identity}
    records = await _run(items, out_dir, task, concurrency, claim)
    judged = [r for r in records if r["status"] == "ok"]
    summary = {
        "evaluation": "controllability",
        **identity,
        **metrics.controllability(judged),
        "errors": len(records) - len(judged),
        "ledger": client.ledger.to_json(),
    }
    return EvalResult(summary, records)


def align(responses: Sequence[Response], baseline: Sequence[Response], path: Path) -> None:
    """Check that two response files answer the same instructions in the same order.

    Raises:
        InputError: They differ in length or in any (topic, side, argument).
    """
    if len(responses) != len(baseline):
        raise InputError(path, f"{len(baseline)} records, but the responses have {len(responses)}")
    for index, (mine, theirs) in enumerate(zip(responses, baseline, strict=True)):
        if mine.key != theirs.key:
            raise InputError(
                path,
                f"does not align with the responses: {theirs.key} vs {mine.key}",
                f"index {index}",
            )


async def evaluate_quality(
    responses: Sequence[Response],
    baseline: Sequence[Response],
    out_dir: Path,
    role: Role,
    client: ModelClient,
    *,
    stride: int = 1,
    concurrency: int = 16,
    seed: int = 0,
    mask: Sequence[str] = (),
    constrained: bool = False,
) -> EvalResult:
    """Judge each response against the baseline's in both orders (win = both, or one and a tie)."""
    identity = _judge_identity(role, QUALITY, constrained)
    pairs = list(zip(responses, baseline, strict=True))[::stride]
    items = [
        {
            "id": stable_id("quality", identity, a.key, a.response, b.response, list(mask)),
            "topic": a.topic,
            "side": a.side,
            "argument": a.argument,
        }
        for a, b in pairs
    ]
    texts = {item["id"]: pair for item, pair in zip(items, pairs, strict=True)}

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        mine, theirs = texts[item["id"]]
        judged = await judge_pair(
            client,
            role,
            QUALITY,
            mine.instruction,
            mine.response,
            theirs.response,
            seed=seed,
            mask=mask,
            constrained=constrained,
        )
        return judged.to_json()

    claim = {"evaluation": "quality", **identity, "stride": stride, "mask": list(mask)}
    records = await _run(items, out_dir, task, concurrency, claim)
    judged = [r for r in records if r["status"] == "ok"]
    summary = {
        "evaluation": "quality",
        **identity,
        "stride": stride,
        **metrics.pairwise(
            [r["outcome"] for r in judged], [r["inconsistent"] for r in judged], seed=seed
        ),
        "errors": len(records) - len(judged),
        "ledger": client.ledger.to_json(),
    }
    return EvalResult(summary, records)


def write_report(result: EvalResult, out_dir: Path, sources: dict[str, str]) -> None:
    """``summary.json``, ``summary.md`` and ``chart.png`` next to ``judgments.jsonl``."""
    summary = {**result.summary, "sources": sources}
    write_json(Path(out_dir) / "summary.json", summary)
    rows = _table_rows(summary)
    table = "\n".join(
        ["| metric | value |", "| --- | ---: |", *(f"| {k} | {v} |" for k, v in rows)]
    )
    (Path(out_dir) / "summary.md").write_text(f"# {summary['evaluation']}\n\n{table}\n", "utf-8")
    _chart(summary, Path(out_dir) / "chart.png")


def _table_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    if summary["evaluation"] == "controllability":
        keys = [
            "items",
            "parse_failures",
            "errors",
            "cc_p",
            "cc_n",
            "overall",
            "mean_support_affirmative",
            "mean_oppose_negative",
        ]
    else:
        keys = [
            "items",
            "parse_failures",
            "errors",
            "wins",
            "ties",
            "losses",
            "win_score",
            "win_score_ci95",
            "order_inconsistency",
        ]
    return [(key, _show(summary[key])) for key in keys]


def _show(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _chart(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
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
    bars = ax.bar(labels, [v or 0 for v in values], color=["#3b7dd8", "#9aa5b1", "#d8643b"])
    for bar, value in zip(bars, values, strict=True):
        ax.annotate(
            _show(value),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    failures = summary["parse_failures"]
    ax.set_title(
        f"{summary['evaluation']} — judge {summary['judge']} "
        f"({summary['items']} items, {failures} unparsed)",
        fontsize=9,
    )
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png"), binary=True)
    plt.close(fig)
