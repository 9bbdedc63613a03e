"""What a dry run takes a reply to be: a stand-in at the call's full budget (`planning`).

A caller whose parser wants a shape (a JSON verdict, a list of arguments) declares its reply's
`StandIn`; callers that read text take `stand_in` words. Each stand-in fills its budget, so a
later call that holds the reply is counted at the reply's most.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True)
class StandIn:
    """What a dry run takes a call's reply to be (`moot.core.llm.planning`).

    Attributes:
        reply: The reply at a budget of so many tokens, in a shape the caller's parser reads
            (default `stand_in`: words, for a caller that reads text).
        note: What the estimate cannot know because of it, said once in the plan;
            ``{calls}`` is replaced by the number of calls it stood in for.
        at_most: The calls after it are an upper bound, not a count (`Plan.calls_at_most`).
    """

    reply: Callable[[int], str] = field(default=lambda tokens: stand_in(tokens))
    note: str | None = None
    at_most: bool = False


def stand_in(tokens: int) -> str:
    """A reply not yet written, at its full budget: `tokens` tokens of text (at least one).

    ``word`` repeated, one ``cl100k_base`` token each (as `moot.core.llm.tokens` counts), so a
    later call that holds the reply is counted at the reply's most.
    """
    return " ".join(["word"] * max(1, tokens))


def schema_stand_in(schema: dict[str, Any], words: int = 8) -> Any:
    """A JSON value a JSON `schema` (pydantic's ``model_json_schema``) accepts, for dry runs.

    The least value each constraint allows (numbers at their minimum, lists and mappings at their
    shortest non-empty length, an enum's first value), strings `words` words long within their
    ``maxLength``. A schema with cross-field rules (two names that must differ) needs its
    caller's own `StandIn`: the planning client refuses a stand-in its parser refuses.
    """
    defs = schema.get("$defs", {})

    def value(node: dict[str, Any]) -> Any:
        if "$ref" in node:
            return value(defs[node["$ref"].rsplit("/", 1)[-1]])
        for key in ("const", "default"):
            if key in node:
                return node[key]
        if "enum" in node:
            return node["enum"][0]
        if "anyOf" in node or "oneOf" in node:
            return value((node.get("anyOf") or node["oneOf"])[0])
        kind = node.get("type", "object")
        if kind == "object":
            fields = {name: value(sub) for name, sub in node.get("properties", {}).items()}
            extra = node.get("additionalProperties")  # a mapping's values (``dict[str, str]``)
            if isinstance(extra, dict):
                wanted = max(1, node.get("minProperties", 1)) - len(fields)  # none if negative
                fields |= {f"field {i + 1}": value(extra) for i in range(wanted)}
            return fields
        if kind == "array":
            return [value(node.get("items", {})) for _ in range(max(1, node.get("minItems", 1)))]
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0) + 1)
            return int(low) if kind == "integer" else low
        if kind == "boolean":
            return True
        text = stand_in(words)
        return text[: node["maxLength"]] if "maxLength" in node else text

    return value(schema)


@functools.cache
def json_stand_in(schema: type[BaseModel]) -> StandIn:
    """The `StandIn` of a reply that is a JSON value of pydantic `schema` (`schema_stand_in`).

    One per schema, made when asked for and its text when first read: a real call, which passes
    it and never reads it, pays nothing for it.
    """

    @functools.cache
    def text(_: int) -> str:
        return json.dumps(schema_stand_in(schema.model_json_schema()))

    return StandIn(text)
