"""Debatrix's commands: `moot judge`, `moot eval panelbench` (Liang et al., ACL 2024)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job, ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import Mark, Output, claim_mark
from moot.result import Result

FRAMEWORK_NAMES = ("debatrix", "non-iterative", "chronological", "dimensional", "direct")
PAPER_WINDOW = 16385  # ChatGPT's, gpt-3.5-turbo-0125 (paper, Sec. 5.1)


class Judge(ModelJob):
    """`moot judge`: each debate judged per dimension (Debatrix), or with a baseline framework."""

    class Settings(
        opt.model_settings(
            flag="--judge",
            what="judge model",
            note="the paper used ChatGPT and GPT-4",
            constrained="JSON scores and winners",
            concurrency=4,
            unit="debates",
        )
    ):
        """`moot judge`'s settings."""

        debates: Path = flag(
            parse=opt.input_path, help="debates: JSON/JSONL file or DebateArt folder (required)"
        )
        out: Path = opt.out_flag()
        framework: str = flag("debatrix", choices=FRAMEWORK_NAMES)
        dimensions: tuple[str, ...] | None = flag(
            None,
            parse=opt.names,
            metavar="A,B,...",
            help="dimensions of split frameworks (default argument,source,language; "
            "BP: argument,support,clash,language)",
        )
        weights: dict[str, float] | None = flag(
            None, parse=opt.weights, metavar="A=W,...", help="panel weights (default: the paper's)"
        )
        scoring: str = flag(
            "paper",
            choices=("paper", "released"),
            help="a debater's comment, then a second call for its 1-10 integer score (paper, "
            "Sec. 5.1), or both in one call (the released code)",
        )
        repair: str = flag(
            "released",
            choices=("released", "moot"),
            help="a score or winner reply that does not parse: the released fix prompt as a "
            "fresh message, up to 3 times (the released code), or moot's follow-up turn, once",
        )
        repeats: int = flag(1, parse=opt.positive, help="judgments per debate")
        analysis_tokens: int = flag(1024, parse=opt.positive, metavar="N")
        judgment_tokens: int = flag(1536, parse=opt.positive, metavar="N")
        extraction_tokens: int = flag(384, parse=opt.positive, metavar="N")
        report: str = flag("md", choices=("md", "html"), help="report format")
        context_window: int | None = flag(
            None,
            parse=opt.positive,
            metavar="TOKENS",
            group="model calls",
            help=f"the judge's context window (default {PAPER_WINDOW}, ChatGPT's in the paper; "
            "local/*: its server's)",
        )

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[Any, int, Any]:
        """The debates (``--limit`` applied), how many were skipped, the judging settings."""
        from moot.agents.debatrix_judges import FRAMEWORKS
        from moot.core.data.debates import load_debates
        from moot.graphs.debatrix_run import JudgeSettings

        given = self.settings
        if given.context_window is None and not given.model.startswith("local/"):
            # the window Debatrix is built for (Sec. 5.1)
            given = given.model_copy(update={"context_window": PAPER_WINDOW})
        debates = load_debates(given.debates)
        skipped = debates.skipped  # `moot debate` records that did not finish
        debates = self.limited(debates)
        role = runtime.role_from(given, "judge")
        settings = JudgeSettings(
            role=role,
            framework=FRAMEWORKS[given.framework],
            dimensions=given.dimensions,
            weights=given.weights or {},
            seed=given.seed,
            constrained=runtime.constrained(given, role),
            analysis_tokens=given.analysis_tokens,
            judgment_tokens=given.judgment_tokens,
            extraction_tokens=given.extraction_tokens,
            scoring=given.scoring,
            repair=given.repair,
        )
        settings.plan(debates)  # bad dimensions fail before the judge is contacted
        return debates, skipped, settings

    def specs(self) -> list[Any]:
        """The judge's."""
        return [self.inputs[2].role.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Judge the debates."""
        from moot.graphs.debatrix_run import judge_debates

        debates, skipped, settings = self.inputs
        if skipped:
            self.note(f"note: {skipped} debate(s) not judged: their status is not ok")
        return judge_debates(
            debates,
            self.settings.out,
            settings,
            client,
            repeats=self.settings.repeats,
            concurrency=self.settings.concurrency,
            report_format=self.settings.report,
            progress=progress,
            sources={"debates": str(self.settings.debates)},
        )

    def report(self, done: Any, client: Any) -> Result:
        """What was judged, where it is, what failed."""
        planning = getattr(self.args, "planning", None)
        if planning is not None:  # a dry run: what its stand-ins could not fit
            window = self.inputs[2].role.spec.context_window
            for _ in range(done.count("incomplete")):
                planning.noted(
                    "{calls} judgments are left incomplete: a prompt of theirs does not fit the "
                    f"judge's {window}-token window with every earlier reply at its full budget "
                    "(their later calls are not counted)"
                )
        out = self.settings.out
        outputs = {
            "judgments": out / "judgments.jsonl",
            "summary": out / "summary.json",
            "reports": out / "reports",
        }
        lines = [
            f"judged {len(done.records)}: {done.count('complete')} complete, "
            f"{done.count('incomplete')} incomplete (prompt over the context window), "
            f"{done.count('error')} failed; {done.parse_failures} unparsed scores or winners",
            f"judgments {outputs['judgments']}\nsummary   {outputs['summary']}",
            f"reports   {outputs['reports']}",
        ]
        failures = [
            f"moot: failed {record['debate']}: {record['reason']}"
            for record in done.records
            if record["status"] == "error"
        ]
        return self.finish(
            done.tallies,
            client.ledger,
            nothing_read=done.nothing_read,
            lines=lines,
            messages=failures,
            outputs=outputs,
        )


def _panelbench_out(args: argparse.Namespace) -> Path:
    """`moot eval panelbench`'s default folder: ``DIR.panelbench`` beside the first DIR's run.

    Outside every run folder: the judge's, or the `moot run` folder holding it
    (`moot.core.data.folders.beside_runs`).
    """
    from moot.core.data.folders import beside_runs

    return beside_runs(args.predictions[0], ".panelbench")


class Panelbench(Job):
    """`moot eval panelbench`: `moot judge` outputs scored against PanelBench gold."""

    class Settings(opt.CommonSettings):
        """`moot eval panelbench`'s settings."""

        predictions: list[Path] = flag(
            parse=opt.input_folder,
            nargs="+",
            metavar="DIR",
            help="`moot judge` output folders, one per framework (required)",
        )
        gold: Path = flag(
            parse=opt.input_path,
            help="debates with gold: JSON/JSONL or DebateArt folder (required)",
        )
        out: Path = opt.out_flag(
            default="DIR.panelbench beside the first DIR's run", resolve=_panelbench_out
        )
        tie_margin: float = flag(
            3.0,
            parse=float,
            metavar="POINTS",
            help="source and language scores within this are a tie (default 3, the paper's)",
        )
        labels: Path | None = flag(
            None,
            parse=opt.input_folder,
            metavar="RUN",
            help="a labelled `moot judge` RUN: its people's labels (RUN/labels) are the gold, "
            "in place of --gold's, whose debates are still read",
        )

    settings: Settings

    def run(self) -> Result:
        """Score the predictions, write the report."""
        from moot.core.errors import ConfigError
        from moot.core.metrics.panelbench import (
            TIE_MARGINS,
            evaluate_panelbench,
            write_panelbench_report,
        )

        given = self.settings
        if not given.tie_margin >= 0:  # also rejects nan
            raise ConfigError(f"--tie-margin must be 0 or more, got {given.tie_margin:g}")
        margins = {name: given.tie_margin for name in TIE_MARGINS}
        summary = evaluate_panelbench(
            given.predictions, given.gold, margins=margins, labels=given.labels
        )
        out = given.out
        write_panelbench_report(summary, out)
        outputs = {"summary": out / "summary.json", "chart": out / "chart.png"}
        lines = [
            (out / "summary.md").read_text(encoding="utf-8"),
            f"summary {outputs['summary']}\nchart   {outputs['chart']}",
        ]
        return self.finish(lines=lines, outputs=outputs)


def register(commands: Commands) -> None:
    """Add Debatrix's commands."""
    commands.add(
        "judge",
        Judge,
        "judge debates speech by speech (Debatrix) or with a baseline framework",
        "Judge each debate per dimension, speech by speech with memory (Debatrix), and combine "
        "the dimensions in a panel; or use one of the paper's baselines. Debates come from a "
        "JSON/JSONL file (moot's schema, PanelBench, or a `moot debate` run's debates.jsonl) or "
        "a DebateArt folder. Writes judgments.jsonl, summary.json and a report per judgment; "
        "reruns resume.",
        plan=True,
        output=Output("judge", (claim_mark("judge"),)),
    )
    commands.add(
        "panelbench",
        Panelbench,
        "score `moot judge` outputs against PanelBench gold (DebateArt RMSE, BP accuracy)",
        "RMSE x 100 of final and dimensional verdicts against DebateArt gold, from debater "
        "scores and from named winners; BP accuracy, completion and winners' positions. "
        "Unparsed, incomplete, failed and unjudged items are counted, never imputed.",
        group="eval",
        output=Output("panelbench", (Mark("summary.json", "evaluation", "panelbench"),)),
    )
