"""CompQA inputs of `moot compare`: comparative questions and per-object argument lists.

Questions come as a JSON list or JSONL of ``{object1, object2, aspect?, id?, question?}``
records (CompQA's ``derived_questions.jsonl``, where aspect ``""`` means none), or as free-text
comparative questions: a record with only ``question`` (and ``id``), a bare JSON string, or a
``.txt`` file with one question per line. The model extracts a free-text question's objects.

Arguments (scenarios 2 and 4) are records ``{object1, object2, aspect?, arguments: {<object1>:
[str, ...], <object2>: [str, ...]}}``, matched to questions by (object1, object2, aspect),
case-insensitively. Every problem is an `InputError` naming the file and the record.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.records import read_input_text, read_records, stable_id
from moot.core.errors import InputError, json_type

Key = tuple[str, str, str]


@dataclass(frozen=True)
class CompQuestion:
    """One comparative question: two objects and an aspect, or free text to extract them from.

    Attributes:
        id: The file's ``id`` (as a string), else a hash of the question.
        object1: The first object; None for a free-text question.
        object2: The second object; None for a free-text question.
        aspect: The aspect to focus on, or None.
        text: The question's text (the file's ``question``), or None.
        where: Its place in the file (``line 3``, ``index 0``).
    """

    id: str
    object1: str | None
    object2: str | None
    aspect: str | None
    text: str | None
    where: str

    @property
    def free(self) -> bool:
        """True when the objects are still to be extracted from the text."""
        return self.object1 is None

    @property
    def key(self) -> Key | str:
        """What makes two questions the same: `question_key`, or the folded free text."""
        if self.object1 is None or self.object2 is None:
            return _fold(self.text or "")
        return question_key(self.object1, self.object2, self.aspect)


@dataclass(frozen=True)
class Arguments:
    """The arguments given for each object of one question.

    Attributes:
        object1: Arguments for the question's first object.
        object2: Arguments for its second object.
        source: Where they came from: ``{"source": "file", "path", "where"}`` or ``{"source":
            "model", "model"}``.
    """

    object1: tuple[str, ...]
    object2: tuple[str, ...]
    source: dict[str, Any] = field(default_factory=dict)

    def numbered(self) -> list[str]:
        """Both lists as one, numbered 1..N in this order: object1's, then object2's."""
        return [*self.object1, *self.object2]

    def to_json(self) -> dict[str, Any]:
        """JSON form for output records (``object1``/``object2`` are the question's objects)."""
        return {**self.source, "object1": list(self.object1), "object2": list(self.object2)}


def question_key(object1: str, object2: str, aspect: str | None) -> Key:
    """How questions and argument records are matched: case-insensitive objects and aspect."""
    return (_fold(object1), _fold(object2), _fold(aspect or ""))


def load_compqa_questions(path: Path) -> list[CompQuestion]:
    """Read comparative questions (see the module docstring).

    Raises:
        InputError: A record with neither both objects nor question text, one object without
            the other, the same object twice, a non-string aspect or question, or a repeated
            question or id.
    """
    path = Path(path)
    if path.suffix.lower() == ".txt":
        lines = read_input_text(path).splitlines()
        items = [(f"line {n}", line) for n, line in enumerate(lines, 1) if line.strip()]
    else:
        items = list(read_records(path))
    questions: list[CompQuestion] = []
    seen: dict[Any, str] = {}
    for where, item in items:
        question = _question(path, where, {"question": item} if isinstance(item, str) else item)
        for key in (("id", question.id), ("question", question.key)):
            if key in seen:
                raise InputError(path, f"repeated {key[0]} (first at {seen[key]})", where)
            seen[key] = where
        questions.append(question)
    if not questions:
        raise InputError(path, "no questions")
    return questions


class ArgumentFile:
    """Per-object argument lists read from a file, found by (object1, object2, aspect).

    Args:
        path: JSON list or JSONL of argument records (see the module docstring).

    Raises:
        InputError: A record without both objects, the same object twice, a non-string aspect,
            ``arguments`` that is not a mapping of exactly the two objects' names to lists of
            non-empty strings, no argument at all, or a repeated (object1, object2, aspect).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.sha256 = hashlib.sha256(read_input_text(self.path).encode("utf-8")).hexdigest()
        self._found: dict[Key, Arguments] = {}
        seen: dict[Key, str] = {}
        for where, record in read_records(self.path):
            key, arguments = self._record(where, record)
            if key in seen:
                raise InputError(
                    self.path, f"repeated objects and aspect (first at {seen[key]})", where
                )
            seen[key] = where
            self._found[key] = arguments
        if not self._found:
            raise InputError(self.path, "no argument records")

    def longest(self) -> tuple[Key, Arguments]:
        """The record with the most argument text: its (folded) objects and aspect, its lists."""
        return max(self._found.items(), key=lambda found: len("".join(found[1].numbered())))

    def find(self, object1: str, object2: str, aspect: str | None) -> Arguments | None:
        """The arguments for this question, or None when the file has none."""
        return self._found.get(question_key(object1, object2, aspect))

    def _record(self, where: str, record: Any) -> tuple[Key, Arguments]:
        if not isinstance(record, dict):
            raise InputError(self.path, f"expected an object, got {json_type(record)}", where)
        object1, object2 = _objects(self.path, where, record)
        if object1 is None or object2 is None:
            raise InputError(self.path, "missing 'object1' or 'object2'", where)
        aspect = _aspect(self.path, where, record)
        given = record.get("arguments")
        if not isinstance(given, dict):
            raise InputError(self.path, "'arguments' must map each object's name to a list", where)
        by_name = {_fold(str(name)): value for name, value in given.items()}
        if len(by_name) != len(given) or set(by_name) != {_fold(object1), _fold(object2)}:
            names = ", ".join(repr(str(name)) for name in given)
            problem = (
                f"'arguments' needs the keys {object1!r} and {object2!r}, got {names or 'none'}"
            )
            raise InputError(self.path, problem, where)
        lists = []
        for name in (object1, object2):
            value = by_name[_fold(name)]
            if not isinstance(value, list) or not all(
                isinstance(a, str) and a.strip() for a in value
            ):
                raise InputError(
                    self.path, f"arguments for {name!r} must be a list of non-empty strings", where
                )
            lists.append(tuple(a.strip() for a in value))
        if not lists[0] and not lists[1]:
            raise InputError(self.path, "no arguments for either object", where)
        source = {"source": "file", "path": str(self.path), "where": where}
        return question_key(object1, object2, aspect), Arguments(lists[0], lists[1], source)


def _question(path: Path, where: str, record: Any) -> CompQuestion:
    if not isinstance(record, dict):
        raise InputError(
            path, f"expected a question string or an object, got {json_type(record)}", where
        )
    object1, object2 = _objects(path, where, record)
    text = record.get("question")
    if text is not None and not isinstance(text, str):
        raise InputError(path, f"'question' must be text, got {json_type(text)}", where)
    text = " ".join(text.split()) if text else None
    if object1 is None and object2 is None:
        if not text:
            raise InputError(path, "no objects ('object1', 'object2') and no question text", where)
        if record.get("aspect"):
            raise InputError(path, "an aspect without objects ('object1', 'object2')", where)
    elif object1 is None or object2 is None:
        raise InputError(path, f"{'object1' if object1 is None else 'object2'!r} missing", where)
    aspect = _aspect(path, where, record)
    qid = record.get("id")
    if qid is not None and (
        isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip()
    ):
        raise InputError(path, f"'id' must be a non-empty string or an integer, got {qid!r}", where)
    if qid is None:
        qid = stable_id("compqa-question", object1, object2, aspect, text)
    return CompQuestion(str(qid).strip(), object1, object2, aspect, text, where)


def _objects(path: Path, where: str, record: dict[str, Any]) -> tuple[str | None, str | None]:
    found: list[str | None] = []
    for name in ("object1", "object2"):
        value = record.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError(path, f"{name!r} must be a non-empty string, got {value!r}", where)
        found.append(value.strip() if value else None)
    if found[0] and found[1] and _fold(found[0]) == _fold(found[1]):
        raise InputError(path, f"object1 and object2 are the same ({found[0]!r})", where)
    return found[0], found[1]


def _aspect(path: Path, where: str, record: dict[str, Any]) -> str | None:
    aspect = record.get("aspect")
    if aspect is not None and not isinstance(aspect, str):
        raise InputError(path, f"'aspect' must be text, got {json_type(aspect)}", where)
    return aspect.strip() or None if aspect else None


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


__all__ = ["ArgumentFile", "Arguments", "CompQuestion", "load_compqa_questions", "question_key"]
