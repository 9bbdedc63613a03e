"""DebateQA Dispute Awareness (D.A.) on the run engine.

Each answer's judgment has a stable id and goes through `moot.core.runs.run_claimed` into
``judgments.jsonl``: a rerun judges only what is missing, the folder is claimed for one judge and
its settings, a call that failed for good is an error (exit 1, retried on rerun) and an
unparsable reply is a final parse failure, counted apart and never scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.agents.label_judges import DA_PROMPT, DA_REPAIR, judge_dispute_awareness
from moot.core.data.questions import Answer, Question
from moot.core.data.records import stable_id
from moot.core.errors import InputError
from moot.core.llm.spec import Role
from moot.core.runs import outcome_counts
from moot.graphs.judging import EvalResult, Judging, judge_identity


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
    judging: Judging,
) -> EvalResult:
    """DebateQA D.A.: the share of answers judged to say that their question is debated.

    Args:
        answers: Answers with their question text (see `with_questions`).
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    identity, claim, items, by_id = _da_items(answers, judging.role, judging.seed)

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        answer = by_id[item["id"]]
        judged = await judge_dispute_awareness(
            judging.client, judging.role, answer.question or "", answer.text, seed=judging.seed
        )
        return {**item, "status": "ok", "judgment": judged.to_json()}

    run = await judging.run(items, task, claim)
    records = run.records
    judged = [r for r in records if r["status"] == "ok"]
    labels = [r["judgment"]["label"] for r in judged if r["judgment"]["ok"]]
    summary = {
        "evaluation": "dispute_awareness",
        **identity,
        "answers": len(records),
        "scored": len(labels),
        "parse_failures": len(judged) - len(labels),
        **outcome_counts(records),
        "dispute_aware": sum(labels),
        "da": sum(labels) / len(labels) if labels else None,
        "ledger": judging.client.ledger.to_json(),
    }
    return EvalResult(records, summary, [run.tally])


def _da_items(
    answers: Sequence[Answer], role: Role, seed: int
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], dict[str, Answer]]:
    """The judge's identity, the folder's claim, the items and each item's answer."""
    identity = judge_identity(role, (DA_PROMPT, DA_REPAIR), seed=seed)
    ids = [stable_id("da", identity, a.id, a.question, a.text) for a in answers]
    items = [
        {"id": i, "answer_id": a.id, "question": a.question}
        for i, a in zip(ids, answers, strict=True)
    ]
    return identity, {"evaluation": "da", **identity}, items, dict(zip(ids, answers, strict=True))
