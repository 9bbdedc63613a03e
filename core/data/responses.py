"""Reading model responses to the DEBATunE test instructions, for the judges.

Two shapes are accepted: DEBATunE's model-output files (a JSON list of
``{topic, side, argument, instruction, raw_output?, response}``, 480 per model, ordered topic →
side → argument) and the SFT records ``moot debate`` writes (JSONL with ``topic``, ``stance``,
``argument`` and ``messages`` or ``prompt``/``completion``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.records import read_records, stable_id
from moot.core.errors import InputError, json_type

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


def align(responses: Sequence[Response], baseline: Sequence[Response], path: Path) -> None:
    """Check that two response files answer the same instructions in the same order.

    Raises:
        InputError: They differ in length or in any (topic, side, argument).
    """
    if len(responses) != len(baseline):
        raise InputError(path, f"{len(baseline)} records, but the responses have {len(responses)}")
    for index, (mine, theirs) in enumerate(zip(responses, baseline, strict=True)):
        if mine.key != theirs.key:
            raise InputError(
                path,
                f"does not align with the responses: {theirs.key} vs {mine.key}",
                f"index {index}",
            )


def quality_id(
    identity: Mapping[str, Any], mine: Response, theirs: Response, mask: Sequence[str]
) -> str:
    """The id `moot eval quality` gives its judgment of `mine` against `theirs`.

    Args:
        identity: The judge's (`moot.graphs.judging.judge_identity`).
        mine: The response judged.
        theirs: The baseline's, to the same instruction.
        mask: The words masked in both.
    """
    return stable_id("quality", identity, mine.key, mine.response, theirs.response, list(mask))


def controllability_id(identity: Mapping[str, Any], response: Response) -> str:
    """The id `moot eval controllability` gives its judgment of `response` (identity: its judge)."""
    return stable_id("controllability", identity, response.key, response.response)


def load_responses(path: str | Path) -> list[Response]:
    """Load and validate responses.

    Raises:
        InputError: Missing, empty, non-UTF-8 or malformed file (a bad JSONL line is named by its
            line number); a record that is not an object, lacks a field or has one of the wrong
            type; a side other than affirmative/negative; an empty response; two records for the
            same topic, side and argument.
    """
    path = Path(path)
    rows = list(read_records(path))
    if not rows:
        raise InputError(path, "no responses found")
    responses: list[Response] = []
    seen: dict[tuple[str, str, str], str] = {}
    for where, item in rows:
        response = _parse(path, item, where)
        if response.key in seen:
            raise InputError(path, f"same topic, side and argument as {seen[response.key]}", where)
        seen[response.key] = where
        responses.append(response)
    return responses


def _parse(path: Path, item: Any, where: str) -> Response:
    if not isinstance(item, dict):
        raise InputError(path, f"expected an object, got {json_type(item)}", where)
    if "messages" in item or "completion" in item:  # a moot SFT record
        side = _text(path, item, "stance", where)
        if "messages" in item:
            instruction, response = _messages(path, item["messages"], where)
        else:
            instruction = _text(path, item, "prompt", where)
            response = _text(path, item, "completion", where)
    else:
        side = _text(path, item, "side", where)
        instruction = _text(path, item, "instruction", where)
        response = _text(path, item, "response", where)
    topic, argument = _text(path, item, "topic", where), _text(path, item, "argument", where)
    if side.lower() not in SIDES:
        raise InputError(path, f"side must be affirmative or negative, got {side!r}", where)
    if not response.strip():
        raise InputError(path, "empty response", where)
    return Response(topic, side.lower(), argument, instruction, response)


def _text(path: Path, record: dict[str, Any], field: str, where: str, name: str = "") -> str:
    """``record[field]``, which must be text; `name` says where it sits (``messages[0].role``)."""
    if field not in record:
        if name:
            raise InputError(path, f"missing {name}", where)
        raise InputError(path, f"missing field {field!r} (not a DEBATunE responses file?)", where)
    value = record[field]
    if not isinstance(value, str):
        raise InputError(path, f"{name or repr(field)} must be text, got {json_type(value)}", where)
    return value


def _messages(path: Path, messages: Any, where: str) -> tuple[str, str]:
    """(first user content, first assistant content) of a chat record's ``messages``."""
    if not isinstance(messages, list):
        raise InputError(path, f"'messages' must be a list, got {json_type(messages)}", where)
    contents: dict[str, str] = {}
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            problem = f"messages[{n}] must be an object, got {json_type(message)}"
            raise InputError(path, problem, where)
        role = _text(path, message, "role", where, f"messages[{n}].role")
        contents.setdefault(role, _text(path, message, "content", where, f"messages[{n}].content"))
    for role in ("user", "assistant"):
        if role not in contents:
            raise InputError(path, f"'messages' has no {role} message", where)
    return contents["user"], contents["assistant"]
