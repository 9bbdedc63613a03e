"""Judge machinery: a prompt template, an output schema, a tolerant parser and one repair round.

Every judge in moot is a `Judge`: its system and user templates in ``prompts/``, and a pydantic
schema whose fields (in order) are the numbers the judge must give. Replies are parsed from JSON, a
Python dict, or the first line holding numbers ("60 40", "60, 40", "60% 40%", "Support: 60%,
Oppose: 40%"); a reply that still fails after one repair round is an explicit `ParseFailure`,
counted apart by every report and never replaced by a default score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from moot.core.errors import ConfigError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import json_stand_in
from moot.core.llm.structured import (
    OutputParseError,
    ParseFailure,
    json_schema_format,
    parse_structured,
)
from moot.core.runs import gather_all
from moot.prompts import render

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# numbers that are not scores: names ("Assistant 1"), scales ("8/10", "60 out of 100"; but
# "60/40" holds two scores) and list marks ("1.", "2)")
_NOT_SCORES = re.compile(
    r"assistant\s*\d+|answer\s*\d+|\bA[12]\b|(?:/|\bout of\b)\s*(?:10|100)\b(?!\.\d)|^\s*\d+[.)]\s",
    re.I,
)

Verdict = Literal["win", "tie", "loss"]


@dataclass(frozen=True)
class Judge:
    """A judge: templates, the schema of its answer, and its completion budget.

    Args:
        name: Ledger stage name, e.g. ``controllability``.
        system: System-prompt template path.
        prompt: User-prompt template path; it fences the judged text (`moot.prompts.fence`).
        schema: Pydantic model whose fields, in order, are the numbers asked for.
        max_tokens: Completion budget (the explanation follows the numbers).
    """

    name: str
    system: str
    prompt: str
    schema: type[BaseModel]
    max_tokens: int = 512


@dataclass(frozen=True)
class Judgment:
    """A parsed judgment or an explicit parse failure, with every raw reply."""

    value: BaseModel | None
    failure: ParseFailure | None
    replies: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the judgment parsed."""
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for per-item records."""
        return {
            "ok": self.ok,
            "value": self.value.model_dump() if self.value is not None else None,
            "parse_failure": self.failure.to_json() if self.failure else None,
            "replies": list(self.replies),
        }


class Percentages(BaseModel):
    """Supporting and opposing shares of a text, 0-100 (DEBATunE controllability)."""

    support: float = Field(ge=0, le=100)
    oppose: float = Field(ge=0, le=100)


class PairScores(BaseModel):
    """Scores of assistant 1 and assistant 2, 1-10 (DEBATunE pairwise quality)."""

    score_1: float = Field(ge=1, le=10)
    score_2: float = Field(ge=1, le=10)


CONTROLLABILITY = Judge(
    "controllability",
    "debatune/controllability_system.j2",
    "debatune/controllability.j2",
    Percentages,
)
QUALITY = Judge(
    "quality", "debatune/quality_system.j2", "debatune/quality.j2", PairScores, max_tokens=1024
)


def parse_scores(text: str, schema: type[BaseModel]) -> BaseModel:
    """Read a judge's numbers from JSON, a Python dict, or the first line holding numbers.

    Raises:
        OutputParseError: No reading gives exactly the schema's fields within their ranges.
    """
    try:
        return parse_structured(text, schema)
    except OutputParseError:
        pass
    fields = list(schema.model_fields)
    numbers: list[str] = []
    for line in text.splitlines():  # the first line(s) holding numbers: "8 7" or "A1: 8\nA2: 7"
        found = _NUMBER.findall(_NOT_SCORES.sub(" ", line))
        if not found:
            if numbers:
                break
            continue
        numbers += found
        if len(numbers) >= len(fields):
            break
    if not numbers:
        raise OutputParseError("no numbers found in the reply")
    if len(numbers) != len(fields):
        raise OutputParseError(f"found {len(numbers)} numbers first, expected {len(fields)}")
    try:
        return schema.model_validate(dict(zip(fields, map(float, numbers), strict=True)))
    except ValidationError as exc:
        first = exc.errors()[0]
        raise OutputParseError(f"{first['loc'][0]}: {first['msg']}") from None


async def run_judge(
    client: ModelClient,
    role: Role,
    judge: Judge,
    variables: Mapping[str, str],
    *,
    seed: int = 0,
    constrained: bool = False,
) -> Judgment:
    """Ask `role` to judge; parse tolerantly; on failure, one repair round, then a ParseFailure.

    Args:
        client: The model layer (cached, so reruns cost nothing).
        role: The judge's model; give it temperature 0 for reproducible judgments.
        judge: What to ask and how to read the answer.
        variables: Template variables; the template fences the judged texts.
        seed: Sampling seed (part of the cache key).
        constrained: Send the schema as ``response_format`` so servers that support it decode
            only valid JSON (the tolerant parser reads JSON as well as the paper's first line).
    """
    messages = judge_messages(judge, variables)
    kwargs: dict[str, Any] = {"max_tokens": judge.max_tokens, "seed": seed}
    if constrained:
        kwargs["response_format"] = json_schema_format(judge.schema)
    result = await client.complete_parsed(
        role,
        messages,
        lambda text: parse_scores(text, judge.schema),
        lambda error: _repair_prompt(judge.schema, error),
        stage=judge.name,
        stand_in=json_stand_in(judge.schema),
        **kwargs,
    )
    return Judgment(result.value, result.failure, tuple(c.text for c in result.completions))


def judge_messages(judge: Judge, variables: Mapping[str, str]) -> list[dict[str, str]]:
    """The messages asking `judge` about `variables` (its first call; a repair adds a turn)."""
    return [
        {"role": "system", "content": render(judge.system)},
        {"role": "user", "content": render(judge.prompt, **variables)},
    ]


def pair_variables(
    question: str, answer_a: str, answer_b: str, mask: Sequence[str] = ()
) -> list[dict[str, str]]:
    """`judge_pair`'s template variables for both orders, `mask` names replaced in both answers.

    Raises:
        ConfigError: A blank mask name (it would put ``[masked]`` between every character).
    """
    if any(not name.strip() for name in mask):
        raise ConfigError("--mask needs a non-blank name")
    for name in mask:
        answer_a = answer_a.replace(name, "[masked]")
        answer_b = answer_b.replace(name, "[masked]")
    orders = ((answer_a, answer_b), (answer_b, answer_a))
    return [{"question": question, "answer_1": one, "answer_2": two} for one, two in orders]


@dataclass(frozen=True)
class PairJudgment:
    """Both orders of a pairwise judgment of answers A and B."""

    forward: Judgment  # A shown as assistant 1
    reverse: Judgment  # B shown as assistant 1
    scores: tuple[str, str] | None = None  # the fields scoring places 1 and 2 (default: first two)

    @property
    def ok(self) -> bool:
        """True when both orders parsed."""
        return self.forward.ok and self.reverse.ok

    def order_verdicts(self) -> tuple[Verdict, Verdict] | None:
        """A's verdict in each order, or None if either order failed to parse."""
        if not self.ok:
            return None
        first, second = (self._scores(j.value) for j in (self.forward, self.reverse))
        return _verdict(first[0], first[1]), _verdict(second[1], second[0])

    def _scores(self, value: Any) -> list[float]:
        scores = value.model_dump()
        return [scores[name] for name in self.scores] if self.scores else list(scores.values())

    @property
    def outcome(self) -> Verdict | None:
        """A wins if it wins both orders, or one with a tie in the other; likewise a loss."""
        verdicts = self.order_verdicts()
        if verdicts is None:
            return None
        if "win" in verdicts and "loss" not in verdicts:
            return "win"
        if "loss" in verdicts and "win" not in verdicts:
            return "loss"
        return "tie"

    @property
    def inconsistent(self) -> bool | None:
        """True when the verdict changes with the order (position bias), None if unparsed."""
        verdicts = self.order_verdicts()
        return None if verdicts is None else verdicts[0] != verdicts[1]

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for per-item records."""
        return {
            "outcome": self.outcome,
            "inconsistent": self.inconsistent,
            "forward": self.forward.to_json(),
            "reverse": self.reverse.to_json(),
        }


async def judge_pair(
    client: ModelClient,
    role: Role,
    judge: Judge,
    question: str,
    answer_a: str,
    answer_b: str,
    *,
    seed: int = 0,
    mask: Sequence[str] = (),
    constrained: bool = False,
) -> PairJudgment:
    """Judge A against B in both orders, concurrently.

    Args:
        client: The model layer.
        role: The judge's model.
        judge: A two-score judge (its first field scores assistant 1).
        question: What both answers answer.
        answer_a: The answer under test.
        answer_b: The baseline.
        seed: Sampling seed.
        mask: Names (e.g. of models) replaced by ``[masked]`` in both answers.
        constrained: Ask for schema-constrained JSON (see `run_judge`).

    Raises:
        ConfigError: A blank mask name (it would put ``[masked]`` between every character).
    """
    forward, reverse = await gather_all(
        *(
            run_judge(client, role, judge, variables, seed=seed, constrained=constrained)
            for variables in pair_variables(question, answer_a, answer_b, mask)
        )
    )
    return PairJudgment(forward, reverse)


def _verdict(mine: float, theirs: float) -> Verdict:
    return "win" if mine > theirs else "loss" if mine < theirs else "tie"


def _repair_prompt(schema: type[BaseModel], error: str) -> str:
    properties = schema.model_json_schema()["properties"]
    fields = list(properties)
    low = min(p.get("minimum", 0) for p in properties.values())
    high = max(p.get("maximum", 100) for p in properties.values())
    return render(
        "core/repair_scores.j2",
        error=error,
        count=len(fields),
        fields=", ".join(fields),
        low=f"{low:g}",
        high=f"{high:g}",
    )
