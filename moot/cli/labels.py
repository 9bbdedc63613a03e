"""`moot report agreement`: a run's judge against people's labels (``RUN/labels``)."""

from __future__ import annotations

from pathlib import Path

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import Mark, Output
from moot.result import Result


class Agreement(Job):
    """`moot report agreement RUN... [--labels DIR] --out DIR`."""

    class Settings(opt.CommonSettings):
        """`moot report agreement`'s settings."""

        runs: list[Path] = flag(
            positional=True,
            nargs="+",
            parse=opt.input_folder,
            metavar="RUN",
            help="judged run folders (moot judge, moot eval controllability|quality|da|detector|"
            "compqa)",
        )
        labels: Path | None = flag(
            None,
            parse=opt.input_folder,
            metavar="DIR",
            help="the labels of the one RUN (default: each RUN's labels/)",
        )
        out: Path = opt.out_flag()
        resamples: int = flag(
            1000, parse=opt.non_negative, metavar="N", help="bootstrap resamples (default 1000)"
        )
        seed: int = flag(0, parse=int, help="the bootstrap's seed (default 0)")

    settings: Settings

    def run(self) -> Result:
        """Read the runs and their labels; write the report."""
        from moot.core.errors import ConfigError
        from moot.graphs.agreement_report import FILES, agreement_report, judge_table

        given = self.settings
        if given.labels is not None and len(given.runs) > 1:
            raise ConfigError("--labels DIR is one RUN's labels: give one RUN with it")
        report = agreement_report(
            given.runs, given.labels, given.out, resamples=given.resamples, seed=given.seed
        )
        lines = [
            f"{group['model']} ({group['run']}):\n{judge_table(group, markdown=False)}"
            for group in report["groups"]
        ]
        lines.append(f"wrote {', '.join(FILES.values())} to {given.out}")
        return self.finish(
            lines=lines, outputs={name: given.out / file for name, file in FILES.items()}
        )


def register(commands: Commands) -> None:
    """Add `moot report agreement`."""
    commands.add(
        "agreement",
        Agreement,
        "a judge against people's labels, and people against each other",
        "Compare each RUN's judge with the labels people gave its items (RUN/labels/<labeller>"
        ".jsonl, written by `moot view --serve` or exported from the page): accuracy, Cohen's "
        "kappa and a confusion matrix for verdicts, Pearson and Spearman with p-values for "
        "scores, RMSE x 100 on PanelBench's scale for Debatrix, Krippendorff's alpha of the judge "
        "with the labellers and of the labellers alone, 95% bootstrap intervals over items; per "
        "judge model and field. Writes report.json, report.md and chart.png into --out.",
        group="report",
        output=Output("report", (Mark("report.json", "report", "agreement"),)),
    )
