"""CompQA distillation: judged comparative answers that scored high become SFT records.

The inputs are CompQA's judged answers (``evaluated_summaries/<judge>/*.json``): JSON lists of
``{object1, object2, aspect, comparison, score_dict, score}``, where ``score_dict`` holds the 15
rubric criteria (C1-C8 and C13-C15 one point, C9-C12 two) and ``score`` their sum, 0-19. A file
``<generator>_scenario_<N>.json`` holds generator's answers in prompting scenario N; any other file
name is a generator without scenarios (``cam.json``, ``human.json``).

Files are read with `moot.core.data.compqa.load_judged`, so the score is checked, not trusted: an
invalid judgment (a ``score_dict`` that breaks the rubric, a ``score`` outside 0-19 or not the
sum of its ``score_dict``, or moot's own ``invalid``/``error`` records) is skipped and counted;
a ``score`` without any ``score_dict`` is kept unchecked and counted.

The paper (Section 4) compiles "the answers from the models gaining >= 18 points", 1,244 pairs,
without naming the judge. moot's rule (every answer judged >= 18, a valid judgment, each
question-answer pair once) keeps 1,056 from the released GPT-4 judge's files (1,058 score >= 18:
one invalid judgment, one repeated answer), 1,092 from GPT-3.5's and 1,490 from Perplexity's.
No rule tried on the released files gives 1,244 (docs/faithfulness.md lists the counts); the
judge the paper's appendix prefers, Llama-3-70B, has no judged files in the snapshot here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.compqa import MAX_SCORE, Judged, file_generator, load_judged
from moot.core.data.records import (
    atomic_replace_dir,
    check_out_dir,
    package_versions,
    stable_id,
    write_json,
    write_jsonl,
)
from moot.core.errors import ConfigError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.tables import render_table
from moot.prompts import render, template_source
from moot.training.dataset_folder import save_table
from moot.training.sft_data import source_digest

KIND = "compqa-distill"
DEFAULT_MIN_SCORE = 18  # the CompQA paper's threshold for a high-quality answer
QUESTION_TEMPLATE = "compqa/question.j2"


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
        invalid_judgments: Answers skipped because their judgment is invalid or failed.
        unchecked_scores: Answers kept on a ``score`` that no ``score_dict`` backs.
    """

    out_dir: Path
    min_score: float
    by_generator: dict[str, dict[str, int]] = field(default_factory=dict)
    by_scenario: dict[str, dict[str, int]] = field(default_factory=dict)
    read: int = 0
    kept: int = 0
    duplicates: int = 0
    invalid_judgments: int = 0
    unchecked_scores: int = 0

    def table(self, markdown: bool = False) -> str:
        """A table of answers read and kept per generator: plain text, or Markdown."""
        rows = [("generator", "read", "kept")]
        rows += [(g, str(c["read"]), str(c["kept"])) for g, c in self.by_generator.items()]
        rows.append(("total", str(self.read), str(self.kept)))
        return render_table(rows, markdown=markdown)


def question(object1: str, object2: str, aspect: str | None) -> str:
    """The user turn: ``What is better: A or B? Focus on <aspect>.`` (no aspect, no focus)."""
    return render(QUESTION_TEMPLATE, object1=object1, object2=object2, aspect=aspect or "")


