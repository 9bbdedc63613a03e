"""Structured output: tolerant parsing of model replies into pydantic models.

Models wrap JSON in prose and code fences, write Python dict reprs, slip (a trailing comma, an
unquoted key, a missing brace), or stop half way. The parser tries, in order: the whole reply,
fenced blocks, then every balanced ``{...}``/``[...]`` span, each as JSON and then as a Python
literal; only when none of these reads, ``json_repair`` on the same spans and on a bracket left
open (`repaired_values`), so a slip costs no paid repair round. What still fails becomes an
explicit `ParseFailure`; callers never substitute a default value for it.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")

_FENCE = re.compile(r"```(?:json|python|JSON)?\s*(.*?)```", re.S)
# one more character after a reply cut off inside a value would change that value ("1" -> "10")
_PROBES = ("0", "x")


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
class FreshRepair:
    """A repair asked afresh: one new message quoting the reply and its error, up to `tries` times.

    Debatrix's released parser repairs this way (its fix prompt, 3 times); moot's own repair is
    one follow-up turn of the conversation (`moot.core.llm.models.ModelClient.complete_parsed`).

    Args:
        prompt: The message, given the reply that did not parse and the parser's error.
        tries: How many such requests at most.
    """

    prompt: Callable[[str, str], str]
    tries: int


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
    """The first JSON (or Python-literal) value found in `text`; json_repair's reading last.

    Raises:
        OutputParseError: No candidate parses.
    """
    for value in _readings(text):
        return value
    raise OutputParseError("no JSON object found in the reply")


def parse_structured(text: str, schema: type[T]) -> T:
    """Parse `text` into `schema`, tolerating prose, fences, Python reprs and JSON slips.

    Raises:
        OutputParseError: Nothing in the reply validates against `schema`.
    """
    errors: list[str] = []
    for value in _readings(text):
        try:
            return schema.model_validate(value)
        except ValidationError as exc:
            errors.append(_short(exc))
    if errors:
        raise OutputParseError(f"reply does not match the schema: {errors[0]}")
    raise OutputParseError("no JSON object found in the reply")


def repaired_values(text: str) -> Iterator[dict[str, Any]]:
    """What ``json_repair`` reads in `text`'s ``{...}`` spans, where our strict readers fail.

    json_repair turns almost anything into something, so a reading counts only when it is a
    non-empty object read from a span that opens with ``{`` (every schema is an object; prose
    brackets such as citations ``[1]`` would otherwise become lists), every string value in
    it stands quoted in its span (json_repair may mend the structure around what the model
    wrote, not turn prose into values), and, for a brace left open at the end of the reply, the
    reply was not cut off inside a value.
    """
    return _repaired(text, list(candidates(text)))


def _repaired(text: str, chunks: list[str]) -> Iterator[dict[str, Any]]:
    """`repaired_values` of `text`, given its `candidates` (found once per reply)."""
    spans = [(c, False) for c in dict.fromkeys(chunks) if _closed(c)]
    start = text.find("{")  # the outermost brace that never closes, read to the end
    while start != -1 and _balanced_end(text, start, "{", "}") is not None:
        start = text.find("{", start + 1)
    if start != -1:
        spans.append((text[start:], True))
    for span, open_ended in spans:
        value = _repair(span)
        if value is None or not _quoted_strings(value, span):
            continue
        if not (open_ended and _cut_off(span, value)):
            yield value


def _readings(text: str) -> Iterator[Any]:
    """Every value `text` may hold: strict JSON, then Python literals, then json_repair's.

    Each `mended`, when the reply holds an escape that can make a lone surrogate.
    """
    chunks: list[str] = []  # found lazily: most replies parse at the first chunk
    escaped = "\\u" in text.lower()  # no such escape, no surrogate: nothing to walk
    for chunk in candidates(text):
        chunks.append(chunk)
        for loader in (json.loads, ast.literal_eval):
            try:
                value = loader(chunk)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            yield mended(value) if escaped else value
    for value in _repaired(text, chunks):
        yield mended(value) if escaped else value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def mended(value: Any) -> Any:
    r"""`value` (read from a reply) with every lone surrogate in its strings, keys too, as U+FFFD.

    An escape in a reply's JSON or Python literal (``"\udfff"``) makes one; no UTF-8 file can
    hold it, so the first write of its record crashed the run. The reply's own text is mended
    where it enters (`moot.core.llm.models`).
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {mended(k): mended(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(mended(item) for item in value)
    return value


def _repair(span: str) -> dict[str, Any] | None:
    """json_repair's reading of `span` if it is a non-empty object."""
    try:
        value = json_repair.loads(span)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and value else None


def _closed(span: str) -> bool:
    """True when `span` is one ``{...}`` object: its first brace closes at its end."""
    return span.startswith("{") and _balanced_end(span, 0, "{", "}") == len(span) - 1


def _cut_off(tail: str, value: Any) -> bool:
    """True when `tail` (a reply's end) stops inside a value: one more character changes it."""
    return any(_repair(tail + probe) != value for probe in _PROBES)


def _quoted_strings(value: Any, text: str) -> bool:
    """True when every string value (not key) in `value` stands quoted in `text`."""
    if isinstance(value, dict):
        return all(_quoted_strings(v, text) for v in value.values())
    if isinstance(value, list):
        return all(_quoted_strings(v, text) for v in value)
    if isinstance(value, str):
        quoted = (json.dumps(value), json.dumps(value, ensure_ascii=False), f"'{value}'")
        return any(q in text for q in quoted)
    return True


def json_schema_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for `schema` (a fresh dict: litellm may edit it)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": json.loads(schema_text(schema))},
    }


@functools.lru_cache(maxsize=1024)
def schema_text(schema: type[BaseModel]) -> str:
    """`schema`'s JSON schema as JSON text (what a repair round shows the model).

    Built once per schema: pydantic's ``model_json_schema`` takes ~0.5 ms, and a structured call
    needs the schema twice.
    """
    return json.dumps(schema.model_json_schema())


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
