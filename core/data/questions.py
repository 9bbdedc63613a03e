"""Questions, answers and partial answers of debatable-question answering (DebateQA, BERDS).

One reader per kind, each accepting a JSON list or JSONL of records (see docs/schemas.md):

* questions: strings, or records with ``question`` and optional ``id`` and ``perspectives``
  (BERDS ``dev_perspective_sets.jsonl`` reads as is: its ids repeat across source datasets, so
  a record's ``dataset`` prefixes its id, ``kialo/774``); an id defaults to a hash of the question;
* answers: records with ``id`` and ``answer`` (``moot answer``) or ``generation`` (DebateQA's
  released model outputs), optionally ``question``;
* partial answers: records with ``id``, ``question`` and ``partial_answers``, a list of
  ``{"point_of_view": ..., "explanation": ...}`` (DebateQA's released ``dataset/test.jsonl`` and
  ``dev.jsonl``, as ``scripts/eval_PD.py`` reads them), ``{"POV": ..., "Explan": ...}`` (the
  paper's names, Table 1) or ``{"POV": ..., "Explanation": ...}`` (earlier ``moot curate``
  output; it now writes the released layout).

Every problem is an `InputError` naming the file and the record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.records import read_records, refuse_repeated_ids, stable_id
from moot.core.errors import InputError


@dataclass(frozen=True)
class Question:
    """A debatable question, with its gold perspectives when the input has them (BERDS)."""

    id: str
    text: str
    perspectives: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Answer:
    """A model's long-form answer to one question."""

    id: str
    text: str
    question: str | None = None


@dataclass(frozen=True)
class PartialAnswer:
    """One point of view on a question and its explanation (DebateQA)."""

    pov: str
    explanation: str

    @property
    def text(self) -> str:
        """The partial answer as the P.D. metric scores it: POV, then explanation."""
        return f"{self.pov} {self.explanation}".strip()


@dataclass(frozen=True)
class PartialAnswers:
    """A question with its partial answers."""

    id: str
    question: str
    partial_answers: tuple[PartialAnswer, ...]


def load_questions(path: Path) -> list[Question]:
    """Read questions (strings or records, see the module docstring).

    Raises:
        InputError: A question without text, a non-string perspective, or a repeated id.
    """
    questions: list[Question] = []
    for where, item in read_records(path):
        record = {"question": item} if isinstance(item, str) else item
        if not isinstance(record, dict):
            raise InputError(path, "expected a question string or an object", where)
        text = _text(path, where, record, "question")
        qid = question_id(record, stable_id("question", text))
        questions.append(Question(qid, text, read_perspectives(path, where, record)))
    return _unique(path, questions)


def question_id(record: dict[str, Any], default: str) -> str:
    """A question record's id: its ``id`` (else `default`), after its BERDS ``dataset``, if any.

    BERDS numbers questions per source dataset, so ``{"dataset": "kialo", "id": "774"}`` is
    ``kialo/774``.
    """
    qid = str(record["id"]) if record.get("id") not in (None, "") else default
    return f"{record['dataset']}/{qid}" if record.get("dataset") else qid


def read_perspectives(path: Path, where: str, record: dict[str, Any]) -> tuple[str, ...] | None:
    """A record's gold ``perspectives`` (BERDS), or None when it has none.

    Raises:
        InputError: ``perspectives`` is not a list of non-empty strings.
    """
    perspectives = record.get("perspectives")
    if perspectives is None:
        return None
    if not isinstance(perspectives, list) or not all(
        isinstance(p, str) and p.strip() for p in perspectives
    ):
        raise InputError(path, "'perspectives' must be a list of non-empty strings", where)
    return tuple(perspectives)


def load_answers(path: Path) -> list[Answer]:
    """Read answers: ``id`` with ``answer`` or ``generation``, optional ``question``.

    Raises:
        InputError: A record without an id or answer text, or a repeated id.
    """
    answers: list[Answer] = []
    for where, item in read_records(path):
        record = _with_id(path, where, item)
        field = "answer" if "answer" in record else "generation"
        text = _text(path, where, record, field, also="'answer' or 'generation'")
        question = record.get("question")
        answers.append(Answer(str(record["id"]), text, question if question else None))
    return _unique(path, answers)


#: The keys a partial answer's point of view and explanation may have (module docstring).
POV_KEYS = ("point_of_view", "POV", "pov")
EXPLANATION_KEYS = ("explanation", "Explanation", "Explan")


def load_partial_answers(path: Path) -> list[PartialAnswers]:
    """Read questions with partial answers (keys: `POV_KEYS`, `EXPLANATION_KEYS`).

    Raises:
        InputError: A record without id, question or partial answers, or a partial answer
            without exactly one POV key and one explanation key.
    """
    items: list[PartialAnswers] = []
    for where, item in read_records(path):
        record = _with_id(path, where, item)
        question = _text(path, where, record, "question")
        partials = record.get("partial_answers")
        if not isinstance(partials, list) or not partials:
            raise InputError(path, "'partial_answers' must be a non-empty list", where)
        parsed = []
        for index, partial in enumerate(partials):
            at = f"{where}, partial answer {index}"
            if not isinstance(partial, dict):
                raise InputError(path, "expected an object with 'point_of_view' (or 'POV')", at)
            pov = _one_of(path, at, partial, POV_KEYS)
            if not isinstance(pov, str) or not pov.strip():
                raise InputError(path, "partial answer without a point_of_view (or POV)", at)
            explanation = _one_of(path, at, partial, EXPLANATION_KEYS)
            if not isinstance(explanation, str):
                raise InputError(path, "its explanation must be a string", at)
            parsed.append(PartialAnswer(pov.strip(), explanation.strip()))
        items.append(PartialAnswers(str(record["id"]), question, tuple(parsed)))
    return _unique(path, items)


def _one_of(path: Path, where: str, record: dict, keys: tuple[str, ...]) -> Any:
    """The value of the one key of `keys` that `record` has (two would be ambiguous)."""
    found = [key for key in keys if key in record]
    if len(found) != 1:
        names = " and ".join(repr(k) for k in found) if found else "none"
        raise InputError(path, f"needs exactly one of {', '.join(keys)}; has {names}", where)
    return record[found[0]]


def _text(path: Path, where: str, record: dict, field: str, also: str | None = None) -> str:
    value = record.get(field)
    if not isinstance(value, str) or not value.strip():
        raise InputError(path, f"missing or empty {also or repr(field)}", where)
    return value.strip()


def _with_id(path: Path, where: str, record: Any) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise InputError(path, "expected an object", where)
    if record.get("id") in (None, ""):
        raise InputError(path, "missing 'id'", where)
    return record


def _unique(path: Path, items: list) -> list:
    if not items:
        raise InputError(path, "no records")
    refuse_repeated_ids(path, (item.id for item in items))
    return items
