"""DEBATunE's debaters: argument proposal (the debate itself is a protocol).

The arguments' prompt is rendered from ``prompts/debatune``; the debate's turns and conclusion are
DEBATunE's protocol (``prompts/debatune/protocol.yaml``, `moot.graphs.debatune_debate`). Agent A
holds the stance and argument; agent B takes the opposite stance.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints, create_model

from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn
from moot.core.llm.structured import OutputParseError, extract_value, json_schema_format
from moot.prompts import render

#: The completion budget of an argument list, the DEBATunE reference's.
ARGUMENT_TOKENS = 512

_BULLET = re.compile(
    r"^\s*(?:[-*•]\s+|\(?(\d{1,2})[.):]\s+|(?:argument|point)\s+(\d{1,2})\s*[:.-]\s*)", re.I
)


def opposite(stance: str) -> str:
    """The other stance."""
    return "Negative" if stance == "Affirmative" else "Affirmative"


async def propose_arguments(
    client: ModelClient, role: Role, topic: str, stance: str, count: int, *, seed: int
) -> list[str]:
    """Ask `role` for up to `count` one-sentence arguments on `stance`.

    The prompt is the paper's; the decoding is constrained to a JSON list of `count` short strings
    where the server supports JSON schemas (small models otherwise ramble instead of listing). A
    reply that is a plain numbered or bulleted list is parsed as one.
    """
    schema = argument_schema(count)
    reply = await client.complete(
        role,
        argument_messages(topic, stance),
        stage="arguments",
        max_tokens=ARGUMENT_TOKENS,
        seed=seed,
        response_format=json_schema_format(schema),
        stand_in=argument_stand_in(count),
    )
    return _clean(_json_items(reply.text) or parse_argument_list(reply.text))[:count]


@functools.cache
def argument_stand_in(count: int) -> StandIn:
    """A dry run's argument list: `count` arguments of 300 characters, the schema's most."""
    arguments = [f"{n} " + "word " * 59 for n in range(1, count + 1)]  # distinct: each a debate
    return StandIn(
        lambda _: json.dumps({"arguments": arguments}),
        note=f"{{calls}} argument lists are still to propose: their debates are counted at "
        f"{count} each, the most they can give (a list that comes back short is asked for "
        "again in another round)",
    )


def argument_messages(topic: str, stance: str) -> list[dict[str, str]]:
    """The messages asking for arguments on `stance` (the paper's prompt)."""
    return [
        _system("debatune/debater_system.j2", topic, stance),
        {"role": "user", "content": render("debatune/arguments.j2", topic=topic, side=stance)},
    ]


def _json_items(text: str) -> list[str]:
    """Strings of a JSON ``{"arguments": [...]}`` or ``[...]`` reply (any length), else []."""
    try:
        value = extract_value(text)
    except OutputParseError:
        return []
    items = value.get("arguments") if isinstance(value, dict) else value
    return [item for item in items if isinstance(item, str)] if isinstance(items, list) else []


@functools.cache
def argument_schema(count: int) -> type[BaseModel]:
    """JSON schema of an argument list: 1 to `count` sentences of at most 300 characters."""
    sentence = Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=3, max_length=300)
    ]
    field = (list[sentence], Field(min_length=1, max_length=count))
    return create_model("ArgumentList", arguments=field)


def parse_argument_list(text: str) -> list[str]:
    """Split a numbered or bulleted list into items.

    Handles one item per line (``1.``, ``1)``, ``-``, ``Argument 1:``), markdown bold, and lists run
    together on one line, where only the next expected number starts an item (so "3.5 million" is
    never a split point). Prose with no list markers yields no items.
    """
    text = re.sub(r"\*\*|__", "", text)  # "**1.** Claim" is as much a list item as "1. Claim"
    marked = [line for line in text.splitlines() if _BULLET.match(line)]
    if len(marked) >= 2:
        items = [_BULLET.sub("", line, count=1) for line in marked]
    else:
        items = _split_inline_numbers(text)
    return _clean(items)


def _clean(items: Sequence[str]) -> list[str]:
    """Items without markdown emphasis, quotes, blanks or duplicates."""
    cleaned: list[str] = []
    for item in items:
        item = re.sub(r"\*\*|__", "", item).strip().strip('"').strip()
        if item and item not in cleaned:
            cleaned.append(item)
    return cleaned


def _split_inline_numbers(text: str) -> list[str]:
    """Items of a list numbered 1., 2., ... within running text."""
    bounds: list[tuple[int, int]] = []  # (where the marker starts, where its item starts)
    expected = 1
    while found := re.compile(rf"(?:^|(?<=\s))\(?{expected}[.)]\s+").search(
        text, bounds[-1][1] if bounds else 0
    ):
        bounds.append((found.start(), found.end()))
        expected += 1
    if not bounds:
        return []
    ends = [start for start, _ in bounds[1:]] + [len(text)]
    return [text[begin:end].strip() for (_, begin), end in zip(bounds, ends, strict=True)]


def _system(template: str, topic: str, side: str) -> dict[str, str]:
    content = render(template, topic=topic, side=side, opponent_side=opposite(side))
    return {"role": "system", "content": content}
