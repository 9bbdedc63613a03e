"""``--config FILE.yaml``: option values from a file, under the command line.

The keys are the command's flag names (``api-base`` or ``api_base`` for ``--api-base``, ``k`` for
``-k``); each value is checked and converted exactly as the flag's own parser would, a list for a
flag that takes several values. The command line is then parsed again with those values as
defaults, so a flag given there still wins (a repeatable flag, such as ``--mask``, adds to the
file's list). A flag of `moot.cli.options.INLINE_MAPPINGS` (``prices``) takes a mapping too, the
content of the file it would name. An unknown key (with the closest flag name), or a value the
flag would refuse, is an `InputError` naming the file and the key.

The keys and their checks are the parser's own (`moot.cli.options` declares each flag once),
not a second schema: argparse's types and choices validate a file's values as they validate the
command line's.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from moot.cli.options import INLINE_MAPPINGS, Endpoints
from moot.core.data.records import refuse_surrogates
from moot.core.errors import InputError

_LISTS = ("+", "*")


def apply_config(
    parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace
) -> argparse.Namespace:
    """Parse `argv` again with the values of ``args.config`` as the command's defaults.

    Raises:
        InputError: The file cannot be read, is not a mapping, or holds an unknown key or a
            value its flag refuses.
    """
    values = option_defaults(args.command_parser, read_config(args.config), args.config)
    args.command_parser.set_defaults(**values)
    return parser.parse_args(argv)


def read_config(path: str | Path) -> dict[str, object]:
    """A ``--config`` file's mapping of option names to values, as written.

    Raises:
        InputError: The file cannot be read, or is not a mapping.
    """
    from moot.core.loader import Unreadable, load_yaml

    try:
        values = load_yaml(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read config: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:
        raise InputError(path, f"cannot read config: {exc.problem}", exc.place) from None
    refuse_surrogates(path, None, values)
    if not isinstance(values, dict):
        raise InputError(path, "expected a mapping of option names to values")
    return values


def option_defaults(
    command: argparse.ArgumentParser,
    values: dict,
    path: object,
    where: str = "",
    positionals: bool = False,
) -> dict[str, object]:
    """`values` (flag name → value) as ``dest`` → value, each converted as its flag would be.

    Also used by `moot run` for each stage of a recipe.

    Args:
        command: The command's parser.
        values: The file's mapping.
        path: The file, for errors.
        where: What in the file holds the mapping, for errors (``stage debate: ``).
        positionals: Accept positional arguments too, by ``dest`` (``overrides`` of
            `moot train sft`); the caller passes them on the command line it parses.

    Raises:
        InputError: An unknown key, or a value its flag refuses.
    """
    flags = {flag: action for action in command._actions for flag in action.option_strings}
    if positionals:
        flags |= {a.dest: a for a in command._actions if not a.option_strings}
    defaults = {}
    for key, value in values.items():
        name = str(key).replace("_", "-")
        action = flags.get(f"--{name}") or flags.get(f"-{name}") or flags.get(str(key))
        if action is None or action.dest in ("config", "help"):
            from moot.core.validation import did_you_mean

            known = [flag.lstrip("-") for flag in flags if flag not in ("--config", "--help")]
            raise InputError(path, f"{where}unknown option {key!r}{did_you_mean(name, known)}")
        value = _value(path, f"{where}option {key!r}", action, value)
        if name.startswith("no-") and isinstance(action, argparse.BooleanOptionalAction):
            value = not value  # `no-constrained: true` is --no-constrained
        defaults[action.dest] = value
    return defaults


def _value(path: object, key: str, action: argparse.Action, value: object) -> object:
    """`value` checked and converted as the flag's own parser would."""
    if action.nargs == 0:  # an on/off flag
        if not isinstance(value, bool):
            raise InputError(path, f"{key}: expected true or false")
        return value
    if value is None:
        if action.default is not None:  # e.g. `rounds:` with nothing after it
            raise InputError(path, f"{key}: needs a value")
        return None
    if action.nargs == "?" and isinstance(value, bool):  # `dense: true` is the bare flag
        return action.const if value else None
    if isinstance(value, dict) and action.dest in INLINE_MAPPINGS:
        return value  # read where it is used (`moot.cli.runtime.prices_from`)
    if action.nargs in _LISTS or isinstance(action, argparse._AppendAction | Endpoints):
        items = value if isinstance(value, list) else [value]
        return [_one(path, key, action, item) for item in items]
    if isinstance(value, list | dict):
        raise InputError(path, f"{key}: expected one value, got a list or mapping")
    return _one(path, key, action, value)


def _one(path: object, key: str, action: argparse.Action, value: object) -> object:
    try:
        converted = (action.type or str)(str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise InputError(path, f"{key}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        shown = ", ".join(map(str, action.choices))
        raise InputError(path, f"{key}: {value!r} is not one of {shown}")
    return converted


def command_parser(
    parser: argparse.ArgumentParser, words: Sequence[str]
) -> argparse.ArgumentParser | None:
    """The parser of command `words` (``("eval", "quality")``) in the whole `parser`, or None.

    A group (``eval``) is no command: None.
    """
    for word in words:
        choices = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
            None,
        )
        if not choices or word not in choices:
            return None
        parser = choices[word]
    return parser if parser.get_default("command_parser") is parser else None


def positional_argv(command: argparse.ArgumentParser, defaults: dict[str, object]) -> list[str]:
    """The command line that gives the positional arguments in `defaults`, taken out of it.

    `defaults` is `option_defaults`' (with ``positionals``).
    """
    actions = {action.dest: action for action in command._actions}
    positional = [dest for dest in defaults if not actions[dest].option_strings]
    values = [defaults.pop(dest) for dest in positional]
    return [str(v) for value in values for v in (value if isinstance(value, list) else [value])]


def parse_with(
    parser: argparse.ArgumentParser,
    words: Sequence[str],
    argv: list[str],
    values: dict[str, object],
) -> argparse.Namespace:
    """Command `words` parsed from `argv` (its positionals), with `values` over its defaults.

    No option is on that command line, so `values` (already converted by `option_defaults`) go
    over the parsed defaults: ``set_defaults`` would change the parser every caller shares.
    """
    args = parser.parse_args([*words, *argv])
    for dest, value in values.items():
        setattr(args, dest, value)
    return args
