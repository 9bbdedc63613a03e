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
    """The default ``--out``: ``RUN/view.html`` for one RUN (``--serve`` writes none)."""
    from moot.core.errors import ConfigError

    if len(args.runs) > 1 and not args.serve:
        raise ConfigError("--out FILE is needed for more than one RUN")
    return Path(args.runs[0]) / PAGE


class View(Job):
    """`moot view RUN... [--out FILE | --serve]`: read every folder, write or serve the page."""

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
        serve: bool = flag(
            False,
            action="store_true",
            help="serve the page on 127.0.0.1 instead, following running runs, with labelling; "
            "its address (a random token in it) is printed once; Ctrl-C stops it",
        )
        port: int = flag(
            0, parse=opt.non_negative, metavar="N", help="--serve's port (default: a free one)"
        )

    settings: Settings

    def run(self) -> Result:
        """Write the page; say how many runs, items and failures it shows."""
        from moot.core.errors import ConfigError
        from moot.core.view.page import write_view

        given = self.settings
        if given.serve:
            return self.serve()
        out = Path(given.out)
        if out.is_dir():
            raise ConfigError(f"--out {out} is a folder, expected a file")
        payload = write_view(self.settings.runs, out, self.settings.debates)
        items = sum(len(run["items"]) for run in payload["runs"])
        failed = sum(item["failed"] for run in payload["runs"] for item in run["items"])
        line = f"{out}: {len(payload['runs'])} run(s), {items} items, {failed} failed"
        return self.finish(lines=[line], outputs={"page": out})

    def serve(self) -> Result:
        """Serve the page until Ctrl-C (`moot.core.view.serve.serve`)."""
        from moot.core.errors import ConfigError
        from moot.core.view.serve import serve

        given = self.settings
        if given.port > 65535:
            raise ConfigError(f"--port {given.port}: a port is at most 65535")
        if Path(given.out) != _page(self.args):
            raise ConfigError("--out writes a page; --serve serves it: choose one")
        serve(given.runs, given.debates, given.port)
        return self.finish(lines=["moot view: stopped"])


def register(commands: Commands) -> None:
    """Add `moot view`."""
    view = commands.add(
        "view",
        View,
        "one static HTML page of run folders: items, failures, filters, summary, side by side; "
        "or served live (--serve), following running runs, with labelling",
    )
    view.set_defaults(writes_in_inputs=PAGE)  # a run's page goes into its folder
