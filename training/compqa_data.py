"""CompQA distillation: judged comparative answers that scored high become SFT records.

The inputs are CompQA's judged answers (``evaluated_summaries/<judge>/*.json``): JSON lists of
``{object1, object2, aspect, comparison, score_dict, score}``, where ``score_dict`` holds the 15
rubric criteria (C1-C8 and C13-C15 one point, C9-C12 two) and ``score`` their sum, 0-19. A file
``<generator>_scenario_<N>.json`` holds generator's answers in prompting scenario N; any other file
name is a generator without scenarios (``cam.json``, ``human.json``).

The score is checked, not trusted: when ``score_dict`` parses (an object, or a string holding a
JSON or Python dict of numbers), a ``score`` that differs from its sum is an error, since the
record is then inconsistent and either number may be wrong. An unparseable or missing
``score_dict`` leaves ``score`` unchecked, and such records are counted in the manifest.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError, InputError
from moot.core.records import (
    atomic_replace_dir,
    read_input_text,
    stable_id,
    write_json,
    write_jsonl,
)
from moot.prompts import render, template_source
from moot.training.data import check_out_dir, source_digest, text_table, versions

KIND = "compqa-distill"
MAX_SCORE = 19
DEFAULT_MIN_SCORE = 18  # the CompQA paper's threshold for a high-quality answer
QUESTION_TEMPLATE = "compqa/question.j2"
_SCENARIO = re.compile(r"(?P<generator>.+)_scenario_(?P<scenario>\d+)")


@dataclass
class CompqaSummary:
    """What `distill_compqa` read and kept.

    Attributes:
        out_dir: The output folder (written only when `kept` is not 0).
        min_score: The threshold used.
        by_generator: ``{generator: {"read": n, "kept": n}}``, in input order.
        by_scenario: The same by scenario (``"1"``...; ``"none"`` for files without scenarios).
        read: Answers read.
        kept: Records written (scored at least `min_score`, duplicates dropped).
        duplicates: Answers at or above the threshold dropped as repeats of an earlier one.
        unchecked_scores: Answers whose ``score_dict`` could not be read to check ``score``.
    """

    out_dir: Path
    min_score: float
    by_generator: dict[str, dict[str, int]] = field(default_factory=dict)
    by_scenario: dict[str, dict[str, int]] = field(default_factory=dict)
    read: int = 0
    kept: int = 0
    duplicates: int = 0
    unchecked_scores: int = 0

    def table(self) -> str:
        """A plain-text table of answers read and kept per generator."""
        rows = [("generator", "read", "kept")]
        rows += [(g, str(c["read"]), str(c["kept"])) for g, c in self.by_generator.items()]
        rows.append(("total", str(self.read), str(self.kept)))
        return text_table(rows)


def file_generator(path: str | Path) -> tuple[str, int | None]:
    """The generator and scenario a judged file's name gives (``gpt4_scenario_3`` → gpt4, 3)."""
    stem = Path(path).stem
    match = _SCENARIO.fullmatch(stem)
    if match is None:
        return stem, None
    return match["generator"], int(match["scenario"])


def question(object1: str, object2: str, aspect: str | None) -> str:
    """The user turn: ``What is better: A or B? Focus on <aspect>.`` (no aspect, no focus)."""
    return render(QUESTION_TEMPLATE, object1=object1, object2=object2, aspect=aspect or "")


def compqa_record(answer: dict[str, Any], generator: str, scenario: int | None) -> dict[str, Any]:
    """The SFT record of one validated judged answer (see docs/schemas.md)."""
    prompt = question(answer["object1"], answer["object2"], answer["aspect"])
    completion = answer["comparison"]
    key = (answer["object1"], answer["object2"], answer["aspect"], " ".join(completion.split()))
    return {
        # the answer's text is part of the id: a file holds several answers to one question
        "id": stable_id("compqa", generator, scenario, *key),
        "source": f"compqa:{generator}",
        "generator": generator,
        "scenario": scenario,
        "object1": answer["object1"],
        "object2": answer["object2"],
        "aspect": answer["aspect"],
        "score": answer["score"],
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": completion},
        ],
        "prompt": prompt,
        "completion": completion,
    }


