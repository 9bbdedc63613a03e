"""The ``moot`` entry point: the parser tree, config files, and how a command ends.

Each paper's commands live in a module of their own (`moot.cli.debatune`, ...) that adds them to
the tree (`moot.cli.registry.Commands`). Expected failures (`MootError`, an `OSError` naming an
input) print one line and exit 2; a run whose work partly failed exits 1, and so does one the
machine stopped (a `WriteError`: a full disk, a read-only folder, too many open files; what
finished is kept); a run ``--budget`` stopped exits 3; Ctrl-C exits 130; ``--debug`` shows
tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

#: What a run the machine stopped says after why: nothing finished is lost.
KEPT = "what finished is kept; rerun the same command to resume once the cause is fixed"


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: every command of every paper."""
    from moot.cli import (
        berds,
        collect,
        compqa,
        debateqa,
        debatrix,
        debatune,
        judge,
        labels,
        loop,
        models,
        protocol,
        retrieval,
        templates,
        training,
        view,
    )
    from moot.cli.registry import Commands

    parser = argparse.ArgumentParser(
        prog="moot", description="Multi-LLM debate simulation: debate data, training and judges."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.set_defaults(root_parser=parser)  # `moot run` parses its stages with it
    commands = Commands(parser.add_subparsers(title="commands", metavar="COMMAND"))
    for module in (
        debatune,
        debatrix,
        debateqa,
        protocol,
        retrieval,
        berds,
        compqa,
        judge,
        labels,
        training,
        models,
        templates,
        loop,
        view,
        collect,
    ):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command_fn", None):
        parser.print_help()
        return 2
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # Ctrl-C cancels langgraph's executor with retry coroutines it never started; its warning
    # would bury the one-line "interrupted" message
    warnings.filterwarnings(
        "ignore", "coroutine 'arun_with_retry' was never awaited", RuntimeWarning
    )
    from moot.cli.runtime import execute, with_config
    from moot.core.errors import (
        BudgetReached,
        MootError,
        WriteError,
        machine_failure,
        os_problem,
    )
    from moot.core.redaction import redact
    from moot.result import STOPPED, show

    try:
        result = execute(with_config(parser, argv, args))
        show(result, getattr(args, "quiet", False))
        return result.exit_code
    except MootError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"moot: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except WriteError as exc:  # the machine refused a file moot writes: not the user's input
        if args.debug:
            traceback.print_exc()
        print(f"moot: {exc}; {KEPT}", file=sys.stderr)
        return 1
    except OSError as exc:  # an input moot cannot read; or the machine's limits, anywhere
        machine = machine_failure(exc)  # too many open files, ...
        if exc.filename is None and not machine:
            raise
        if args.debug:
            traceback.print_exc()
        if machine:
            where = f"{exc.filename}: " if exc.filename is not None else ""
            print(f"moot: {where}{os_problem(exc)}; {KEPT}", file=sys.stderr)
            return 1
        print(f"moot: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except BudgetReached as exc:  # a call outside the run engine (which stops cleanly itself)
        if args.debug:
            traceback.print_exc()
        print(f"moot: {exc}; rerun with a larger --budget to go on", file=sys.stderr)
        return STOPPED
    except KeyboardInterrupt:
        print("moot: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
