"""Debatrix judges: dimensions, frameworks, the judge's prompts and its verdict extraction.

Debatrix (Liang et al., Findings of ACL 2024) judges a debate one speech at a time, per dimension
(argument, source, language, ...), and a panel combines the dimensional judgments. This module holds
the pieces the state machine in ``graphs/debatrix_judging.py`` calls: what each framework does,
the messages of each step, and the extraction of scores and winners from free-text judgments. A
winner that is not one of the debaters (or "tie" where ties are allowed) is a parse failure,
never accepted.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from moot.core.data.debates import Debate
from moot.core.errors import ConfigError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.structured import FreshRepair, Structured, schema_text
from moot.core.runs import gather_all
from moot.prompts import load_yaml, render

Messages = list[dict[str, str]]
Memory = Sequence[tuple[str, str]]  # (title, text) sections, oldest first
TIE = "tie"


@dataclass(frozen=True)
class Dimension:
    """One dimension of the judgment, with its weight in the panel and its prompts."""

    name: str
    weight: float
    allow_tie: bool
    judge_debate: str
    analyze_speech: str
    use_previous: str
    judge_by_analysis: str


@dataclass(frozen=True)
class Framework:
    """How a framework judges: speech by speech or whole transcript, with or without dimensions.

    Args:
        name: ``debatrix``, ``non-iterative``, ``chronological``, ``dimensional`` or ``direct``.
        chronological: Analyse speech by speech before judging (else judge the transcript).
        iterative: Analyse each speech with the previous analyses (else with previous speeches).
        split: Judge the chosen dimensions and combine them in a panel (else one general one).
    """

    name: str
    chronological: bool
    iterative: bool
    split: bool


FRAMEWORKS = {
    f.name: f
    for f in (
        Framework("debatrix", chronological=True, iterative=True, split=True),
        Framework("non-iterative", chronological=True, iterative=False, split=True),
        Framework("chronological", chronological=True, iterative=True, split=False),
        Framework("dimensional", chronological=False, iterative=False, split=True),
        Framework("direct", chronological=False, iterative=False, split=False),
    )
}
DEFAULT_DIMENSIONS = {
    "1v1": ("argument", "source", "language"),
    "bp": ("argument", "support", "clash", "language"),
}


def dimension_library(debate_format: str) -> dict[str, Dimension]:
    """Every shipped dimension for ``1v1`` or ``bp`` debates, by name (``general`` included)."""
    return {
        d["name"]: Dimension(**d) for d in load_yaml(f"debatrix/dimensions_{debate_format}.yaml")
    }


def choose_dimensions(
    framework: Framework,
    debate_format: str,
    names: Sequence[str] | None = None,
    weights: dict[str, float] | None = None,
) -> tuple[Dimension, ...]:
    """The dimensions a framework judges a debate of this format on.

    Args:
        framework: Split frameworks judge `names`; the others judge ``general`` alone.
        debate_format: ``1v1`` or ``bp``.
        names: Dimension names (default: the paper's for the format).
        weights: Panel weights overriding the shipped ones.

    Raises:
        ConfigError: An unknown dimension, or a weight for a dimension not judged.
    """
    library = dimension_library(debate_format)
    if not framework.split:
        return (library["general"],)
    names = tuple(names or DEFAULT_DIMENSIONS[debate_format])
    known = sorted(set(library) - {"general"})
    for name in names:
        if name not in known:
            raise ConfigError(
                f"unknown {debate_format} dimension {name!r} (known: {', '.join(known)})"
            )
    weights = weights or {}
    for name in weights:
        if name not in names:
            raise ConfigError(f"--weights names {name!r}, which is not among --dimensions")
    chosen = tuple(
        Dimension(**{**library[n].__dict__, "weight": weights.get(n, library[n].weight)})
        for n in names
    )
    if not any(d.weight > 0 for d in chosen):
        raise ConfigError("at least one dimension needs a positive weight")
    return chosen


def _system(template: str, debate: Debate, **variables: Any) -> dict[str, str]:
    return {"role": "system", "content": _tidy(render(template, debate=debate, **variables))}


def _user(**variables: Any) -> dict[str, str]:
    variables.setdefault("new_speech", None)
    variables.setdefault("speaker", None)
    return {"role": "user", "content": _tidy(render("debatrix/memory.j2", **variables))}


def _tidy(text: str) -> str:
    """One blank line between paragraphs, however the included templates end."""
    if "\n\n\n" not in text:  # the regex scan costs ~0.3 ms on a judge's long prompt
        return text
    return re.sub(r"\n{3,}", "\n\n", text)


def analysis_messages(
    debate: Debate, dimension: Dimension, index: int, memory: Memory, analyses: bool
) -> Messages:
    """Ask for the analysis of speech `index` given the `memory` of earlier speeches.

    Args:
        debate: The debate.
        dimension: What to analyse.
        index: 0-based speech index.
        memory: Earlier analyses (``analyses=True``) or earlier speeches' text.
        analyses: Whether `memory` holds analyses.
    """
    speech = debate.speeches[index]
    system = _system(
        "debatrix/analyze_system.j2",
        debate,
        main=False,
        dimension=dimension,
        speaker=speech.speaker,
        number=index + 1,
        memory=bool(memory),
        analyses=analyses,
    )
    user = _user(
        info_slide=debate.info_slide,
        memory=memory,
        speaker=speech.speaker,
        new_speech=speech.content,
    )
    return [system, user]


def judgment_messages(
    debate: Debate, dimension: Dimension, memory: Memory, analyses: bool
) -> Messages:
    """Ask for the debate-level judgment of one dimension from analyses or the transcript."""
    system = _system(
        "debatrix/judge_system.j2", debate, main=False, dimension=dimension, analyses=analyses
    )
    return [system, _user(info_slide=None if analyses else debate.info_slide, memory=memory)]


def panel_messages(debate: Debate, verdicts: Sequence[tuple[Dimension, str]]) -> Messages:
    """Ask the main judge to combine weighted dimensional judgments into a general one."""
    weighted = [(d, text) for d, text in verdicts if d.weight > 0]
    system = _system("debatrix/panel_system.j2", debate, main=True)
    return [
        system,
        {"role": "user", "content": render("debatrix/panel_user.j2", verdicts=weighted)},
    ]


def compression_messages(
    debate: Debate, dimension: Dimension, memory: Memory, words: int
) -> Messages:
    """Ask for one summary replacing the analyses in `memory` (moot's addition)."""
    system = _system(
        "debatrix/compress_system.j2", debate, main=False, dimension=dimension, words=words
    )
    return [system, _user(info_slide=None, memory=memory)]


def transcript(debate: Debate, upto: int | None = None) -> list[tuple[str, str]]:
    """The speeches before `upto` (all by default) as memory sections."""
    return [
        (f"Speech {i + 1} by {s.speaker}", s.content) for i, s in enumerate(debate.speeches[:upto])
    ]


def _released_schema(schema: dict[str, Any]) -> None:
    """A schema shown to the judge (fix prompt, repair) worded as released, not by our docstrings.

    The release's titles and field descriptions: debatrix/panel/interface/common/verdict.py at
    c419d8a.
    """
    schema.pop("description", None)


#: A score's field as the release describes it; the range is the paper's (Sec. 5.1).
_SCORE = Field(ge=1, le=10, strict=True, description="a score for the debater")


class Score(BaseModel):
    """A score: an integer from 1 to 10 (paper, Sec. 5.1); 7.5, "7" or 11 fail validation."""

    model_config = ConfigDict(
        title="Score for Specific Debater", json_schema_extra=_released_schema
    )

    score: int = _SCORE


class CommentedScore(BaseModel):
    """A debater's comment and score asked in one call (the released code's debater judge)."""

    model_config = ConfigDict(
        title="Judgment and Score for Specific Debater", json_schema_extra=_released_schema
    )

    comment: str = Field(description="judgment for the debater")
    score: int = _SCORE


def winner_schema(debate: Debate, allow_tie: bool) -> type[BaseModel]:
    """A schema whose only valid winners are the debaters' names (and ``tie`` if allowed).

    Names match case-insensitively and "It's a tie!" reads as ``tie``; anything else fails
    validation, which makes the verdict a parse failure after the repair rounds.
    """
    return _winner_schema(tuple(debate.debaters), allow_tie)


@functools.lru_cache(maxsize=1024)
def _winner_schema(debaters: tuple[str, ...], allow_tie: bool) -> type[BaseModel]:
    """`winner_schema` for these debaters, built once.

    pydantic's `create_model` takes ~2 ms, and every judgment asks for a winner.
    """
    options = (*debaters, *((TIE,) if allow_tie else ()))
    lookup = {option.casefold(): option for option in options}

    def normalise(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.strip().strip(".!\"'").casefold()
        if allow_tie and key in ("it's a tie", "a tie", "draw"):
            return TIE
        return lookup.get(key, value)

    return create_model(
        "Winner",
        __config__=ConfigDict(title="Winner of Debate"),
        winner=(Literal[options], Field(description="the final winner of the debate")),  # type: ignore[valid-type]
        __validators__={"normalise": field_validator("winner", mode="before")(normalise)},
    )


@dataclass(frozen=True)
class Extractor:
    """Reads scores and winners out of free-text judgments (the paper's verdict extractor).

    The paper (Sec. 5.1) asks "the judges to output comments only and then call the LLM again to
    generate their corresponding scores (integers from 1 to 10) or winner verdict". A speech's
    comment is its analysis and a dimension's is its judgment; a debater's comment is asked for
    on its own (``scoring="paper"``) or, as the released code does, with the score in one
    call (``scoring="released"``). Either way the score is an integer from 1 to 10 or a parse
    failure.

    A reply that does not parse is asked again as the released parser does (``repair="released"``:
    its fix prompt, a fresh message, up to `FIX_TRIES` times) or with moot's follow-up turn, once
    (``repair="moot"``); a reply still unread is a parse failure of the last reply.

    Args:
        client: The model layer.
        role: The judge's model.
        seed: Sampling seed for every extraction.
        constrained: Ask the server for schema-constrained JSON.
        max_tokens: Completion budget of one extraction.
        scoring: ``paper`` or ``released`` (how a debater's comment and score are asked for).
        repair: ``released`` or ``moot`` (how a reply that does not parse is asked again).
    """

    client: ModelClient
    role: Role
    seed: int
    constrained: bool
    max_tokens: int = 384
    scoring: str = "paper"
    repair: str = "released"

    async def _ask(self, prompt: str, schema: type[BaseModel], stage: str) -> Structured:
        return await self.client.complete_structured(
            self.role,
            [{"role": "user", "content": prompt}],
            schema,
            stage=stage,
            max_tokens=self.max_tokens,
            seed=self.seed,
            constrained=self.constrained,
            repair=released_fix(schema) if self.repair == "released" else None,
        )

    async def speech_score(self, debate: Debate, debater: str, judgment: str) -> Structured:
        """The score of `debater`'s speech from its analysis (the speech's comment)."""
        prompt = extraction_prompt("speech_score", debate, judgment, debater=debater)
        return await self._ask(prompt, Score, "speech_score")

    async def debater_scores(self, debate: Debate, judgment: str) -> dict[str, Structured]:
        """A comment and score per debater from a debate-level judgment, asked concurrently."""
        ask = self._debater if self.scoring == "paper" else self._debater_released
        results = await gather_all(*(ask(debate, d, judgment) for d in debate.debaters))
        return dict(zip(debate.debaters, results, strict=True))

    async def _debater(self, debate: Debate, debater: str, judgment: str) -> Structured:
        """The paper's way: the debater's comment alone, then a second call for its score."""
        prompt = extraction_prompt("debater_comment", debate, judgment, debater=debater)
        comment = await self.client.complete(
            self.role,
            [{"role": "user", "content": prompt}],
            stage="debater_comment",
            max_tokens=self.max_tokens,
            seed=self.seed,
        )
        prompt = extraction_prompt("debater_score", debate, comment.text, debater=debater)
        score = await self._ask(prompt, Score, "debater_score")
        value = CommentedScore(comment=comment.text, score=score.value.score) if score.ok else None  # type: ignore[union-attr]
        return replace(score, value=value, completions=(comment, *score.completions))

    async def _debater_released(self, debate: Debate, debater: str, judgment: str) -> Structured:
        """The released code's way: the comment and the score in one call."""
        prompt = extraction_prompt("released_score", debate, judgment, debater=debater)
        return await self._ask(prompt, CommentedScore, "debater_score")

    async def winner(self, debate: Debate, judgment: str, allow_tie: bool) -> Structured:
        """The winner named by a judgment: a debater, or ``tie`` where allowed."""
        prompt = extraction_prompt("winner", debate, judgment, allow_tie=allow_tie)
        return await self._ask(prompt, winner_schema(debate, allow_tie), "winner")


#: The released parser's fix requests at most (its ``max_retries``: debatrix/panel/interface/
#: common/parser.py:41 at c419d8a).
FIX_TRIES = 3


def released_fix(schema: type[BaseModel]) -> FreshRepair:
    """The released parser's repair: its fix prompt quoting its format instructions for `schema`."""

    def prompt(reply: str, error: str) -> str:
        instructions = render("debatrix/format_instructions.j2", schema=schema_text(schema))
        return render("debatrix/fix.j2", instructions=instructions, completion=reply, error=error)

    return FreshRepair(prompt, FIX_TRIES)


#: The template of each extraction: a speech's score, a debater's comment and score (the paper's
#: two calls, or the released code's one), a judgment's winner.
EXTRACTIONS = {
    "speech_score": "debatrix/score_speech.j2",
    "debater_comment": "debatrix/comment_debater.j2",
    "debater_score": "debatrix/score_debater.j2",
    "released_score": "debatrix/score_debater_released.j2",
    "winner": "debatrix/winner.j2",
}


def extraction_prompt(
    kind: str, debate: Debate, judgment: str, *, debater: str = "", allow_tie: bool = False
) -> str:
    """The user prompt of an extraction (`EXTRACTIONS`) from a comment or judgment."""
    return render(
        EXTRACTIONS[kind], debate=debate, debater=debater, judgment=judgment, allow_tie=allow_tie
    )
