"""`moot collect RUN`: a ``--batch`` run's command again, to collect its batches and go on.

The run's journal (`moot.core.llm.batch.BatchBook`) keeps the command line and the folder it
ran in; collecting is running it again there: its items resume, each request a recorded batch
holds waits on that batch instead of being submitted again, and the run goes on from there.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.result import Result


class Collect(Job):
    """`moot collect RUN`: wait for a ``--batch`` run's batches and finish its work."""

    class Settings(opt.CommonSettings):
        """`moot collect`'s settings."""

        run: Path = flag(
            positional=True,
            parse=opt.input_path,
            metavar="RUN",
            help="the output folder (or file) of a --batch run",
        )
        no_wait: bool = flag(
            False,
            action="store_true",
            help="look once: take what ended, submit the next step, exit 0 (default: wait)",
        )

    settings: Settings

    def run(self) -> Result:
        """Run the recorded command again in its folder, with or without ``--no-wait``."""
        from moot.cli.runtime import execute, with_config
        from moot.core.errors import ConfigError
        from moot.core.llm.batch import BatchBook, book_path

        run = Path(self.settings.run)
        journal = book_path(run, run.is_dir())
        if not journal.is_file():
            raise ConfigError(f"{run}: no batches recorded there (not the output of a --batch run)")
        command = BatchBook(journal).command
        if not command or not command.get("argv"):
            raise ConfigError(
                f"{run}: its batches were submitted from Python (moot.api): call the same "
                "function again to collect them"
            )
        argv = [word for word in command["argv"] if word != "--no-wait"]
        argv += ["--no-wait"] if self.settings.no_wait else []
        parser = self.args.root_parser
        with contextlib.chdir(command["cwd"]):  # its paths are relative to where it ran
            return execute(with_config(parser, argv, parser.parse_args(argv)))


def register(commands: Commands) -> None:
    """Add `moot collect`."""
    commands.add(
        "collect",
        Collect,
        "collect a --batch run's batches: its command again, waiting for them (or --no-wait)",
    )
