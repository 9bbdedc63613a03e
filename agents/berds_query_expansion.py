"""BERDS query expansion: an LLM lists perspectives, each is searched, results merge round-robin.

The model is asked (``prompts/debateqa/query_expansion.j2``, the BERDS prompt) for
``{"perspectives": [...]}``; each perspective is searched as ``"<question> <perspective>"``
(as BERDS does), and the per-perspective rankings are merged round-robin (first hit of each
list, then the second of each, ...), skipping chunks already taken, up to k. A reply that cannot
be parsed is an explicit `ParseFailure`; there is no fallback to the plain question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.structured import Structured
from moot.core.retrieval.index import Hit, Retriever
from moot.prompts import render

STAGE = "query_expansion"
#: The expansion's completion budget (`moot retrieve` has no ``--max-tokens``).
EXPANSION_TOKENS = 1024


class Perspectives(BaseModel):
    """The expansion's answer: distinct perspectives on the question."""

    perspectives: list[str] = Field(min_length=1, max_length=12)


class _BoundedPerspectives(BaseModel):
    """The schema sent for constrained decoding: bounded, so small models cannot ramble."""

    perspectives: list[Annotated[str, StringConstraints(max_length=300)]] = Field(
        min_length=1, max_length=8
    )


async def expand_query(
    client: ModelClient,
    role: Role,
    question: str,
    *,
    seed: int = 0,
    max_tokens: int = EXPANSION_TOKENS,
    constrained: bool = False,
) -> Structured[Perspectives]:
    """Ask `role` for perspectives on `question` (one repair round, then a `ParseFailure`).

    Args:
        client: The model layer.
        role: The expansion model.
        question: The debatable question.
        seed: Sampling seed.
        max_tokens: Completion budget.
        constrained: Send a bounded JSON schema as ``response_format``.
    """
    schema = _BoundedPerspectives if constrained else Perspectives
    result = await client.complete_structured(
        role,
        expansion_messages(question),
        schema,
        stage=STAGE,
        max_tokens=max_tokens,
        seed=seed,
        constrained=constrained,
    )
    if result.value is None:
        return Structured(None, result.failure, result.raw, result.completions)
    cleaned = [p.strip() for p in result.value.perspectives if p.strip()]
    return Structured(Perspectives(perspectives=cleaned), None, result.raw, result.completions)


def expansion_messages(question: str) -> list[dict[str, str]]:
    """The request asking for `question`'s perspectives: the BERDS prompt, one user turn."""
    return [{"role": "user", "content": render("debateqa/query_expansion.j2", question=question)}]


def round_robin(rankings: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Merge rankings by taking each one's next hit in turn, skipping repeated chunks, up to `k`."""
    merged: list[Hit] = []
    seen: set[str] = set()
    depth = max((len(ranking) for ranking in rankings), default=0)
    for position in range(depth):
        for ranking in rankings:
            if position < len(ranking) and ranking[position].chunk.id not in seen:
                seen.add(ranking[position].chunk.id)
                merged.append(ranking[position])
                if len(merged) == k:
                    return merged
    return merged


def expanded_search(
    retriever: Retriever, question: str, perspectives: Sequence[str], k: int
) -> list[Hit]:
    """Search ``question + " " + perspective`` for each perspective and merge round-robin."""
    rankings = [retriever.search(f"{question} {p}", k) for p in perspectives]
    return round_robin(rankings, k)
