"""`moot view`: one self-contained HTML page for one or more run folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.registry import Commands
from moot.result import Result


def register(commands: Commands) -> None:
    """Add `moot view`."""
    view = commands.add(
        "view",
        run_view,
        "one static HTML page of run folders: items, failures, filters, summary, side by side",
    )
    view.add_argument(
        "runs",
        nargs="+",
        type=opt.input_source,
        metavar="RUN",
        help="run folders moot made (several: side by side)",
    )
    view.add_argument(
        "--debates",
        type=opt.input_path,
        metavar="FILE",
        help="the debates a `moot judge` RUN judged (its --debates): motions, speeches, gold",
    )
    opt.out_option(
        view, "the HTML file", metavar="FILE", default="RUN/view.html for one RUN", resolve=_page
    )
    view.set_defaults(writes_in_inputs=PAGE)  # a run's page goes into its folder
    opt.common_options(view)


#: The page of one run, in its folder (`moot run` writes its own there too).
PAGE = "view.html"


def _page(args: argparse.Namespace) -> Path:
    """The default ``--out``: ``RUN/view.html`` for one RUN."""
    from moot.core.errors import ConfigError

    if len(args.runs) > 1:
        raise ConfigError("--out FILE is needed for more than one RUN")
    return Path(args.runs[0]) / PAGE


def run_view(args: argparse.Namespace) -> Result:
    """`moot view RUN... [--out FILE]`: read every folder, then write the page atomically."""
    from moot.core.errors import ConfigError
    from moot.core.view.page import write_view

    out = Path(args.out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder, expected a file")
    payload = write_view(args.runs, out, args.debates)
    items = sum(len(run["items"]) for run in payload["runs"])
    failed = sum(item["failed"] for run in payload["runs"] for item in run["items"])
    line = f"{out}: {len(payload['runs'])} run(s), {items} items, {failed} failed"
    return runtime.finish(args, lines=[line], outputs={"page": out})
