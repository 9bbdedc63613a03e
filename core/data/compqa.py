"""CompQA: the 15-criterion rubric, reading a judge's scores, and the comparative-answer files.

CompQA (Nikishina et al., 2025, "Argument-Based Comparative Question Answering Evaluation
Benchmark", arXiv:2502.14476; data github.com/lilaspourpre/cqa-evaluation-framework) scores a
comparative answer on 15 criteria: C1-C8 and C13-C15 are worth 0-1 point, C9-C12 0-2, total
0-19. They group into structure (C1-C7, 7 points), relevance (C8-C10, 5) and quality
(C11-C15, 7).

A judgment is valid only when it gives every criterion 1-15, no other key, and a whole number
of points within each criterion's range; anything else is a `RubricError` naming the problem.
An invalid judgment is counted and shown; in files judged elsewhere its criteria still make its
total when all fifteen are numbers (the paper's tables count those, see `load_judged`).

Answer files are JSON lists or JSONL of ``{object1, object2, aspect, comparison}`` (the shape of
CompQA's ``raw_summaries/*.json``); judged files add ``score_dict`` and ``score``
(``evaluated_summaries/<judge>/*.json``) and, when moot wrote them, ``status``. A file named
``<generator>_scenario_<N>.json`` holds one generator's answers in prompting scenario N; records
may also carry ``generator`` and ``scenario`` themselves, which take precedence.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.records import read_records
from moot.core.errors import InputError, json_type
from moot.core.llm.structured import OutputParseError, candidates, mended


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion: its number, its maximum points, its category and a short name."""

    number: int
    maximum: int
    category: str
    name: str


CRITERIA: tuple[Criterion, ...] = (
    Criterion(1, 1, "structure", "short introduction"),
    Criterion(2, 1, "structure", "defined comparison aspects"),
    Criterion(3, 1, "structure", "introduction names main aspects"),
    Criterion(4, 1, "structure", "well-structured main body"),
    Criterion(5, 1, "structure", "aspect names"),
    Criterion(6, 1, "structure", "aspect descriptions"),
    Criterion(7, 1, "structure", "explicit final choice"),
    Criterion(8, 1, "relevance", "aspects sorted by applicability"),
    Criterion(9, 2, "relevance", "arguments relevant"),
    Criterion(10, 2, "relevance", "arguments compare both objects"),
    Criterion(11, 2, "quality", "no hallucinations"),
    Criterion(12, 2, "quality", "proper, easy language"),
    Criterion(13, 1, "quality", "no repetition"),
    Criterion(14, 1, "quality", "answer follows from arguments"),
    Criterion(15, 1, "quality", "length 12-20 sentences"),
)
MAXIMA: dict[int, int] = {c.number: c.maximum for c in CRITERIA}
CATEGORIES: dict[str, tuple[int, ...]] = {
    name: tuple(c.number for c in CRITERIA if c.category == name)
    for name in ("structure", "relevance", "quality")
}
MAX_SCORE = sum(MAXIMA.values())  # 19
SCENARIOS = (1, 2, 3, 4)
#: A judged answer's ``status`` (`Judged`); ``stopped`` is the run engine's `STOPPED`.
STATUSES = ("ok", "invalid", "error", "stopped")

_SCENARIO_NAME = re.compile(r"(?P<generator>.+)_scenario_(?P<scenario>\d+)")
# "7: 1", "C7 = 1", "criterion 7: 1 point" - a whole line and nothing else, so that a judge
# echoing the rubric ("7. the final choice is given explicitly: 0-1") is not read as scores
_SCORE_LINE = re.compile(
    r"^[\s\-*•]*(?:c|criterion\s*)?(\d{1,3})\s*[:=]\s*(-?\d+(?:\.\d+)?)\s*(?:points?|pts?)?[\s,.;]*$",
    re.I | re.M,
)
_KEY = re.compile(r"^\s*(?:c|criterion\s*)?(\d{1,3})\s*$", re.I)


Pairs = list[tuple[Any, Any]]


class RubricError(OutputParseError):
    """A judge reply or score dict that is not a valid 15-criterion judgment."""


