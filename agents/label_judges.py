"""Label judges of DebateQA and BERDS: Dispute Awareness (0/1) and perspective detection (Yes/No).

Both read a label from the model's reply only (DebateQA's released D.A. script parsed the echoed
prompt and so scored every answer 1). The parsers accept the label as the reply's leading token,
after markdown, quotes and a ``Response:``/``Answer:``-style prefix ("1", "**1**", "Output: 1",
"Yes.", "**No**", "Answer: Yes"), or after "the answer is"; a reply that gives no label, or both,
gets one repair round and then becomes an explicit `ParseFailure` keeping every raw reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn
from moot.core.llm.structured import OutputParseError, ParseFailure
from moot.prompts import render

DA_PROMPT = "debateqa/dispute_awareness.j2"
DA_REPAIR = "debateqa/dispute_awareness_repair.j2"
DETECTION_SYSTEM = "berds/perspective_detection_system.j2"
DETECTION_PROMPT = "berds/perspective_detection.j2"
DETECTION_REPAIR = "berds/perspective_detection_repair.j2"
DETECTION_EXAMPLE = (
    "berds/perspective_detection_example.j2",
    "berds/perspective_detection_example_answer.j2",
)
DETECTION_SYSTEM_RELEASED_1SHOT = "berds/perspective_detection_system_released_1shot.j2"
#: The detector's prompts (BERDS Table 15): zero-shot (every model of Table 7), one-shot (the
#: paper's GPT-4 one-shot, the labeller of the fine-tuning data), and the released one-shot file,
#: whose system turn adds a sentence.
DETECTION_PROMPTS: dict[str, tuple[str, ...]] = {
    "zero-shot": (DETECTION_SYSTEM, DETECTION_PROMPT, DETECTION_REPAIR),
    "one-shot": (DETECTION_SYSTEM, *DETECTION_EXAMPLE, DETECTION_PROMPT, DETECTION_REPAIR),
    "one-shot-released": (
        DETECTION_SYSTEM_RELEASED_1SHOT,
        *DETECTION_EXAMPLE,
        DETECTION_PROMPT,
        DETECTION_REPAIR,
    ),
}
MAX_TOKENS = 32  # both prompts ask for one token; room for "Response: 1" and a short clause
#: What a dry run takes each judge's reply to be, by stage: a label its parser reads.
STAND_INS = {
    "dispute_awareness": StandIn(lambda _: "1"),
    "perspective_detection": StandIn(lambda _: "Yes"),
}

_PREFIX = re.compile(
    r"^[\s*_#>`\"'(\[]*(?:(?:final\s+)?(?:response|output|answer|label|score|result|verdict)"
    r"\s*[:=\-]\s*)?[\s*_`\"'(\[]*",
    re.I,
)
_DIGIT = re.compile(r"([01])(?![\w.,]\d|\d)")
_WORD = re.compile(r"(yes|no)\b", re.I)
_ANSWER_IS = re.compile(r"\b(?:the\s+)?answer\s+(?:is|would\s+be)\s*:?\s*[*_\"'`]*(yes|no)\b", re.I)
_OTHER_LABEL = re.compile(r"^[\s*_`\"']*(?:/|or|and|,)\s*[*_\"'`]*(?:yes|no|[01])\b", re.I)


@dataclass(frozen=True)
class LabelJudgment:
    """A parsed label (``1``/``0``: debatable / not, or Yes / No) or an explicit parse failure."""

    label: int | None
    failure: ParseFailure | None
    replies: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the reply gave a label."""
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form for per-item records."""
        return {
            "ok": self.ok,
            "label": self.label,
            "parse_failure": self.failure.to_json() if self.failure else None,
            "replies": list(self.replies),
        }


def parse_dispute_label(text: str) -> int:
    """Read the D.A. prompt's one digit: ``1`` (states the question is debated) or ``0``.

    Raises:
        OutputParseError: The reply does not lead with exactly one of 0 and 1.
    """
    rest = _PREFIX.sub("", text, count=1)
    found = _DIGIT.match(rest)
    if found is None:
        raise OutputParseError("the reply does not start with the digit 0 or 1")
    if _OTHER_LABEL.match(rest[found.end() :]):
        raise OutputParseError("the reply gives both 0 and 1")
    return int(found.group(1))


def parse_yes_no(text: str) -> int:
    """Read a Yes/No answer as ``1`` (Yes: the document supports the statement) or ``0``.

    Raises:
        OutputParseError: The reply neither leads with Yes or No nor says "the answer is
            Yes/No", or it gives both.
    """
    rest = _PREFIX.sub("", text, count=1)
    found = _WORD.match(rest)
    if found is not None:
        if _OTHER_LABEL.match(rest[found.end() :]):
            raise OutputParseError("the reply gives both Yes and No")
        return int(found.group(1).lower() == "yes")
    stated = {m.lower() for m in _ANSWER_IS.findall(text)}
    if len(stated) == 1:
        return int(stated.pop() == "yes")
    if stated:
        raise OutputParseError("the reply gives both Yes and No")
    raise OutputParseError('the reply does not start with "Yes" or "No"')


async def judge_dispute_awareness(
    client: ModelClient, role: Role, question: str, answer: str, *, seed: int = 0
) -> LabelJudgment:
    """DebateQA D.A.: does `answer` explicitly say that `question` is debated? (1 yes, 0 no).

    Args:
        client: The model layer (cached, so reruns cost nothing).
        role: The judge's model; temperature 0 for reproducible judgments.
        question: The debatable question.
        answer: The answer under test.
        seed: Sampling seed (part of the cache key).
    """
    messages = da_messages(question, answer)
    return await _label_call(
        client, role, messages, "dispute_awareness", parse_dispute_label, DA_REPAIR, seed
    )


async def detect_perspective(
    client: ModelClient,
    role: Role,
    document: str,
    perspective: str,
    *,
    seed: int = 0,
    prompt: str = "zero-shot",
) -> LabelJudgment:
    """BERDS perspective detection: does `document` support `perspective`? (1 Yes, 0 No).

    The paper's prompt (Table 15) shows only the document and the statement, not the question.

    Args:
        client: The model layer.
        role: The detector's model.
        document: A retrieved document (BERDS appends its title after its text).
        perspective: One gold perspective (a statement).
        seed: Sampling seed.
        prompt: A key of `DETECTION_PROMPTS`: ``zero-shot`` (default), ``one-shot`` (the
            paper's example turn pair before the question) or ``one-shot-released``.
    """
    messages = detection_messages(document, perspective, prompt)
    return await _label_call(
        client, role, messages, "perspective_detection", parse_yes_no, DETECTION_REPAIR, seed
    )


def da_messages(question: str, answer: str) -> list[dict[str, str]]:
    """The D.A. judge's messages: does `answer` say `question` is debated?"""
    return [{"role": "user", "content": render(DA_PROMPT, question=question, answer=answer)}]


def detection_messages(
    document: str, perspective: str, prompt: str = "zero-shot"
) -> list[dict[str, str]]:
    """The perspective detector's messages (`DETECTION_PROMPTS` key `prompt`)."""
    system, *example = DETECTION_PROMPTS[prompt][:-2]
    messages = [{"role": "system", "content": render(system)}]
    for turn, template in zip(("user", "assistant"), example, strict=False):
        messages.append({"role": turn, "content": render(template)})
    user = render(DETECTION_PROMPT, document=document, perspective=perspective)
    messages.append({"role": "user", "content": user})
    return messages


async def _label_call(
    client: ModelClient,
    role: Role,
    messages: list[dict[str, str]],
    stage: str,
    parse: Any,
    repair_template: str,
    seed: int,
) -> LabelJudgment:
    result = await client.complete_parsed(
        role,
        messages,
        parse,
        lambda error: render(repair_template, error=error),
        stage=stage,
        max_tokens=MAX_TOKENS,
        seed=seed,
        stand_in=STAND_INS[stage],
    )
    return LabelJudgment(result.value, result.failure, tuple(c.text for c in result.completions))
