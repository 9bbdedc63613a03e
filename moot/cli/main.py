"""The ``moot`` entry point: the parser tree, config files, and how a command ends.

Each paper's commands live in a module of their own (`moot.cli.debatune`, ...) that adds them to
the tree (`moot.cli.registry.Commands`). Expected failures (`MootError`, an `OSError` naming a
file) print one line and exit 2; a run whose work partly failed exits 1; Ctrl-C exits 130;
``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    """The whole parser: every command of every paper."""
    from moot.cli import (
        berds,
        compqa,
        debateqa,
        debatrix,
        debatune,
        models,
        retrieval,
        training,
        view,
    )
    from moot.cli.registry import Commands

    parser = argparse.ArgumentParser(
        prog="moot", description="Multi-LLM debate simulation: debate data, training and judges."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = Commands(parser.add_subparsers(title="commands", metavar="COMMAND"))
    for module in (debatune, debatrix, debateqa, retrieval, berds, compqa, training, models, view):
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
    from moot.cli.config import apply_config
    from moot.cli.runtime import check_paths, check_required, own_out
    from moot.core.errors import MootError

    try:
        if getattr(args, "config", None):
            check_paths(args, "config")
            args = apply_config(parser, argv, args)
        check_required(args)
        check_paths(args)
        with own_out(args):  # the output folder: this command's, and this run's alone
            return int(args.command_fn(args) or 0)
    except MootError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"moot: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output path that is a file, a folder we may not write, a full disk
        if exc.filename is None:
            raise
        if args.debug:
            traceback.print_exc()
        print(f"moot: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("moot: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