def check_scores(scores: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> dict[int, int]:
    """Validate a criterion → points mapping: keys 1-15 exactly, whole points within range.

    Keys may be ints, digit strings or ``"C<n>"``; points may be ints, integral floats or digit
    strings. `scores` may be a mapping or (key, points) pairs, so that a reply giving one
    criterion twice with different points is caught.

    Returns:
        ``{1: points, ..., 15: points}`` in criterion order.

    Raises:
        RubricError: A missing criterion, an unknown key, or points that are not a whole number
            within the criterion's range (every problem is named).
    """
    parsed: dict[int, int] = {}
    problems: list[str] = []
    unknown: list[str] = []
    named: set[int] = set()  # criteria given, validly or not
    for key, value in scores.items() if isinstance(scores, Mapping) else scores:
        number = _criterion(key)
        if number is None or number not in MAXIMA:
            unknown.append(str(key))
            continue
        named.add(number)
        points = _points(value)
        if points is None:
            problems.append(f"C{number} is {value!r}, not a whole number of points")
        elif not 0 <= points <= MAXIMA[number]:
            problems.append(f"C{number} = {points} is outside 0-{MAXIMA[number]}")
        elif number in parsed and parsed[number] != points:
            problems.append(f"C{number} is given twice ({parsed[number]} and {points})")
        else:
            parsed[number] = points
    missing = [n for n in MAXIMA if n not in named]
    if missing:
        problems.insert(0, f"missing {_ranges(missing)}")
    if unknown:
        more = "..." if len(unknown) > 6 else ""
        problems.append(f"unknown criteria {', '.join(unknown[:6])}{more}")
    if problems:
        raise RubricError("; ".join(problems))
    return {n: parsed[n] for n in MAXIMA}


def parse_scores(text: str) -> dict[int, int]:
    """Read a judge's reply and validate it with `check_scores`.

    The reply may hold a JSON or Python-repr dict (prose and code fences around it allowed), or
    ``n: points`` lines.

    Raises:
        RubricError: No scores found, two different score dicts, or an invalid judgment.
    """
    found, lines = _dicts(text), _SCORE_LINE.findall(_unmark(text))
    if not found and not lines:
        raise RubricError("no score dict or 'n: points' lines in the reply")
    distinct = {json.dumps(sorted((str(k), str(v)) for k, v in pairs)) for pairs in found}
    if len(distinct) > 1:
        raise RubricError(f"{len(distinct)} different score dicts in the reply")
    scores = check_scores(found[0] if found else lines)
    # lines beside a dict (or a multi-line dict's own lines) must say the same
    clashes = [f"C{n}" for key, value in lines if scores.get(n := int(key)) != _points(value)]
    if clashes:
        raise RubricError(f"the reply's 'n: points' lines disagree with its dict on {clashes[0]}")
    return scores


def read_score_dict(value: Any) -> dict[int, int]:
    """A judged file's ``score_dict`` (a mapping, or a string holding one), validated.

    Raises:
        RubricError: Missing, unreadable or invalid.
    """
    if value is None:
        raise RubricError("no score_dict")
    if isinstance(value, str):
        return parse_scores(value)
    if not isinstance(value, Mapping):
        raise RubricError(f"score_dict is a {type(value).__name__}, not a dict")
    return check_scores(value)


def category_sums(scores: Mapping[int, int]) -> dict[str, int]:
    """Points per category (structure, relevance, quality) of validated scores."""
    return {name: sum(scores[n] for n in numbers) for name, numbers in CATEGORIES.items()}


def file_generator(path: str | Path) -> tuple[str, int | None]:
    """The generator and scenario a file's name gives (``gpt4_scenario_3`` → gpt4, 3)."""
    stem = Path(path).stem
    match = _SCENARIO_NAME.fullmatch(stem)
    if match is None:
        return stem, None
    return match["generator"], int(match["scenario"])


def text_key(text: str) -> str:
    """A comparison's text reduced to lower-case letters and digits.

    Copies of one answer differ in whitespace, quoting or markdown (the human annotation tables
    flatten newlines); their keys do not.
    """
    return re.sub(r"[\W_]+", "", text).lower()


@dataclass(frozen=True)
class Comparison:
    """One comparative answer.

    Attributes:
        object1: The first object compared.
        object2: The second object.
        aspect: The aspect the question focuses on, or None.
        text: The answer (the files' ``comparison`` field).
        generator: Who wrote it (record field, else the file name).
        scenario: The prompting scenario 1-4, or None (record field, else the file name).
        source: The file it was read from.
        where: Its place in that file (``index N`` / ``line N``).
        record: The record as read, for fields this class does not name.
    """

    object1: str
    object2: str
    aspect: str | None
    text: str
    generator: str
    scenario: int | None
    source: Path
    where: str
    record: dict[str, Any] = field(repr=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity for matching copies of this answer: both objects and the text (normalised)."""
        return (self.object1.strip().lower(), self.object2.strip().lower(), text_key(self.text))


@dataclass(frozen=True)
class Judged:
    """A judged comparative answer.

    Attributes:
        answer: The answer.
        scores: The validated criterion points, or None (invalid, failed or unchecked).
        total: The sum of `scores` when they are valid, else the total the file records
            (``score``; None for moot's own invalid or failed judgments).
        problem: Why the judgment is invalid or failed; None when it is ``ok``.
        status: ``ok``; ``invalid`` (the reply or ``score_dict`` breaks the rubric); ``error``
            (the judge call failed for good); or ``stopped`` (not judged: ``--budget`` was
            reached first; not a failure).
    """

    answer: Comparison
    scores: dict[int, int] | None
    total: float | None
    problem: str | None
    status: str

    @property
    def valid(self) -> bool:
        """True when every criterion was read and in range."""
        return self.scores is not None


def load_comparisons(path: Path) -> list[Comparison]:
    """Read comparative answers (JSON list or JSONL, see the module docstring).

    Raises:
        InputError: An answer without both objects or without text, a non-string aspect, a
            scenario other than 1-4, or no records at all.
    """
    path = Path(path)
    default_generator, default_scenario = file_generator(path)
    answers = []
    for where, item in read_records(path):
        if not isinstance(item, dict):
            raise InputError(path, f"expected an object, got {json_type(item)}", where)
        texts = {}
        for name in ("object1", "object2", "comparison"):
            value = item.get(name)
            if not isinstance(value, str) or not value.strip():
                raise InputError(path, f"missing or empty {name!r}", where)
            texts[name] = value.strip()
        aspect = item.get("aspect")
        if aspect is not None and not isinstance(aspect, str):
            raise InputError(path, f"'aspect' must be text, got {json_type(aspect)}", where)
        generator = item.get("generator", default_generator)
        if not isinstance(generator, str) or not generator.strip():
            problem = f"'generator' must be a non-empty string, got {generator!r}"
            raise InputError(path, problem, where)
        scenario = item.get("scenario", default_scenario)
        if scenario is not None:
            scenario = _scenario(path, where, scenario)
        answers.append(
            Comparison(
                texts["object1"],
                texts["object2"],
                aspect.strip() or None if aspect else None,
                texts["comparison"],
                generator.strip(),
                scenario,
                path,
                where,
                item,
            )
        )
    if not answers:
        raise InputError(path, "no answers")
    return answers


def load_judged(path: Path) -> list[Judged]:
    """Read judged answers: moot's own (with ``status``) or files judged elsewhere.

    A judgment that breaks the rubric is ``invalid``, named and counted, and never makes the
    file unreadable: a ``score_dict`` with criteria missing, renamed or out of range, points as
    words, a ``score`` outside 0-19 or not a number, a ``score`` that is not the sum of a valid
    ``score_dict``, or neither field. A record with a ``score`` and no ``score_dict`` is ``ok``
    but unchecked (`Judged.valid` is False).

    The total of a judgment is the sum of its criteria, as the paper computes it (Section 2.1:
    the judge's own total "is usually not the same as the actual sum"): for an invalid one, the
    sum of C1-C15 when all fifteen are given as whole numbers, whatever their range (extra keys
    ignored), else None. That is the rule under which CompQA's published means reproduce
    (docs/faithfulness.md); a recorded ``score`` alone is the total only when no ``score_dict``
    is given.

    Raises:
        InputError: What `load_comparisons` rejects, or an unknown ``status``.
    """
    judged = []
    for answer in load_comparisons(path):
        record, where = answer.record, answer.where
        status = record.get("status", "ok")
        if status not in STATUSES:
            raise InputError(path, f"unknown status {status!r}", where)
        scores, total, problem = None, None, record.get("problem")
        if status == "ok":
            scores, total, problem = _judgment(record.get("score_dict"), record.get("score"))
            status = "ok" if problem is None else "invalid"
        else:
            problem = problem or status
        judged.append(Judged(answer, scores, total, problem, status))
    return judged


def _judgment(value: Any, recorded: Any) -> tuple[dict[int, int] | None, float | None, str | None]:
    """(valid scores, total, problem) of a judgment judged elsewhere (see `load_judged`)."""
    given = None if recorded is None else _points(recorded)
    if recorded is not None and (given is None or not 0 <= given <= MAX_SCORE):
        bad = f"'score' {recorded!r} is not a whole number in 0-{MAX_SCORE}"
    else:
        bad = None
    if value is None:
        if recorded is None:
            return None, None, "no 'score' and no 'score_dict'"
        return None, None if bad else float(given), bad  # type: ignore[arg-type]
    try:
        scores = read_score_dict(value)
    except RubricError as exc:
        found = criteria_sum(value)
        if bad is None and found is not None and given is not None and given != found:
            bad = f"'score' {recorded!r} is not the sum of its criteria ({found})"
        problems = "; ".join(filter(None, [f"score_dict: {exc}", bad]))
        return None, None if found is None else float(found), problems
    found = sum(scores.values())
    if bad is None and given is not None and given != found:
        bad = f"'score' {recorded!r} is not the sum of 'score_dict' ({found})"
    return (None if bad else scores), float(found), bad


def criteria_sum(value: Any) -> int | None:
    """The sum of C1-C15 of a score dict that names all fifteen as whole numbers, else None.

    Points out of range and extra keys do not matter here: this is the total of a judgment
    that breaks the rubric only in its ranges (or adds keys), as the paper's tables count it.
    """
    pairs: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        pairs = value.items()
    elif isinstance(value, str):
        found = _dicts(value)
        pairs = found[0] if len(found) == 1 else _SCORE_LINE.findall(_unmark(value))
    else:
        return None
    points: dict[int, int] = {}
    for key, raw in pairs:
        number, amount = _criterion(key), _points(raw)
        if number in MAXIMA and amount is not None and points.setdefault(number, amount) != amount:
            return None  # one criterion given twice, differently
    return sum(points.values()) if len(points) == len(MAXIMA) else None


def _criterion(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    if isinstance(key, str):
        match = _KEY.match(key)
        return int(match.group(1)) if match else None
    return None


def _points(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def _dicts(text: str) -> list[Pairs]:
    """The (key, value) pairs of every dict the reply holds, repeated keys kept.

    JSON and Python literals are read as such; ``{C1: 1, ...}`` (unquoted keys, neither) as
    ``n: points`` pairs; a dict wrapping one dict (``{"scores": {...}}``) is unwrapped.
    """
    found: list[Pairs] = []
    for chunk in candidates(text):
        if not chunk.startswith("{"):
            continue
        pairs = _literal_pairs(chunk)
        # one dict, perhaps truncated, with nothing after its end
        if pairs is None and chunk.count("{") == 1 and chunk.find("}") in (-1, len(chunk) - 1):
            pairs = _SCORE_LINE.findall(_unmark(chunk.strip("{}").replace(",", "\n")))
        if pairs and len(pairs) == 1 and _is_pairs(pairs[0][1]):
            pairs = pairs[0][1]
        if pairs:
            found.append(pairs)
    return found


def _literal_pairs(chunk: str) -> Pairs | None:
    """The pairs of a JSON or Python dict literal (nested dicts as pairs too), or None."""
    with contextlib.suppress(ValueError, RecursionError):
        value = json.loads(chunk, object_pairs_hook=list)
        return mended(value) if _is_pairs(value) else None
    try:
        node = ast.parse(chunk, mode="eval").body
        if not isinstance(node, ast.Dict) or None in node.keys:
            return None
        pairs = []
        for key, value in zip(node.keys, node.values, strict=True):
            inner = _literal_pairs(ast.unparse(value)) if isinstance(value, ast.Dict) else None
            pairs.append((ast.literal_eval(key), inner or ast.literal_eval(value)))
        return mended(pairs)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _is_pairs(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value)


def _unmark(text: str) -> str:
    return re.sub(r"[*`\"']", "", text)


def _ranges(numbers: list[int]) -> str:
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"C{a}" if a == b else f"C{a}-C{b}" for a, b in spans)


def _scenario(path: Path, where: str, value: Any) -> int:
    text = str(value).strip()
    if not text.isdigit() or int(text) not in SCENARIOS:
        raise InputError(path, f"unknown scenario {value!r} (expected 1, 2, 3 or 4)", where)
    return int(text)
