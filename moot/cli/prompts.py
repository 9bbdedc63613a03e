"""``--prompts DIR``: a run's own templates over the built-ins (`moot templates export` starts one).

A file ``DIR/<paper>/<name>`` replaces the built-in template or data file
``prompts/<paper>/<name>`` for the run (`moot.prompts.overriding`). Every file is checked before
the first call: it names a built-in, parses, and uses no variable the built-in is not given.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import string
from pathlib import Path
from typing import Any


def prompt_overrides(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """The command's ``--prompts`` overrides, read and checked now, in force in the block.

    Raises:
        InputError: A file of the folder that is no valid override (`read_overrides`).
    """
    from moot.prompts import overriding

    folder = getattr(args, "prompts", None)
    return (
        overriding(read_overrides(Path(folder))) if folder is not None else contextlib.nullcontext()
    )


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
    from moot.prompts import builtin_names, override_problem, template_source

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
        check = _yaml_problem if name.endswith(".yaml") else override_problem
        if problem := check(name, text):
            raise InputError(path, problem)
        yield name, text


def _yaml_problem(name: str, text: str) -> str | None:
    """A data file must hold what its built-in holds: a list of the same kind of entries.

    Strings may use only the built-in's ``str.format`` fields (the instructions' ``{side}``).
    """
    from moot.core.loader import Unreadable, load_yaml
    from moot.prompts import load_yaml as builtin

    try:
        value = load_yaml(text)
    except Unreadable as exc:
        return f"not valid YAML: {exc}"
    shipped = builtin(name)
    if not isinstance(shipped, list):  # `moot debate`'s protocol
        return (
            "a protocol is not overridden: override its templates, or run a protocol of your "
            "own with `moot protocol`"
        )
    entry = shipped[0]
    if not isinstance(value, list) or not value:
        return f"expected a list of {_kind(entry)}, as the built-in holds"
    for n, item in enumerate(value):
        keys = item.keys() if isinstance(item, dict) else None
        if type(item) is not type(entry) or (keys is not None and keys != entry.keys()):
            return f"entry {n}: expected {_kind(entry)}, as the built-in holds"
    if isinstance(entry, str):
        given = set().union(*map(_fields, shipped))
        for n, item in enumerate(value):
            try:
                extra = _fields(item) - given
            except ValueError as exc:  # a lone brace
                return f"entry {n}: {exc}"
            if extra:
                shown = ", ".join(f"{{{f}}}" for f in sorted(extra))
                return f"entry {n}: uses {shown}; the built-in is given {', '.join(sorted(given))}"
    return None


def _fields(text: str) -> set[str]:
    """The ``str.format`` fields of `text` (``""`` for a ``{}``)."""
    return {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}


def _kind(entry: Any) -> str:
    if isinstance(entry, dict):
        return "mappings with keys " + ", ".join(entry)
    return "strings" if isinstance(entry, str) else type(entry).__name__
