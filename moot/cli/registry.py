"""The command tree: each paper's CLI module adds its commands to a `Commands`."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moot.cli.job import Job
    from moot.core.data.folders import Output

#: The command groups (``moot eval ...``) and their help.
GROUPS = {
    "eval": "judge and score outputs (DEBATunE, PanelBench, DebateQA, BERDS, CompQA, your own)",
    "report": "aggregate judged outputs into reports",
    "data": "build training datasets: CompQA distillation, mixing, preference pairs",
    "train": "SFT, full or LoRA (trl + peft), on one process or many",
    "models": "model utilities",
    "templates": "the built-in prompt templates, to override with --prompts DIR",
}


class Commands:
    """The command tree each paper's CLI module adds its commands to.

    Args:
        subparsers: The root parser's subcommands.
    """

    def __init__(self, subparsers: Any) -> None:
        self._root = subparsers
        self._groups: dict[str, Any] = {}

    def add(
        self,
        name: str,
        job: type[Job],
        help: str,  # noqa: A002 - argparse's own name for it
        description: str | None = None,
        *,
        group: str | None = None,
        aliases: Sequence[str] = (),
        plan: Callable[[argparse.Namespace], Any] | bool = False,
        output: Output | None = None,
    ) -> argparse.ArgumentParser:
        """Add command `name` (under `group`, e.g. ``eval``), the `job` it runs; its parser.

        Its flags are derived from the job's settings (`moot.cli.settings.Settings.add_to`).

        A model-calling command says it can `plan`: ``--dry-run`` then runs it against a client
        that never sends, its outputs in a scratch copy (`moot.cli.runtime.plan_for`), for what
        it would do as a `moot.core.plan.Plan`. (A function instead of True gives that plan
        itself: `moot run`'s, its stages' plans composed.)

        A command whose output folder is a kind of its own gives its `output`: how `moot view`
        shows it, and how its folders from before owner marks are known
        (`moot.core.data.folders.register_output`, under the command's name).
        """
        from moot.cli.options import dry_run_option
        from moot.core.data.folders import register_output

        where = self._group(group) if group else self._root
        parser = where.add_parser(
            name, help=help, description=description or help, aliases=list(aliases)
        )
        parser.set_defaults(command_fn=_run(job), command_parser=parser, plan_fn=plan or None)
        if plan:
            dry_run_option(parser)
        job.Settings.add_to(parser)
        parser.set_defaults(settings_class=job.Settings)
        if output is not None:
            register_output(parser.prog, output)
        return parser

    def _group(self, name: str) -> Any:
        if name not in self._groups:
            parser = self._root.add_parser(name, help=GROUPS[name], description=GROUPS[name])
            parser.set_defaults(command_fn=lambda _: _help(parser))
            self._groups[name] = parser.add_subparsers(title="commands", metavar="COMMAND")
        return self._groups[name]


def _run(job: type[Job]) -> Callable[[argparse.Namespace], Any]:
    """`job`'s run of a parsed command line (`moot.cli.runtime.execute` calls it)."""
    return lambda args: job.of(args).run()


def _help(parser: argparse.ArgumentParser) -> Any:
    """A group alone (`moot eval`): its help, and exit 2."""
    from moot.result import Result

    parser.print_help()
    return Result(parser.prog, exit_code=2)
