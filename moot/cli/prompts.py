"""``--prompts DIR``: a run's own templates over the built-ins; `moot templates export`.

A file ``DIR/<paper>/<name>`` replaces the built-in template or data file
``prompts/<paper>/<name>`` for the run (`moot.prompts.overriding`). Every file is checked before
the first call: it names a built-in, parses, and uses no variable the built-in is not given.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import functools
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.result import Result


def prompt_overrides(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """The command's ``--prompts`` overrides, read and checked now, in force in the block.

    Raises:
        InputError: A file of the folder that is no valid override (`read_overrides`).
    """
    from moot.prompts import overriding

    folder = getattr(args, "prompts", None)
    return overriding(read_overrides(Path(folder))) if folder is not None else _nothing()


@contextlib.contextmanager
def _nothing() -> Any:
    yield


def read_overrides(folder: Path) -> Any:
    """The `moot.prompts.Overrides` in `folder`: each file by its path under it.

    A file equal to its built-in replaces nothing (a folder from `moot templates export` whose
    other files were left alone overrides only those edited). Hidden files are left out.

    Raises:
        InputError: A file names no built-in template (with the nearest name), is not UTF-8
            text, does not parse (Jinja or YAML), or uses a variable the built-in is not given.
    """
    from moot.prompts import Overrides, overriding

    with overriding(None):  # compared with the built-ins, whatever is in force
        return Overrides(dict(_read(folder)))


def _read(folder: Path) -> Any:
    from moot.core.errors import InputError
    from moot.prompts import builtin_names, template_source

    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in path.relative_to(folder).parts) or path.is_dir():
            continue
        if name not in builtin_names():
            near = difflib.get_close_matches(name, builtin_names(), n=1)
            meant = f" (did you mean {near[0]!r}?)" if near else ""
            raise InputError(path, f"no built-in template of that name{meant}")
        if not path.is_file():
            raise InputError(path, "not a regular file")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text") from None
        if text == template_source(name):
            continue
        check = _yaml_problem if name.endswith(".yaml") else _jinja_problem
        if problem := check(name, text):
            raise InputError(path, problem)
        yield name, text


def _jinja_problem(name: str, text: str) -> str | None:
    from moot.prompts import override_problem

    return override_problem(name, text)


def _yaml_problem(name: str, text: str) -> str | None:
    """A data file must hold what its built-in holds: a list of the same kind of entries."""
    from moot.core.loader import Unreadable, load_yaml
    from moot.prompts import load_yaml as builtin

    try:
        value = load_yaml(text)
    except Unreadable as exc:
        return f"not valid YAML: {exc}"
    entry = builtin(name)[0]
    if not isinstance(value, list) or not value:
        return f"expected a list of {_kind(entry)}, as the built-in holds"
    for n, item in enumerate(value):
        keys = item.keys() if isinstance(item, dict) else None
        if type(item) is not type(entry) or (keys is not None and keys != entry.keys()):
            return f"entry {n}: expected {_kind(entry)}, as the built-in holds"
    return None


def _kind(entry: Any) -> str:
    if isinstance(entry, dict):
        return "mappings with keys " + ", ".join(entry)
    return "strings" if isinstance(entry, str) else type(entry).__name__


class Export(Job):
    """`moot templates export DIR [NAME...]`: built-in templates, copied to edit as overrides."""

    class Settings(opt.OutputSettings):
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