def distill_compqa(
    judged: Sequence[str | Path], out: str | Path, *, min_score: float = DEFAULT_MIN_SCORE
) -> CompqaSummary:
    """Keep the judged answers scoring at least `min_score` and write them as an SFT dataset.

    Writes `out` (``dataset.jsonl``, ``dataset/``, ``manifest.json``, ``README.md``) as a whole,
    atomically, unless nothing passed. Identical question-and-answer pairs (whitespace collapsed)
    are kept once, the first in input order.

    Args:
        judged: Judged answer files, read in this order.
        out: The output folder: new, empty, or an earlier ``distill-compqa`` output.
        min_score: The lowest total score kept, 0-19 (default 18, the paper's threshold).

    Raises:
        ConfigError: `min_score` out of range, or an unusable `out`.
        InputError: A malformed file or record (named with its index).
    """
    if not 0 <= min_score <= MAX_SCORE:  # also rejects nan
        raise ConfigError(f"--min-score must be between 0 and {MAX_SCORE}, got {min_score:g}")
    out = Path(out)
    check_out_dir(out, KIND, judged)
    summary = CompqaSummary(out, min_score)
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    inputs = []
    for path in judged:
        generator, scenario = file_generator(path)
        answers, unchecked = _read_judged(Path(path))
        kept = [compqa_record(a, generator, scenario) for a in answers if a["score"] >= min_score]
        fresh = []
        for record in kept:
            key = tuple(" ".join(m["content"].split()) for m in record["messages"])
            if key not in seen:
                seen.add(key)
                fresh.append(record)
        records += fresh
        summary.read += len(answers)
        summary.duplicates += len(kept) - len(fresh)
        summary.unchecked_scores += unchecked
        for name, table in (
            (generator, summary.by_generator),
            ("none" if scenario is None else str(scenario), summary.by_scenario),
        ):
            counts = table.setdefault(name, {"read": 0, "kept": 0})
            counts["read"] += len(answers)
            counts["kept"] += len(fresh)
        inputs.append(
            {
                "path": str(path),
                "sha256": source_digest(path),
                "generator": generator,
                "scenario": scenario,
                "read": len(answers),
                "kept": len(fresh),
            }
        )
    summary.kept = len(records)
    if records:
        atomic_replace_dir(lambda tmp: _write(tmp, records, summary, inputs), out)
    return summary


def _read_judged(path: Path) -> tuple[list[dict[str, Any]], int]:
    try:
        items = json.loads(read_input_text(path))
    except ValueError as exc:
        raise InputError(path, f"invalid JSON: {exc}") from None
    if not isinstance(items, list):
        found = type(items).__name__
        raise InputError(path, f"expected a JSON list of judged answers, got {found}")
    answers, unchecked = [], 0
    for index, item in enumerate(items):
        answer, checked = _validate(path, item, f"index {index}")
        answers.append(answer)
        unchecked += not checked
    return answers, unchecked


def _validate(path: Path, item: Any, where: str) -> tuple[dict[str, Any], bool]:
    if not isinstance(item, dict):
        raise InputError(path, f"expected an object, got {type(item).__name__}", where)
    texts = {}
    for name in ("object1", "object2", "comparison"):
        value = item.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(path, f"missing or empty {name!r}", where)
        texts[name] = value.strip()
    aspect = item.get("aspect")
    if aspect is not None and not isinstance(aspect, str):
        raise InputError(path, f"'aspect' must be a string, got {type(aspect).__name__}", where)
    score = item.get("score")
    if not isinstance(score, int | float) or isinstance(score, bool) or math.isnan(score):
        raise InputError(path, f"missing or non-numeric 'score' ({score!r})", where)
    if not 0 <= score <= MAX_SCORE:
        raise InputError(path, f"'score' {score:g} is outside 0-{MAX_SCORE}", where)
    criteria = _score_dict(item.get("score_dict"))
    if criteria is not None and not math.isclose(sum(criteria), score, abs_tol=1e-6):
        problem = f"'score' {score:g} is not the sum of 'score_dict' ({sum(criteria):g})"
        raise InputError(path, problem, where)
    answer = {**texts, "aspect": aspect.strip() if aspect and aspect.strip() else None}
    return {**answer, "score": score}, criteria is not None


