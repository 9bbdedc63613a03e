"""Configuration files as pydantic models, and their errors as one line naming the key.

A YAML file a user writes (`moot train sft`'s config, a `moot run` recipe) is checked by a
`ConfigModel`: strict types (``true`` is not a number, ``3`` is not text), unknown keys refused,
frozen once built. `problem` turns pydantic's `ValidationError` into the one line the CLI prints:
the dotted path of the key (``training.learning_rate``, ``lora.target_modules[0]``) and what is
wrong with it, with the closest known key for a misspelt one. Callers add the file's name and
raise their own error type.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class ConfigModel(BaseModel):
    """A section of a configuration file: strict, closed (unknown keys refused) and frozen.

    What a section derives from its fields and caches (a ``functools.cached_property``) is
    derived anew in a copy with other fields (`model_copy`), never carried over stale.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy, `update`'s fields replaced; its cached derived values are dropped."""
        copy = super().model_copy(update=update, deep=deep)
        for klass in type(self).__mro__:
            for name, value in vars(klass).items():
                if isinstance(value, functools.cached_property):
                    copy.__dict__.pop(name, None)
        return copy


def problem(exc: ValidationError, model: type[BaseModel]) -> str:
    """The first error of `exc` as ``key.path: what is wrong`` (one line, no pydantic jargon).

    Args:
        exc: What ``model.model_validate`` raised.
        model: The model validated, to tell its keys from pydantic's union tags in an error's
            location and to find the closest known key of a misspelt one.

    Returns:
        E.g. ``training.learnin_rate: unknown key (did you mean 'learning_rate'?)`` (with no
        close one, the known keys),
        ``lora.r: must be greater than 0, got 0``, ``data.train: required``.
    """
    # a misspelt key explains the required one it leaves missing: say it first
    errors = sorted(exc.errors(), key=lambda error: error["type"] != "extra_forbidden")
    first = errors[0]
    path, parent, tags = _path(first["loc"], model)
    key = path or "the file"
    kind = first["type"]
    if kind == "extra_forbidden":
        known = list(parent.model_fields) if parent else []
        hint = did_you_mean(str(first["loc"][-1]), known) or f" (known: {', '.join(known)})"
        return f"{key}: unknown key{hint}"
    if kind == "missing":
        return f"{key}: required"
    if tags:  # a union: every member failed; name them all once, with the value given
        branches = [(e, _path(e["loc"], model)) for e in errors]
        union = [(e, t[0]) for e, (p, _, t) in branches if p == path and t]
        given = min(union, key=lambda pair: len(pair[0]["loc"]))[0]["input"]
        options = dict.fromkeys(_tag(tag) for _, tag in union)
        return f"{key}: expected {' or '.join(options)}, got {given!r}"
    message = first["msg"]
    if message.startswith("Value error, "):  # a validator's own words
        message = message.removeprefix("Value error, ")
    else:
        message = message.replace("Input should be ", "must be ", 1)
        message = f"{message[0].lower()}{message[1:]}, got {first['input']!r}"
    return f"{key}: {message}" if path else message


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` with the known name closest to `name`, or "" if none is close."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _path(loc: tuple, model: type[BaseModel]) -> tuple[str, type[BaseModel] | None, list[str]]:
    """The dotted key path of an error location, the model holding its last key, union tags."""
    path, cls, kind, tags = "", model, None, []
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        if cls is not None and part in cls.model_fields:
            path += f".{part}" if path else part
            kind = cls.model_fields[part].annotation
            inner = _model_of(kind)
            if inner is not None:
                cls, kind = inner, inner  # an optional section is its model inside
                continue
            cls = None
            continue
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            tags.append(part)  # pydantic names the union member that failed: the key ends here
            break
        path += f".{part}" if path else str(part)  # a key of a free mapping (or an unknown key)
    return path, cls, tags


def _model_of(kind: Any) -> type[BaseModel] | None:
    """The model a field holds (``Section``, ``Section | None``, ``dict[str, Section]``), if any."""
    options = typing.get_args(kind) if typing.get_origin(kind) else (kind,)
    for option in options:
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _tag(tag: str) -> str:
    """A union member's pydantic tag as a reader would say it: ``literal['auto']`` is 'auto'."""
    return tag.removeprefix("literal[").removesuffix("]") if tag.startswith("literal[") else tag
