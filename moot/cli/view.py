"""`moot view`: one self-contained HTML page for one or more run folders."""

from __future__ import annotations

import argparse
from pathlib import Path

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.result import Result

#: The page of one run, in its folder (`moot run` writes its own there too).
PAGE = "view.html"


def _page(args: argparse.Namespace) -> Path:
    """The default ``--out``: ``RUN/view.html`` for one RUN."""
    from moot.core.errors import ConfigError

    if len(args.runs) > 1:
        raise ConfigError("--out FILE is needed for more than one RUN")
    return Path(args.runs[0]) / PAGE


class View(Job):
    """`moot view RUN... [--out FILE]`: read every folder, then write the page atomically."""

    class Settings(opt.CommonSettings):
        """`moot view`'s settings."""

        runs: list[str] = flag(
            positional=True,
            nargs="+",
            parse=opt.input_source,
            metavar="RUN",
            help="run folders moot made (several: side by side)",
        )
        debates: Path | None = flag(
            None,
            parse=opt.input_path,
            metavar="FILE",
            help="the debates a `moot judge` RUN judged (its --debates): motions, speeches, gold",
        )
        out: Path = opt.out_flag(
            "the HTML file", metavar="FILE", default="RUN/view.html for one RUN", resolve=_page
        )

    settings: Settings

    def run(self) -> Result:
        """Write the page; say how many runs, items and failures it shows."""
        from moot.core.errors import ConfigError
        from moot.core.view.page import write_view

        out = Path(self.settings.out)
        if out.is_dir():
            raise ConfigError(f"--out {out} is a folder, expected a file")
        payload = write_view(self.settings.runs, out, self.settings.debates)
        items = sum(len(run["items"]) for run in payload["runs"])
        failed = sum(item["failed"] for run in payload["runs"] for item in run["items"])
        line = f"{out}: {len(payload['runs'])} run(s), {items} items, {failed} failed"
        return self.finish(lines=[line], outputs={"page": out})


def register(commands: Commands) -> None:
    """Add `moot view`."""
    view = commands.add(
        "view",
        View,
        "one static HTML page of run folders: items, failures, filters, summary, side by side",
    )
    view.set_defaults(writes_in_inputs=PAGE)  # a run's page goes into its folder
