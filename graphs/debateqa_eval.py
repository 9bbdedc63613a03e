"""DebateQA Dispute Awareness (D.A.) on the run engine, and the summary of every label judge.

Each answer's judgment has a stable id and goes through `moot.core.runs.run_items` into
``judgments.jsonl``: a rerun judges only what is missing, the folder is claimed for one judge and
its settings, a call that failed for good is an error (exit 1, retried on rerun) and an
unparsable reply is a final parse failure, counted apart and never scored. `write_summary` writes
the summary of D.A. and of the BERDS evaluations (`moot.graphs.berds_eval`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.agents.label_judges import DA_PROMPT, DA_REPAIR, judge_dispute_awareness
from moot.core.data.questions import Answer, Question
from moot.core.data.records import ResultLog, atomic_write, claim_folder, stable_id, write_json
from moot.core.errors import InputError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import Progress, run_items
from moot.core.tables import render_table, show
from moot.graphs.debatune_eval import HOLDS, EvalResult, judge_identity


def with_questions(
    answers: Sequence[Answer],
    answers_path: Path,
    questions: Sequence[Question] = (),
    questions_path: Path | None = None,
) -> list[Answer]:
    """Give each answer its question text: its own ``question`` field, else the questions file's.

    Raises:
        InputError: An answer has no question text and no question with its id.
    """
    texts = {q.id: q.text for q in questions}
    joined = []
    for answer in answers:
        question = answer.question or texts.get(answer.id)
        if not question:
            problem = (
                f"no 'question' field and {questions_path} has no question with this id"
                if questions_path
                else "no 'question' field; pass --questions FILE to join questions by id"
            )
            raise InputError(answers_path, problem, f"id {answer.id}")
        joined.append(Answer(answer.id, answer.text, question))
    return joined


async def evaluate_dispute_awareness(
    answers: Sequence[Answer],
    out_dir: Path,
    role: Role,
    client: ModelClient,
    *,
    concurrency: int = 16,
    seed: int = 0,
    progress: Progress | None = None,
) -> EvalResult:
    """DebateQA D.A.: the share of answers judged to say that their question is debated.

    Args:
        answers: Answers with their question text (see `with_questions`).
        out_dir: Output folder (``judgments.jsonl``; claimed for this judge and settings).
        role: The judge (the paper used MiniCPM-2B and Phi-3 mini).
        client: The model layer.
        concurrency: Answers judged at once.
        seed: Sampling seed.
        progress: The command's progress bar.

    Raises:
        ConfigError: `out_dir` holds a run with other settings.
    """
    identity = judge_identity(role, (DA_PROMPT, DA_REPAIR), seed=seed)
    ids = [stable_id("da", identity, a.id, a.question, a.text) for a in answers]
    by_id = dict(zip(ids, answers, strict=True))
    items = [{"id": i, "answer_id": a.id} for i, a in zip(ids, answers, strict=True)]

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        answer = by_id[item["id"]]
        judged = await judge_dispute_awareness(
            client, role, answer.question or "", answer.text, seed=seed
        )
        return {**item, "status": "ok", "judgment": judged.to_json()}

    claim_folder(out_dir, "eval", {"evaluation": "da", **identity}, HOLDS)
    log = ResultLog(Path(out_dir) / "judgments.jsonl")
    run = await run_items(
        items, task, log, unit="judgments", concurrency=concurrency, progress=progress
    )
    records = run.records
    judged = [r for r in records if r["status"] == "ok"]
    labels = [r["judgment"]["label"] for r in judged if r["judgment"]["ok"]]
    summary = {
        "evaluation": "dispute_awareness",
        **identity,
        "answers": len(records),
        "scored": len(labels),
        "parse_failures": len(judged) - len(labels),
        "errors": len(records) - len(judged),
        "dispute_aware": sum(labels),
        "da": sum(labels) / len(labels) if labels else None,
        "ledger": client.ledger.to_json(),
    }
    return EvalResult(summary, records, [run.tally])


def write_summary(result: EvalResult, out_dir: Path, sources: dict[str, str]) -> str:
    """Write ``summary.json`` and ``summary.md`` atomically; return the Markdown.

    The table lists every summary value but the ledger and sources (D.A., BERDS, detector).
    """
    summary = {**result.summary, "sources": sources}
    write_json(Path(out_dir) / "summary.json", summary)
    rows = [
        (key, show(value, 4))
        for key, value in summary.items()
        if key not in ("ledger", "sources", "evaluation")
    ]
    table = render_table([("metric", "value"), *rows], markdown=True)
    text = f"# {summary['evaluation']}\n\n{table}\n"
    atomic_write(Path(out_dir) / "summary.md", lambda f: f.write(text))
    return text
