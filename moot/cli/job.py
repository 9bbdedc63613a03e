"""A command as a job: its typed settings, its plan and its run.

A `Job` subclass names its `Settings` (`moot.cli.settings`), from which its command line is
derived (`moot.cli.registry.Commands.add`). `moot.cli.runtime.execute` runs it as any command:
checks, its output folder held, then `Job.run` with the settings read from the parsed command
line once (frozen). Its ``--dry-run`` (`Job.plan`) is its run against a client that never
sends (`Commands.add(..., plan=True)`, `moot.cli.runtime.plan_for`). Resources (the model
client, progress, notes) are the job's to make, with the methods below; never settings.

`ModelJob` is a job whose work is one pipeline of model calls: the client for its models, the
pipeline run to its end, then its report; a subclass says which models, which pipeline and what
its report says.
"""

from __future__ import annotations

import argparse
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from moot.cli import runtime
from moot.cli.settings import Settings

if TYPE_CHECKING:
    from moot.core.plan import Plan
    from moot.result import Result


class Job:
    """One run of a command, with its settings.

    Args:
        settings: The command's settings.
        args: The parsed command line they were read from: the run's context (its notes, its
            parser, its output folder's facts).
    """

    #: The command's settings: its flags, ``--config`` keys, stage keys and keywords.
    Settings: ClassVar[type[Settings]]

    def __init__(self, settings: Any, args: argparse.Namespace) -> None:
        self.settings = settings
        self.args = args

    @classmethod
    def of(cls, args: argparse.Namespace) -> Job:
        """The job of a parsed command line (its ``--config`` applied, its defaults resolved)."""
        return cls(cls.Settings.from_args(args), args)

    def plan(self) -> Plan:
        """What the job would do, as a `moot.core.plan.Plan`; it sends and writes nothing.

        Its run against a client that never sends, its outputs in a scratch copy
        (`moot.cli.runtime.plan_for`).

        Raises:
            ConfigError: The job calls no model (its command has no ``--dry-run``).
        """
        return runtime.plan_for(self.args)

    def run(self) -> Result:
        """Do the job: its result (exit code, outputs, summary)."""
        raise NotImplementedError

    def note(self, text: str) -> None:
        """A warning or note, kept in the result (`moot.cli.runtime.note`)."""
        runtime.note(self.args, text)

    def role(self, name: str, text: str | None = None, **options: Any) -> Any:
        """The job's one model role, `name` (`moot.cli.runtime.role_from`)."""
        return runtime.role_from(self.settings, name, text, **options)

    def limited(self, items: Sequence[Any]) -> list[Any]:
        """The first ``--limit`` items (all without it)."""
        return runtime.limited(items, self.settings)

    def finish(self, *args: Any, **kwargs: Any) -> Result:
        """The job's result, its summary table and exit code (`moot.cli.runtime.finish`)."""
        return runtime.finish(self.args, *args, **kwargs)

    def push(self, folder: Any, kind: str, result: Result) -> Result:
        """Push the finished `folder` with ``--push-to-hub`` (`moot.cli.runtime.push`)."""
        return runtime.push(self.args, folder, kind, result)


class ModelJob(Job):
    """A job whose work is one pipeline of model calls: client, pipeline, report."""

    def specs(self) -> Sequence[Any]:
        """The model specs the pipeline calls, its inputs read and checked first.

        Asked first: a job refuses its inputs here, before any model is contacted.
        """
        raise NotImplementedError

    def calls(self, client: Any, progress: Any) -> Coroutine[Any, Any, Any]:
        """The pipeline, with `client` and `progress`: what it returns, `report` reads."""
        raise NotImplementedError

    def report(self, done: Any, client: Any) -> Result:
        """The result of the pipeline's run `done`: lines, outputs, tallies and ledger."""
        raise NotImplementedError

    def judging(self, role: Any, client: Any, progress: Any) -> Any:
        """A judging evaluation's `moot.graphs.judging.Judging`: `role` judges into ``--out``."""
        from moot.graphs.judging import Judging

        given = self.settings
        return Judging(given.out, role, client, given.concurrency, given.seed, progress)

    def run(self) -> Result:
        """Make the client, run the pipeline to its end, report it."""
        client = runtime.client_for(self.args, *self.specs())
        done = runtime.run(self.calls(client, runtime.progress_for(self.args, client)))
        return self.report(done, client)
