"""`moot eval judge`: a judge of the user's own, declared in YAML (docs/judges.md)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import EVAL_CLAIM, Output, claim_mark
from moot.result import Result

#: The name that binds a juror to ``--judge``'s model.
JUDGE_ROLE = "judge"


def register(commands: Commands) -> None:
    """Add `moot eval judge`."""
    commands.add(
        "judge",
        CustomJudge,
        "judge items with a judge of your own (YAML: template, output fields, aggregation, jury)",
        "Judge each record of --in with the judge --spec declares: its template, its output "
        "fields, its aggregation (mean, majority, both orders) and its jury. See docs/judges.md.",
        group="eval",
        plan=True,
        output=Output("custom_judge", (claim_mark(EVAL_CLAIM),)),
    )


class CustomJudge(ModelJob):
    """`moot eval judge`: the items judged by the spec's judge (or jury), then summarised."""

    class Settings(
        opt.model_settings(
            flag="--judge",
            what="judge model (the jury's `judge`, or the judge when the spec names no models)",
            constrained="JSON",
            concurrency=16,
            unit="items",
        )
    ):
        """`moot eval judge`'s settings."""

        spec: Path = flag(parse=opt.input_file, metavar="JUDGE.yaml", help="the judge (required)")
        items: Path = flag(
            parse=opt.input_file,
            flags=("--in", "--items"),
            metavar="ITEMS.jsonl",
            help="the items to judge, JSON or JSONL records (required)",
        )
        out: Path = opt.out_flag()

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[Any, list[Any], list[Any]]:
        """The judge, its items (``--limit`` applied) and its jurors, all checked."""
        from moot.agents.judge_spec import load_judge
        from moot.core.errors import ConfigError
        from moot.core.llm.spec import Role
        from moot.graphs.custom_judge import load_items

        given = self.settings
        judge = load_judge(given.spec)
        items = self.limited(load_items(given.items, judge))
        temperature = (
            given.temperature if judge.spec.temperature is None else judge.spec.temperature
        )
        names = judge.spec.models or [JUDGE_ROLE]
        jurors = [
            Role(
                JUDGE_ROLE,
                runtime.spec_from(given, given.model if n == JUDGE_ROLE else n),
                temperature,
            )
            for n in names
        ]
        named = [role.spec.name for role in jurors]
        for index, name in enumerate(named):
            if named.index(name) != index:  # `judge` is --judge's model, named again
                raise ConfigError(f"{given.spec}: models[{index}]: {name} is in the jury twice")
        return judge, items, jurors

    def specs(self) -> list[Any]:
        """The jurors', once the spec and the items are read and checked."""
        return [role.spec for role in self.inputs[2]]

    def calls(self, client: Any, progress: Any) -> Any:
        """Judge the items with every juror, into ``--out``."""
        from moot.graphs.custom_judge import run_judge

        judge, items, jurors = self.inputs
        judging = self.judging(jurors[0], client, progress)
        constrained = any(runtime.constrained(self.settings, role) for role in jurors)
        return run_judge(items, judge, judging, jurors, constrained=constrained)

    def report(self, done: Any, client: Any) -> Result:
        """The summary written, and where the judgments are."""
        from moot.graphs.custom_judge import write_report

        given = self.settings
        out = given.out
        text = write_report(done, out, {"spec": str(given.spec), "items": str(given.items)})
        outputs = {"judgments": out / "judgments.jsonl", "summary": out / "summary.json"}
        judged = [r for r in done.records if r["status"] == "ok"]
        return self.finish(
            done.tallies,
            client.ledger,
            nothing_read=bool(judged) and done.summary["parse_failures"] == len(judged),
            lines=[text, f"judgments {outputs['judgments']}"],
            outputs=outputs,
        )
