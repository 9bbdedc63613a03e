"""What every judging evaluation shares: the judge's identity, its result, its summary files.

DEBATunE's controllability and quality judges, DebateQA's D.A., BERDS's detector and CompQA's
rubric judge each claim a folder for one judge and its settings, judge their items through the
run engine (`moot.core.runs.run_claimed`) into ``judgments.jsonl``, and return an `EvalResult`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.folders import EVAL_CLAIM, RunFolder
from moot.core.data.records import atomic_write, write_json
from moot.core.llm.spec import Role
from moot.core.llm.tokens import count_message_tokens
from moot.core.plan import Plan, items_of
from moot.core.runs import HOLDS, RunOutput
from moot.core.tables import render_table, show
from moot.prompts import template_digest


def judge_identity(role: Role, templates: Sequence[str], **settings: Any) -> dict[str, Any]:
    """What makes two judge runs the same: judge, temperature, `settings`, prompt digest.

    Its key order is that of the claim files and summaries: judge, temperature, the settings in
    the order given, prompts.
    """
    return {
        "judge": role.spec.name,
        "temperature": role.temperature,
        **settings,
        "prompts": template_digest(*templates),
    }


def plan_judgments(
    items: Sequence[dict[str, Any]],
    out_dir: Path,
    claim: dict[str, Any],
    role: Role,
    calls: Callable[[dict[str, Any]], Sequence[list[dict[str, str]]]],
    *,
    stage: str,
    max_tokens: int,
    unit: str = "judgments",
) -> Plan:
    """What a judging evaluation would do (`run_claimed` on `items`), reading `out_dir` only.

    Args:
        items: The items the evaluation would hand to `run_claimed`.
        out_dir: Its output folder; refused if claimed for other settings, as a run would.
        claim: The settings the run would claim the folder for.
        role: The judge.
        calls: The messages of each call an item makes (both orders of a pair: two).
        stage: The calls' ledger stage.
        max_tokens: Each call's completion budget (the estimate's output tokens).
        unit: What an item is, plural.

    Raises:
        ConfigError: `out_dir` is claimed for other settings.
    """
    RunFolder(out_dir).check_claim(EVAL_CLAIM, claim, HOLDS)
    tally, pending = items_of(unit, items, Path(out_dir) / "judgments.jsonl")
    plan = Plan([tally])
    for item in pending:
        for messages in calls(item):
            plan.add_calls(
                role.name, stage, role.spec, 1, count_message_tokens(messages), max_tokens
            )
    return plan


@dataclass(frozen=True)
class EvalResult(RunOutput):
    """An evaluation's judgment records (item order), its summary, and what its runs did."""

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


def write_summary(result: EvalResult, out_dir: Path, sources: dict[str, str]) -> str:
    """Write ``summary.json`` and ``summary.md`` atomically; return the Markdown.

    The table lists every summary value but the ledger and sources (D.A., BERDS, detector).
    """
    summary = {**result.summary, "sources": sources}
    write_json(Path(out_dir) / "summary.json", summary)
    rows = [
        (key, show(value, 4))
        for key, value in summary.items()
        if key not in ("ledger", "sources", "evaluation")
    ]
    table = render_table([("metric", "value"), *rows], markdown=True)
    text = f"# {summary['evaluation']}\n\n{table}\n"
    atomic_write(Path(out_dir) / "summary.md", lambda f: f.write(text))
    return text
