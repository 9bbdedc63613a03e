"""Structured output: tolerant parsing of model replies into pydantic models.

Models wrap JSON in prose and code fences, write Python dict reprs, or stop half way. The
parser tries, in order: the whole reply, fenced blocks, then every balanced ``{...}``/``[...]``
span, each as JSON and then as a Python literal. What still fails becomes an explicit
`ParseFailure`; callers never substitute a default value for it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

_FENCE = re.compile(r"```(?:json|python|JSON)?\s*(.*?)```", re.S)


class OutputParseError(ValueError):
    """A reply that holds no value of the expected shape."""


@dataclass(frozen=True)
class ParseFailure:
    """An explicit record of a reply that could not be parsed (counted, never averaged in).

    Args:
        raw: The model's last reply, verbatim.
        error: Why it failed to parse.
        repaired: Whether a repair round was attempted.
    """

    raw: str
    error: str
    repaired: bool

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for result records."""
        return {
            "parse_failure": True,
            "raw": self.raw,
            "error": self.error,
            "repaired": self.repaired,
        }


@dataclass(frozen=True)
class Structured(Generic[V]):
    """The outcome of a structured call: a validated value or a parse failure, with the raw text."""

    value: V | None
    failure: ParseFailure | None
    raw: str
    completions: tuple[Any, ...] = ()  # the model layer's Completion of each call made

    @property
    def ok(self) -> bool:
        """True when a value was parsed."""
        return self.failure is None


def candidates(text: str) -> Iterator[str]:
    """Substrings of `text` that may hold the structured value, most likely first."""
    yield text.strip()
    for block in _FENCE.findall(text):
        yield block.strip()
    for opener, closer in ("{}", "[]"):
        start = text.find(opener)
        while start != -1:
            end = _balanced_end(text, start, opener, closer)
            if end is not None:
                yield text[start : end + 1]
            start = text.find(opener, start + 1)


def extract_value(text: str) -> Any:
    """The first JSON (or Python-literal) value found in `text`.

    Raises:
        OutputParseError: No candidate parses.
    """
    for chunk in candidates(text):
        if not chunk:
            continue
        try:
            return json.loads(chunk)
        except ValueError:
            pass
        try:
            return ast.literal_eval(chunk)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    raise OutputParseError("no JSON object found in the reply")


def parse_structured(text: str, schema: type[T]) -> T:
    """Parse `text` into `schema`, tolerating prose, fences and Python reprs.

    Raises:
        OutputParseError: Nothing in the reply validates against `schema`.
    """
    errors: list[str] = []
    for chunk in candidates(text):
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(chunk)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            try:
                return schema.model_validate(value)
            except ValidationError as exc:
                errors.append(_short(exc))
    if errors:
        raise OutputParseError(f"reply does not match the schema: {errors[0]}")
    raise OutputParseError("no JSON object found in the reply")


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for `schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
    }


def _balanced_end(text: str, start: int, opener: str, closer: str) -> int | None:
    """Index of the bracket closing the one at `start`, skipping JSON and Python string literals."""
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return None


def _short(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "value"
    return f"{where}: {first.get('msg', 'invalid')}"
