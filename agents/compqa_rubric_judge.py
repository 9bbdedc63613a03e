"""The CompQA rubric judge: one comparative answer → 15 criterion scores, or an explicit failure.

The prompt is the paper's (Nikishina et al., 2025, arXiv:2502.14476; templates
``compqa/rubric*.j2``); the reply is read by `moot.core.data.compqa.parse_scores`. A reply that
is not a valid judgment (no dict, a missing criterion, an unknown key, points out of range,
...) gets one repair round quoting the problem; if the second reply fails too, the judgment is
invalid: it names the problem, keeps every raw reply, and carries no scores (never a default).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from moot.core.data.compqa import MAXIMA, Comparison, category_sums, parse_scores
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn
from moot.prompts import render

RUBRIC_SYSTEM = "compqa/rubric_system.j2"
RUBRIC_PROMPT = "compqa/rubric.j2"
RUBRIC_REPAIR = "compqa/rubric_repair.j2"
TEMPLATES = (RUBRIC_SYSTEM, RUBRIC_PROMPT, RUBRIC_REPAIR)
SHOTS = (0, 1, 3)
STAGE = "compqa_rubric"
MAX_TOKENS = 256  # the dict is about 90 tokens; room for a fence or a sentence around it
#: A dry run's judgment: every criterion at 0 points.
SCORES_STAND_IN = StandIn(lambda _: json.dumps({str(n): 0 for n in MAXIMA}))


@dataclass(frozen=True)
class RubricJudgment:
    """A judge's verdict on one answer: validated scores, or the problem that made it invalid.

    Attributes:
        scores: ``{1: points, ..., 15: points}``, or None when the judgment is invalid.
        problem: Why the last reply is not a valid judgment; None when it is.
        replies: Every raw reply, in order (two when a repair round happened).
    """

    scores: dict[int, int] | None
    problem: str | None
    replies: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the scores were read and validated."""
        return self.scores is not None

    @property
    def repaired(self) -> bool:
        """True when the first reply failed and a repair round was asked for."""
        return len(self.replies) > 1

    def to_json(self) -> dict[str, Any]:
        """The judged-file fields: ``score_dict`` (``{"1": p, ...}``), ``score``, ``categories``."""
        scores = self.scores
        return {
            "score_dict": {str(n): p for n, p in scores.items()} if scores else None,
            "score": sum(scores.values()) if scores else None,
            "categories": category_sums(scores) if scores else None,
            "problem": self.problem,
            "repaired": self.repaired,
            "replies": list(self.replies),
        }


def rubric_messages(answer: Comparison, shots: int = 0) -> list[dict[str, str]]:
    """The paper's judge request for `answer` with 0, 1 or 3 few-shot examples."""
    if shots not in SHOTS:
        raise ValueError(f"shots must be one of {SHOTS}, got {shots}")
    prompt = render(
        RUBRIC_PROMPT,
        shots=shots,
        object1=answer.object1,
        object2=answer.object2,
        aspect=answer.aspect or "",
        comparison=answer.text,
    )
    return [
        {"role": "system", "content": render(RUBRIC_SYSTEM)},
        {"role": "user", "content": prompt},
    ]


def score_schema() -> dict[str, Any]:
    """OpenAI ``response_format`` for constrained decoding: every criterion, points in range."""
    properties = {
        str(n): {"type": "integer", "enum": list(range(m + 1))} for n, m in MAXIMA.items()
    }
    schema = {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {"name": "CompQAScores", "schema": schema}}


async def judge_comparison(
    client: ModelClient,
    role: Role,
    answer: Comparison,
    *,
    shots: int = 0,
    seed: int = 0,
    constrained: bool = False,
) -> RubricJudgment:
    """Score `answer` on the 15 CompQA criteria; one repair round, then an invalid judgment.

    Args:
        client: The model layer (cached, so reruns cost nothing).
        role: The judge's model; temperature 0 for reproducible judgments (the paper used GPT-4).
        answer: The comparative answer, with its objects and aspect.
        shots: Few-shot examples before the question: 0, 1 or 3 (the paper's Examples 1-3).
        seed: Sampling seed (part of the cache key).
        constrained: Send a JSON schema as ``response_format`` (servers that support it decode
            only a complete, in-range score dict; useful for small local models).

    Raises:
        ModelCallError: A call failed for good (the caller records it as an error).
    """
    messages = rubric_messages(answer, shots)
    kwargs: dict[str, Any] = {"max_tokens": MAX_TOKENS, "seed": seed}
    if constrained:
        kwargs["response_format"] = score_schema()
    result = await client.complete_parsed(
        role,
        messages,
        parse_scores,
        lambda error: render(RUBRIC_REPAIR, error=error),
        stage=STAGE,
        stand_in=SCORES_STAND_IN,
        **kwargs,
    )
    problem = result.failure.error if result.failure else None
    return RubricJudgment(result.value, problem, tuple(c.text for c in result.completions))