def _score_dict(value: Any) -> list[float] | None:
    """The criterion scores, or None when `value` is not a readable dict of numbers."""
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(value)
                break
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    if not isinstance(value, dict) or not value:
        return None
    numbers = list(value.values())
    if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
        return None
    return [float(n) for n in numbers]


def _write(
    tmp: Path, records: list[dict[str, Any]], summary: CompqaSummary, inputs: list[dict[str, Any]]
) -> None:
    import datasets

    datasets.disable_progress_bars()
    write_jsonl(tmp / "dataset.jsonl", records)
    string = datasets.Value("string")
    features = datasets.Features(
        {
            "id": string,
            "source": string,
            "generator": string,
            "scenario": datasets.Value("int32"),
            "object1": string,
            "object2": string,
            "aspect": string,
            "score": datasets.Value("float64"),
            "messages": datasets.List({"role": string, "content": string}),
            "prompt": string,
            "completion": string,
        }
    )
    columns = {name: [record[name] for record in records] for name in features}
    datasets.Dataset.from_dict(columns, features=features).save_to_disk(str(tmp / "dataset"))
    write_json(tmp / "manifest.json", _manifest(summary, inputs))
    (tmp / "README.md").write_text(_data_card(summary), encoding="utf-8")


def _manifest(summary: CompqaSummary, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    below = summary.read - summary.kept - summary.duplicates
    template = template_source(QUESTION_TEMPLATE).encode()
    return {
        "kind": KIND,
        "min_score": summary.min_score,
        "max_score": MAX_SCORE,
        "inputs": inputs,
        "counts": {
            "read": summary.read,
            "kept": summary.kept,
            "below_min_score": below,
            "duplicates": summary.duplicates,
            "unchecked_scores": summary.unchecked_scores,
        },
        "by_generator": summary.by_generator,
        "by_scenario": summary.by_scenario,
        "prompt": {"question": QUESTION_TEMPLATE, "sha256": hashlib.sha256(template).hexdigest()},
        "versions": versions(),
        "outputs": {"dataset_jsonl": "dataset.jsonl", "dataset": "dataset/"},
    }


def _data_card(summary: CompqaSummary) -> str:
    return f"""# CompQA distilled answers

Comparative answers from CompQA (Chekalina et al.) judged at least {summary.min_score:g} of \
{MAX_SCORE}, as chat SFT records; built by `moot data distill-compqa`. The user turn asks "What is
better: A or B?" (adding "Focus on <aspect>." when the question has one); the assistant turn is
the judged answer.

- records: {summary.kept}, from {summary.read} answers read
- repeated question-and-answer pairs dropped: {summary.duplicates}
- scores not checked against an unreadable `score_dict`: {summary.unchecked_scores}

Answers read and kept per generator:

```
{summary.table()}
```

Files: `dataset.jsonl` and `dataset/` (`datasets.load_from_disk`) hold the same records, with
columns `id`, `source` (`compqa:<generator>`), `generator`, `scenario`, `object1`, `object2`,
`aspect`, `score`, `messages`, `prompt`, `completion`; `manifest.json` holds the inputs (with
their SHA-256), the threshold and the counts per generator and scenario.

Train on it with `data.train` set to this folder (`moot train sft --config ...`), or combine it
with debate data first: `moot data mix --in <debate run> <this folder> --out <mix>`.
"""
