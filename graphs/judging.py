"""What every judging evaluation shares: its judging, the judge's identity, its result, its files.

DEBATunE's controllability and quality judges, DebateQA's D.A., BERDS's detector and CompQA's
rubric judge each take a `Judging` (who judges, where, how the run goes), claim its folder for
one judge and its settings, judge their items through the run engine
(`moot.core.runs.run_claimed`) into ``judgments.jsonl``, and return an `EvalResult`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.records import atomic_write, write_json
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import Progress, Record, RunOutput, RunResult, Task, run_claimed
from moot.core.tables import render_table, show
from moot.prompts import template_digest


@dataclass(frozen=True)
class Judging:
    """Who judges, where the judgments go and how the run goes: what every evaluation takes.

    Attributes:
        out_dir: The output folder: ``judgments.jsonl`` and the evaluation's summary files,
            claimed for the judge and the evaluation's settings.
        role: The judge.
        client: The model layer.
        concurrency: Items judged at once.
        seed: The base sampling seed.
        progress: The command's progress bar.
    """

    out_dir: Path
    role: Role
    client: ModelClient
    concurrency: int = 16
    seed: int = 0
    progress: Progress | None = None

    async def run(
        self,
        items: Sequence[Record],
        task: Task,
        claim: dict[str, Any],
        unit: str = "judgments",
    ) -> RunResult:
        """Judge `items` with `task` into `out_dir`, claimed for `claim` (`run_claimed`).

        Raises:
            ConfigError: `out_dir` is claimed for other settings.
        """
        return await run_claimed(
            items,
            task,
            self.out_dir,
            claim,
            unit=unit,
            concurrency=self.concurrency,
            progress=self.progress,
        )


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
