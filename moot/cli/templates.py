"""`moot templates export DIR [NAME...]`: the built-in templates, to edit as ``--prompts DIR``."""

from __future__ import annotations

import difflib
import functools
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.result import Result


class Export(Job):
    """`moot templates export DIR [NAME...]`: built-in templates, copied to edit as overrides."""

    class Settings(opt.CommonSettings):
        """`moot templates export`'s settings."""

        folder: Path = flag(
            positional=True,
            parse=opt.output_path,
            metavar="DIR",
            help="where the copies go (then: --prompts DIR)",
        )
        names: list[str] = flag(
            [],
            positional=True,
            nargs="*",
            metavar="NAME",
            help="templates (debatune/turn.j2) or folders of them (debatune); default: all",
        )

    settings: Settings

    def run(self) -> Result:
        """Copy each named built-in to ``DIR/<name>``; one already there must be the same."""
        from moot.core.data.records import atomic_write
        from moot.core.errors import ConfigError
        from moot.prompts import template_source

        folder = Path(self.settings.folder)
        wanted = self.settings.names or [""]
        chosen = list(dict.fromkeys(name for given in wanted for name in _named(given)))
        for name in chosen:  # checked first: nothing is written when one is in the way
            path = folder / name
            if path.exists() and (not path.is_file() or path.read_text() != template_source(name)):
                raise ConfigError(f"{path}: exists and differs from the built-in; not replaced")
        for name in chosen:
            atomic_write(folder / name, functools.partial(_write, template_source(name)))
        line = f"{len(chosen)} built-in templates in {folder}: edit them, pass --prompts {folder}"
        return self.finish(lines=[line], outputs={"prompts": folder})


def _named(given: str) -> list[str]:
    """The built-ins `given` names: itself, those in the folder it names, all for ``""``."""
    from moot.core.errors import ConfigError
    from moot.prompts import builtin_names

    folder = given.rstrip("/") + "/"
    found = [n for n in builtin_names() if not given or n == given or n.startswith(folder)]
    if not found:
        near = difflib.get_close_matches(given, builtin_names(), n=1)
        meant = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError(f"{given}: no built-in template or folder of that name{meant}")
    return found


def _write(text: str, file: Any) -> None:
    file.write(text)


def register(commands: Commands) -> None:
    """Add `moot templates export`."""
    commands.add(
        "export",
        Export,
        "copy built-in templates into a folder, to edit and pass as --prompts",
        group="templates",
    )
