"""A command's settings: one frozen pydantic model, from which its command line is derived.

Each setting is declared once, as a field: its type, its default (none: the command cannot run
without it) and, in `flag`, how it is given on the command line (parse function, metavar, help,
group, choices, action). `Settings.add_to` derives the command's argparse flags from the fields,
so ``--config`` keys, `moot run` stage keys and `moot.api` keywords, which are read through that
parser (`moot.cli.config.option_defaults`), follow from the same declaration, with the same
checks and one-line errors. Shared settings are mixins a command's settings inherit from
(`moot.cli.options`); a parameterised one (the default ``--concurrency``, the model's flag) is
made by a function that returns the class.

The flags come in the order of the fields: a class's own first, in their order, then those of
each base in turn (a field a class redeclares stays in its base's place), and an argument group
is made where its first flag comes. That is the order of ``--help``.

    >>> class Greet(Settings):  # doctest: +SKIP
    ...     name: str = flag(help="who to greet")  # required: ``--name`` must be given
    ...     times: int = flag(1, parse=positive, metavar="N", help="how often (default 1)")
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

_UNSET: Any = object()


@dataclass(frozen=True)
class Flag:
    """How a setting is given on the command line (argparse's own names, mostly).

    Attributes:
        parse: The argparse ``type``: it checks and converts one value (its path kind, if it is
            one of `moot.cli.options.PATH_KINDS`, is how `moot.cli.runtime.check_paths` checks it).
        flags: The option strings (default: ``--name-with-dashes``, ``-k`` for one letter).
        metavar: The value's name in ``--help``.
        help: The help text.
        group: The argument group's title (None: the command's own options).
        choices: The values it accepts.
        action: The argparse action (``store_true``, `moot.cli.options.Endpoints`, ...).
        nargs: How many values it takes (``+``: a list; ``?``: maybe none, then `const`).
        const: The value of the bare flag, with ``nargs="?"``.
        positional: A positional argument, not a flag.
        suppress: Left out of the namespace unless given (``--debug``: the root parser's).
        parser: Facts the command's parser carries besides (``out_folder`` of ``--out``).
    """

    parse: Callable[[str], Any] | None = None
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    help: str | None = None
    group: str | None = None
    choices: tuple[Any, ...] | None = None
    action: Any = None
    nargs: str | None = None
    const: Any = None
    positional: bool = False
    suppress: bool = False
    parser: Mapping[str, Any] = field(default_factory=dict)


def flag(default: Any = _UNSET, **how: Any) -> Any:
    """A setting's field: its `default` (none: required) and `Flag` `how` it is given."""
    info = Field() if default is _UNSET else Field(default)
    info.metadata.append(Flag(**how))
    return info


def flag_of(info: FieldInfo) -> Flag | None:
    """The `Flag` of a field (None: a setting with no flag of its own)."""
    return next((m for m in info.metadata if isinstance(m, Flag)), None)


class Settings(BaseModel):
    """A command's settings, typed and frozen: what its command line, config or keywords say.

    Resources (clients, retrievers, progress, notes) are not settings: a job makes them.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Settings:
        """The settings in a parsed command line (its ``--config`` applied, defaults resolved)."""
        given = {name: getattr(args, name) for name in cls.model_fields if hasattr(args, name)}
        return cls.model_validate(given)

    @classmethod
    def flag_order(cls) -> list[str]:
        """The fields in command-line order: own first, then each base's (module docstring)."""
        order: dict[str, None] = {}

        def walk(klass: type) -> None:
            bases = [b for b in klass.__bases__ if issubclass(b, Settings)]
            inherited = {name for base in bases for name in base.model_fields}
            for name in klass.__dict__.get("__annotations__", {}):
                if name in cls.model_fields and name not in inherited:
                    order.setdefault(name)
            for base in bases:
                walk(base)

        walk(cls)
        return list(order)

    @classmethod
    def flag(cls, name: str) -> Flag | None:
        """The flag of setting `name`, as its latest declaration with one says.

        A class may so redeclare a base's setting with a default alone (``timeout: float |
        None = 60.0``): its flag stays the base's.
        """
        found = (
            flag_of(klass.model_fields[name])
            for klass in cls.__mro__
            if issubclass(klass, Settings) and name in klass.model_fields
        )
        return next(filter(None, found), None)

    @classmethod
    def flags(cls) -> Iterator[tuple[str, Flag]]:
        """Each setting with a flag, and its flag, in command-line order."""
        for name in cls.flag_order():
            how = cls.flag(name)
            if how is not None:
                yield name, how

    @classmethod
    def option(cls, name: str) -> str:
        """How setting `name` is named to the user: its longest flag, or a positional's metavar."""
        how = cls.flag(name)
        assert how is not None, name
        if how.positional:
            return how.metavar or name
        return max(_names(name, how), key=len)

    @classmethod
    def add_to(cls, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        """Add the settings' flags to `parser` (a command's); mark those it cannot run without.

        A required flag is checked once ``--config`` is applied (`moot.cli.runtime
        .check_required`), not by argparse; a missing ``--out`` is said first (where a command
        writes before what it reads), then the others in their order.
        """
        groups: dict[str, argparse._ArgumentGroup] = {}
        needed = []
        for name in cls.flag_order():
            info, how = cls.model_fields[name], cls.flag(name)
            if how is None:  # not on the command line: the command's own value
                parser.set_defaults(**{name: info.default})
                continue
            where: Any = parser
            if how.group is not None:
                if how.group not in groups:
                    groups[how.group] = parser.add_argument_group(how.group)
                where = groups[how.group]
            where.add_argument(*_names(name, how), **_argparse(name, how, info))
            if info.is_required() and not how.positional:
                needed.append(name)
            parser.set_defaults(**how.parser)
        if needed:
            required(parser, *sorted(needed, key=lambda name: name != "out"))
        return parser


def required(parser: argparse.ArgumentParser, *dests: str) -> None:
    """Mark flags the command needs, on the command line or in ``--config``."""
    marked = parser.get_default("required_flags") or ()
    parser.set_defaults(required_flags=(*marked, *dests))


def _names(name: str, how: Flag) -> tuple[str, ...]:
    if how.positional:
        return (name,)
    if how.flags:
        return how.flags
    return (f"-{name}",) if len(name) == 1 else (f"--{name.replace('_', '-')}",)


def _argparse(name: str, how: Flag, info: FieldInfo) -> dict[str, Any]:
    """The `add_argument` keywords of a field: only those it sets (argparse's own defaults)."""
    given: dict[str, Any] = {
        "type": how.parse,
        "action": how.action,
        "nargs": how.nargs,
        "const": how.const,
        "choices": how.choices,
        "metavar": how.metavar,
        "help": how.help,
    }
    kwargs = {key: value for key, value in given.items() if value is not None}
    if not how.positional:
        kwargs["dest"] = name
        if how.suppress:
            kwargs["default"] = argparse.SUPPRESS
        elif not info.is_required():
            kwargs["default"] = info.default
    return kwargs
