"""A judging run: every debate × repeat through the Debatrix state machine, resumable.

The judgments go through the run engine (`moot.core.runs.run_items`): each finished one
(complete, incomplete, or failed) is appended to ``judgments.jsonl`` under a stable id (settings,
debate, repeat). A rerun skips complete and incomplete judgments, retries
failed ones, resumes interrupted ones from their checkpoint (``.moot/checkpoints.sqlite``), and pays
for no model call twice (the request cache). The folder is claimed for one set of settings first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.agents.debatrix_judges import (
    FRAMEWORKS,
    Dimension,
    Extractor,
    Framework,
    choose_dimensions,
)
from moot.core.data.debates import Debate, judgment_id
from moot.core.data.folders import RunFolder
from moot.core.data.records import ResultLog, write_json
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import STOPPED, Progress, Tally, run_items
from moot.graphs.checkpoints import durability_for, open_checkpoints, run_thread
from moot.graphs.debatrix_judging import (
    JudgeContext,
    build_judge_graph,
    initial_state,
    recursion_limit,
)
from moot.graphs.debatrix_report import write_report
from moot.prompts import template_digest

PROMPTS = (
    "debatrix/system.j2",
    "debatrix/analyze_system.j2",
    "debatrix/memory.j2",
    "debatrix/judge_system.j2",
    "debatrix/panel_system.j2",
    "debatrix/panel_user.j2",
    "debatrix/compress_system.j2",
    "debatrix/score_speech.j2",
    "debatrix/score_debater.j2",
    "debatrix/comment_debater.j2",
    "debatrix/score_debater_released.j2",
    "debatrix/winner.j2",
    "debatrix/format_instructions.j2",
    "debatrix/fix.j2",
    "core/repair.j2",
    "debatrix/dimensions_1v1.yaml",
    "debatrix/dimensions_bp.yaml",
)


@dataclass(frozen=True)
class JudgeSettings:
    """How debates are judged. Changing any field changes the judgments' ids.

    Args:
        role: The judge's model (its spec carries the context window).
        framework: How to judge (see `moot.agents.debatrix_judges.FRAMEWORKS`).
        dimensions: Dimension names for split frameworks (default: the paper's per format).
        weights: Panel weights overriding the shipped ones.
        seed: Base sampling seed; repeat r uses ``seed + r``.
        constrained: Ask for schema-constrained JSON when extracting scores and winners.
        analysis_tokens: Completion budget of a speech analysis.
        judgment_tokens: Completion budget of a judgment.
        extraction_tokens: Completion budget of an extraction (a score, a debater's comment,
            a winner).
        scoring: ``paper`` (a debater's comment, then a second call for its score) or
            ``released`` (both in one call); see `moot.agents.debatrix_judges.Extractor`.
        repair: ``released`` (the released fix prompt, a fresh message, up to 3 times) or
            ``moot`` (moot's follow-up turn, once): how an extraction's reply that does not
            parse is asked again.
    """

    role: Role
    framework: Framework
    dimensions: tuple[str, ...] | None = None
    weights: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    constrained: bool = False
    analysis_tokens: int = 1024
    judgment_tokens: int = 1536
    extraction_tokens: int = 384
    scoring: str = "paper"
    repair: str = "released"

    def plan(self, debates: Sequence[Debate]) -> dict[str, tuple[Dimension, ...]]:
        """The dimensions judged per debate format present in `debates`.

        Raises:
            ConfigError: An unknown dimension or weight.
        """
        formats = sorted({debate.format for debate in debates})
        return {
            fmt: choose_dimensions(self.framework, fmt, self.dimensions, self.weights)
            for fmt in formats
        }

    def identity(self) -> dict[str, Any]:
        """What makes two runs' judgments the same judgments (endpoints excluded)."""
        return {
            "framework": self.framework.name,
            "dimensions": list(self.dimensions) if self.dimensions else None,
            "weights": self.weights,
            "judge": self.role.spec.name,
            "temperature": self.role.temperature,
            "context_window": self.role.spec.context_window,
            "seed": self.seed,
            "constrained": self.constrained,
            "analysis_tokens": self.analysis_tokens,
            "judgment_tokens": self.judgment_tokens,
            "extraction_tokens": self.extraction_tokens,
            "scoring": self.scoring,
            "repair": self.repair,
            "prompts": template_digest(*PROMPTS),
        }


@dataclass
class JudgeRunSummary:
    """What a judging run did.

    Attributes:
        out_dir: The output folder.
        planned: Judgments this run was asked for.
        already_done: Of those, judgments finished by an earlier run.
        records: The judgments, in debate then repeat order.
        tallies: What the run's `run_items` call did.
    """

    out_dir: Path
    planned: int = 0
    already_done: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    tallies: list[Tally] = field(default_factory=list)

    def count(self, status: str) -> int:
        """Judgments with this status (``complete``, ``incomplete`` or ``error``)."""
        return sum(1 for r in self.records if r["status"] == status)

    @property
    def parse_failures(self) -> int:
        """Scores and winners that could not be read, over every judgment."""
        return sum(_readings(r)[1] for r in self.records)

    @property
    def nothing_read(self) -> bool:
        """Judgments completed, but not one score or winner in them could be read."""
        complete = [r for r in self.records if r["status"] == "complete"]
        return bool(complete) and not any(_readings(r)[0] for r in complete)


async def judge_debates(
    debates: Sequence[Debate],
    out_dir: Path,
    settings: JudgeSettings,
    client: ModelClient,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    report_format: str = "md",
    progress: Progress | None = None,
    sources: Mapping[str, str] | None = None,
) -> JudgeRunSummary:
    """Judge (or resume judging) every debate `repeats` times into `out_dir`.

    Args:
        debates: The debates, validated.
        out_dir: Output folder; see docs/schemas.md for its files.
        settings: How to judge.
        client: The model layer.
        repeats: Judgments per debate (repeat r samples with seed ``seed + r``).
        concurrency: Debates judged at once.
        report_format: ``md`` or ``html`` for the per-judgment reports.
        progress: The command's progress bar.
        sources: What the debates were read from (``{"debates": path}``), kept in the summary.

    Raises:
        ConfigError: `out_dir` holds judgments made with other settings, or bad dimensions.
    """
    out_dir = Path(out_dir)
    identity = settings.identity()
    plans = settings.plan(debates)  # fails before any call
    RunFolder(out_dir).claim("judge", identity, HOLDS)
    items = _items(debates, identity, repeats)
    async with open_checkpoints(out_dir) as saver:
        graph, mode = build_judge_graph(saver), durability_for(client)

        async def judge(item: dict[str, Any]) -> dict[str, Any]:
            debate, repeat = item["debate"], item["repeat"]
            context = JudgeContext(
                client=client,
                role=settings.role,
                debate=debate,
                framework=settings.framework,
                dimensions=plans[debate.format],
                extractor=Extractor(
                    client,
                    settings.role,
                    settings.seed + repeat,
                    settings.constrained,
                    max_tokens=settings.extraction_tokens,
                    scoring=settings.scoring,
                    repair=settings.repair,
                ),
                window=client.context_window(settings.role.spec),
                analysis_tokens=settings.analysis_tokens,
                judgment_tokens=settings.judgment_tokens,
            )
            return await _judge_one(graph, context, item["id"], repeat, mode)

        # the log keeps exactly this run's judgments, which `moot eval panelbench` reads;
        # judgments of debates no longer asked for stay in the checkpoints, so asking again
        # costs no call
        result = await run_items(
            items,
            judge,
            ResultLog(out_dir / "judgments.jsonl"),
            unit="judgments",
            concurrency=concurrency,
            finished=_finished,
            progress=progress,
            keep_others=False,
        )
    summary = JudgeRunSummary(
        out_dir,
        planned=result.tally.planned,
        already_done=result.tally.skipped,
        # --budget: a judgment not done has no record, report or count but `stopped`
        records=[r for r in result.records if r["status"] != STOPPED],
        tallies=[result.tally],
    )
    by_id = {debate.id: debate for debate in debates}
    for record in summary.records:
        write_report(record, by_id[record["debate"]], out_dir / "reports", report_format)
    write_json(out_dir / "summary.json", _summary_json(summary, identity, client, sources or {}))
    return summary


#: What a judge folder holds otherwise, in the refusal of other settings.
HOLDS = "judgments made with other settings"


def _items(debates: Sequence[Debate], identity: dict[str, Any], repeats: int) -> list[dict]:
    """One judgment per debate and repeat, with its stable id."""
    return [
        {"id": judgment_id(identity, debate, repeat), "debate": debate} | {"repeat": repeat}
        for debate in debates
        for repeat in range(repeats)
    ]


def _finished(record: dict[str, Any]) -> bool:
    """A judgment needs no rerun once complete, or incomplete (its prompt never fits)."""
    return record["status"] in ("complete", "incomplete")


async def _judge_one(
    graph: Any, context: JudgeContext, item_id: str, repeat: int, durability: str
) -> dict[str, Any]:
    """Run (or resume) one judgment and return its record."""
    debate = context.debate
    state, error = await run_thread(
        graph,
        item_id,
        initial_state(debate, context.framework, context.dimensions),
        context=context,
        steps=recursion_limit(len(debate.speeches)),
        durability=durability,
        done=lambda saved: bool(saved.get("final") or saved.get("incomplete")),
    )
    record: dict[str, Any] = {
        "id": item_id,
        "debate": debate.id,
        "repeat": repeat,
        "framework": context.framework.name,
        "format": debate.format,
        "judge": context.role.spec.name,
        "pro": list(debate.pro),
        "con": list(debate.con),
    }
    if error:
        return {
            **record,
            "status": "error",
            "reason": str(error),
            "dimensions": {},
            "final": None,
            "usage": state.get("usage", {}),
        }
    incomplete = state.get("incomplete")
    return {
        **record,
        "status": "incomplete" if incomplete else "complete",
        "reason": incomplete,
        "dimensions": {} if incomplete else state["dimensions"],
        "final": None if incomplete else state["final"],
        "usage": state.get("usage", {}),
    }


def _readings(record: dict[str, Any]) -> tuple[int, int]:
    """(read, unread) in one judgment, over speech scores, debater scores and winners."""
    verdicts = list(record.get("dimensions", {}).values())
    # A split framework's panel judges anew; the others adopt their only dimension's verdict.
    if record.get("final") and FRAMEWORKS[record["framework"]].split:
        verdicts.append(record["final"])
    total = unread = 0
    for verdict in verdicts:
        parts = [*verdict.get("speeches", []), *verdict["debaters"].values()]
        total += len(parts) + 1
        unread += sum("parse_failure" in part for part in parts)
        unread += verdict["winner_failure"] is not None
    return total - unread, unread


def _summary_json(
    summary: JudgeRunSummary,
    identity: dict[str, Any],
    client: ModelClient,
    sources: Mapping[str, str],
) -> dict:
    winners: dict[str, int] = {}
    for record in summary.records:
        if record["status"] == "complete":
            name = record["final"]["winner"] or "unparsed"
            winners[name] = winners.get(name, 0) + 1
    usage = [r.get("usage", {}) for r in summary.records]
    return {
        **identity,
        "judgments": len(summary.records),
        "complete": summary.count("complete"),
        "incomplete": summary.count("incomplete"),
        "errors": summary.count("error"),
        "stopped": sum(t.stopped for t in summary.tallies),
        "parse_failures": summary.parse_failures,
        "final_winners": winners,
        "largest_prompt": max((u.get("largest_prompt", 0) for u in usage), default=0),
        "prompt_tokens": sum(u.get("prompt_tokens", 0) for u in usage),
        "completion_tokens": sum(u.get("completion_tokens", 0) for u in usage),
        "ledger": client.ledger.to_json(),
        "sources": dict(sources),
    }