def compqa_record(judged: Judged) -> dict[str, Any]:
    """The SFT record of one judged answer (see docs/schemas.md)."""
    answer = judged.answer
    generator, scenario = answer.generator, answer.scenario
    prompt = question(answer.object1, answer.object2, answer.aspect)
    completion = answer.text
    key = (answer.object1, answer.object2, answer.aspect, " ".join(completion.split()))
    return {
        # the answer's text is part of the id: a file holds several answers to one question
        "id": stable_id("compqa", generator, scenario, *key),
        "source": f"compqa:{generator}",
        "generator": generator,
        "scenario": scenario,
        "object1": answer.object1,
        "object2": answer.object2,
        "aspect": answer.aspect,
        "score": judged.total,
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
        answers = load_judged(Path(path))
        kept_here = 0
        for judged_answer in answers:
            record = _keep(judged_answer, min_score, summary)
            if record is not None:
                key = tuple(" ".join(m["content"].split()) for m in record["messages"])
                if key in seen:
                    summary.duplicates += 1
                    record = None
                else:
                    seen.add(key)
                    records.append(record)
                    kept_here += 1
            answer = judged_answer.answer
            scenario = "none" if answer.scenario is None else str(answer.scenario)
            for name, table in (
                (answer.generator, summary.by_generator),
                (scenario, summary.by_scenario),
            ):
                counts = table.setdefault(name, {"read": 0, "kept": 0})
                counts["read"] += 1
                counts["kept"] += record is not None
        generator, scenario_number = file_generator(path)
        inputs.append(
            {
                "path": str(path),
                "sha256": source_digest(path),
                "generator": generator,
                "scenario": scenario_number,
                "read": len(answers),
                "kept": kept_here,
            }
        )
        summary.read += len(answers)
    summary.kept = len(records)
    if records:
        atomic_replace_dir(lambda tmp: _write(tmp, records, summary, inputs), out)
    return summary


def _keep(judged: Judged, min_score: float, summary: CompqaSummary) -> dict[str, Any] | None:
    """The SFT record of a usable answer at or above the threshold, counting what is skipped."""
    if judged.status != "ok":
        summary.invalid_judgments += 1
        return None
    summary.unchecked_scores += judged.scores is None
    if judged.total is None or judged.total < min_score:
        return None
    return compqa_record(judged)


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
    save_table(records, tmp / "dataset", features)
    write_json(tmp / "manifest.json", _manifest(summary, inputs))
    write_card(tmp, _card(tmp, summary))


def _manifest(summary: CompqaSummary, inputs: list[dict[str, Any]]) -> dict[str, Any]:
    below = summary.read - summary.kept - summary.duplicates - summary.invalid_judgments
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
            "invalid_judgments": summary.invalid_judgments,
            "unchecked_scores": summary.unchecked_scores,
        },
        "by_generator": summary.by_generator,
        "by_scenario": summary.by_scenario,
        "prompt": {"question": QUESTION_TEMPLATE, "sha256": hashlib.sha256(template).hexdigest()},
        "versions": package_versions("moot", "datasets"),
        "outputs": {"dataset_jsonl": "dataset.jsonl", "dataset": "dataset/"},
    }


def _card(tmp: Path, summary: CompqaSummary) -> Card:
    """The distilled dataset's card (`moot.core.hub.cards`), from the folder being built."""
    return Card(
        kind="dataset",
        title="CompQA distilled answers",
        summary=(
            "Comparative answers from CompQA's judged files that scored at least "
            f"{summary.min_score:g} of {MAX_SCORE}, as chat SFT records, built by "
            "`moot data distill-compqa` as CompQA (Nikishina et al., 2025) Section 4 builds its "
            'SFT data. The user turn asks "What is better: A or B?" (adding "Focus on '
            '<aspect>." when the question has one); the assistant turn is the judged answer. '
            f"Repeated question-and-answer pairs dropped: {summary.duplicates}; invalid or "
            f"failed judgments skipped: {summary.invalid_judgments}; scores kept without a "
            f"`score_dict` to check them: {summary.unchecked_scores}."
        ),
        schema="Output folder of `moot data distill-compqa`",
        sizes=[
            ("records", summary.kept),
            ("answers read", summary.read),
            ("`dataset.jsonl` bytes", (tmp / "dataset.jsonl").stat().st_size),
            ("bytes", folder_bytes(tmp)),
        ],
        papers=["compqa"],
        prompts=[(QUESTION_TEMPLATE, "CompQA, Section 4 (the SFT data's questions)")],
        tags=["compqa", "comparative-qa", "sft", "distillation"],
        data_files={"train": "dataset.jsonl"},
        notes=[("Answers read and kept per generator", summary.table(markdown=True))],
    )
