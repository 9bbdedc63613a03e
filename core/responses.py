"""Reading model responses to the DEBATunE test instructions, for the judges.

Two shapes are accepted: DEBATunE's model-output files (a JSON list of
``{topic, side, argument, instruction, raw_output?, response}``, 480 per model, ordered topic →
side → argument) and the SFT records ``moot debate`` writes (JSONL with ``topic``, ``stance``,
``argument`` and ``messages`` or ``prompt``/``completion``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.errors import InputError
from moot.core.records import read_input_text

SIDES = ("affirmative", "negative")


@dataclass(frozen=True)
class Response:
    """One model response to one instruction."""

    topic: str
    side: str  # "affirmative" or "negative"
    argument: str
    instruction: str
    response: str

    @property
    def key(self) -> tuple[str, str, str]:
        """What aligns two models' responses: topic, side, argument."""
        return (self.topic, self.side, self.argument)


def load_responses(path: str | Path) -> list[Response]:
    """Load and validate responses.

    Raises:
        InputError: Missing, empty, non-UTF-8 or malformed file; a record without a field; a side
            other than affirmative/negative; an empty response.
    """
    path = Path(path)
    text = read_input_text(path)
    try:
        if text.lstrip().startswith("["):
            rows = list(enumerate(json.loads(text)))
            unit = "index"
        else:
            rows = [
                (n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1) if line.strip()
            ]
            unit = "line"
    except ValueError as exc:
        raise InputError(path, f"invalid JSON: {exc}") from None
    responses = [_parse(path, item, f"{unit} {n}") for n, item in rows]
    if not responses:
        raise InputError(path, "no responses found")
    return responses


def _parse(path: Path, item: Any, where: str) -> Response:
    if not isinstance(item, dict):
        raise InputError(path, f"expected an object, got {type(item).__name__}", where)
    if "messages" in item or "completion" in item:  # a moot SFT record
        messages = item.get("messages") or [
            {"role": "user", "content": item.get("prompt", "")},
            {"role": "assistant", "content": item.get("completion", "")},
        ]
        instruction = next((m["content"] for m in messages if m.get("role") == "user"), "")
        answer = next((m["content"] for m in messages if m.get("role") == "assistant"), "")
        item = {
            **item,
            "side": item.get("stance", ""),
            "instruction": instruction,
            "response": answer,
        }
    missing = [k for k in ("topic", "side", "argument", "instruction", "response") if k not in item]
    if missing:
        raise InputError(
            path, f"missing field {missing[0]!r} (not a DEBATunE responses file?)", where
        )
    side = str(item["side"]).lower()
    if side not in SIDES:
        raise InputError(path, f"side must be affirmative or negative, got {item['side']!r}", where)
    if not str(item["response"]).strip():
        raise InputError(path, "empty response", where)
    return Response(item["topic"], side, item["argument"], item["instruction"], item["response"])
