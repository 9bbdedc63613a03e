"""CompQA rubric judging of answer files, on the run engine.

Every answer of every file is judged once (a text shared by two files, once) through
`moot.core.runs.run_items`: judgments are appended to ``judgments.jsonl`` under a
stable id (judge, temperature, seed, shots, constrained decoding, prompt digest, answer), so a
rerun judges only what is missing; the folder is claimed for one judge and its settings; a call
that failed for good is an ``error`` (exit 1, judged again on rerun). Then, atomically:

- ``judged/<input file name>``: the answer records with ``score_dict``, ``score``,
  ``categories``, ``status`` (ok | invalid | error | stopped), ``problem``, ``repaired``,
  ``replies``, ``judge`` (read back by `moot.core.data.compqa.load_judged`);
- ``summary.json`` and ``summary.md``: per file and overall,
  `moot.core.metrics.compqa_report.group_stats` of the judged file as written (answers, valid,
  invalid, errors, stopped, mean total ± sample std of the valid judgments, category and
  criterion means), repairs, and the token ledger. Invalid, failed and stopped judgments are
  counted, never summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.agents.compqa_rubric_judge import (
    SHOTS,
    TEMPLATES,
    judge_comparison,
)
from moot.core.data.compqa import (
    CATEGORIES,
    MAX_SCORE,
    Comparison,
    file_generator,
    load_comparisons,
    load_judged,
)
from moot.core.data.records import (
    atomic_write,
    name_problem,
    stable_id,
    write_json,
    write_jsonl,
)
from moot.core.errors import ConfigError, InputError
from moot.core.llm.spec import Role
from moot.core.metrics.compqa_report import group_stats
from moot.core.runs import STOPPED
from moot.core.tables import render_table, show
from moot.graphs.judging import EvalResult, Judging, judge_identity


@dataclass(frozen=True)
class AnswerFile:
    """One ``--answers`` file and its answers."""

    path: Path
    answers: list[Comparison]


def load_answer_files(paths: Sequence[Path]) -> list[AnswerFile]:
    """Read answer files (`moot.core.data.compqa.load_comparisons`), one judged file per name.

    Raises:
        InputError: A malformed file or answer (e.g. an answer without objects).
        ConfigError: Two files share a name, so their judged files would collide.
    """
    seen: dict[str, Path] = {}
    for path in map(Path, paths):
        if path.name in seen:
            raise ConfigError(
                f"--answers {seen[path.name]} and {path} share the file name {path.name!r}: "
                "their judged files would collide; rename one"
            )
        seen[path.name] = path
        problem = name_problem(path.name)  # judged/<name> is written through a longer name
        if problem:
            raise InputError(path, f"{problem}, for its judged copy; rename it")
    return [AnswerFile(path, load_comparisons(path)) for path in seen.values()]


async def evaluate_compqa(
    files: Sequence[AnswerFile],
    judging: Judging,
    *,
    shots: int = 0,
    constrained: bool = False,
) -> EvalResult:
    """Judge every answer with the CompQA rubric; write the judged files and the summary.

    Args:
        files: Answer files (`load_answer_files`).
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.
        shots: Few-shot examples in the prompt: 0, 1 or 3.
        constrained: Ask for schema-constrained JSON scores.

    Returns:
        The summary and the judgment log's records (``status`` ``error`` for failed calls).

    Raises:
        ConfigError: `shots` not 0, 1 or 3, or `out_dir` claimed for other settings.
    """
    identity, claim, ids, items, by_id = _items(
        files, judging.role, shots, judging.seed, constrained
    )

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        judged = await judge_comparison(
            judging.client,
            judging.role,
            by_id[item["id"]],
            shots=shots,
            seed=judging.seed,
            constrained=constrained,
        )
        return {**item, "status": "ok", "judgment": judged.to_json()}

    run = await judging.run(items, task, claim)
    records = run.records
    logged = {r["id"]: r for r in records}
    per_file: dict[str, Any] = {}
    everything: list[Any] = []
    repaired = 0
    for file, file_ids in zip(files, ids, strict=True):
        judged = [
            _judged(a, logged[i], judging.role.spec.name)
            for a, i in zip(file.answers, file_ids, strict=True)
        ]
        target = Path(judging.out_dir) / "judged" / file.path.name
        if file.answers[0].where.startswith("line"):
            write_jsonl(target, judged)
        else:
            write_json(target, judged)
        reread = load_judged(target)  # the statistics are those of the file as written
        generator, scenario = file_generator(file.path)
        per_file[file.path.name] = {
            "path": str(file.path),
            "judged": str(target),
            "generator": generator,
            "scenario": scenario,
            "repaired": sum(bool(r["repaired"]) for r in judged),
            **group_stats(reread),
        }
        everything += reread
        repaired += per_file[file.path.name]["repaired"]
    summary = {
        "evaluation": "compqa",
        **identity,
        "max_score": MAX_SCORE,
        "files": per_file,
        "overall": {"repaired": repaired, **group_stats(everything)},
        "ledger": judging.client.ledger.to_json(),
    }
    write_json(Path(judging.out_dir) / "summary.json", summary)
    markdown = summary_markdown(summary)
    atomic_write(Path(judging.out_dir) / "summary.md", lambda f: f.write(markdown))
    return EvalResult(records, summary, [run.tally])


def _items(
    files: Sequence[AnswerFile], role: Role, shots: int, seed: int, constrained: bool
) -> tuple[dict, dict, list[list[str]], list[dict[str, Any]], dict[str, Comparison]]:
    """The identity, the claim, each file's answer ids, the items and each item's answer.

    Raises:
        ConfigError: `shots` not 0, 1 or 3.
    """
    if shots not in SHOTS:
        raise ConfigError(f"--shots must be 0, 1 or 3, got {shots}")
    identity = judge_identity(role, TEMPLATES, seed=seed, shots=shots, constrained=constrained)
    ids = [
        [stable_id("compqa", identity, a.object1, a.object2, a.aspect, a.text) for a in f.answers]
        for f in files
    ]
    answers = [
        (i, a)
        for file, file_ids in zip(files, ids, strict=True)
        for i, a in zip(file_ids, file.answers, strict=True)
    ]
    by_id = dict(answers)  # an answer in two files has one id: one item, judged once
    items = [{"id": i, "file": a.source.name, "where": a.where} for i, a in answers]
    return identity, {"evaluation": "compqa", **identity}, ids, items, by_id


def summary_markdown(summary: dict[str, Any]) -> str:
    """``summary.md``: one row per file and an overall row, then the token totals."""
    names = list(CATEGORIES)
    table: list[list[object]] = [
        ["file", "answers", "valid", "invalid", "errors", "stopped", "repaired", "mean ± std"]
        + names
    ]
    groups = [*summary["files"].items(), ("**overall**", summary["overall"])]
    for name, s in groups:
        spread = show(s["mean"])
        if s["std"] is not None:
            spread += f" ± {show(s['std'])}"
        counts = [s[k] for k in ("n", "n_valid", "invalid", "errors", "stopped", "repaired")]
        means = [show(s["categories"][n]) for n in names]
        table.append([name, *counts, spread, *means])
    total = summary["ledger"]["total"]
    lines = [
        f"# CompQA rubric: judge {summary['judge']}, {summary['shots']}-shot",
        "",
        f"Totals out of {summary['max_score']}, over valid judgments only; invalid judgments "
        "(the reply broke the rubric), errors (the call failed) and stopped answers (not judged: "
        "--budget was reached) are counted, never summed.",
        "",
        render_table(table, markdown=True),
        "",
        f"Judge calls: {total['calls']} ({total['cache_hits']} cached, "
        f"{total['failures']} failed), "
        f"{total['prompt_tokens']} prompt + {total['completion_tokens']} completion tokens.",
    ]
    return "\n".join(lines) + "\n"


def _judged(answer: Comparison, logged: dict[str, Any], judge: str) -> dict[str, Any]:
    """The judged-file record: the answer as read plus the judgment (see the module docstring)."""
    if logged["status"] != "ok":
        judgment = {
            "score_dict": None,
            "score": None,
            "categories": None,
            "problem": logged.get("error")
            or (
                "not judged: --budget reached"
                if logged["status"] == STOPPED
                else "the judge call failed"
            ),
            "repaired": False,
            "replies": [],
        }
        status = STOPPED if logged["status"] == STOPPED else "error"
    else:
        judgment = logged["judgment"]
        status = "ok" if judgment["score_dict"] is not None else "invalid"
    return {
        **answer.record,
        "score_dict": judgment["score_dict"],
        "score": judgment["score"],
        "categories": judgment["categories"],
        "status": status,
        "problem": judgment["problem"],
        "repaired": judgment["repaired"],
        "replies": judgment["replies"],
        "judge": judge,
    }
