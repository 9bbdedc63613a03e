"""BERDS query expansion: an LLM lists perspectives, each is searched, results merge round-robin.

The model is asked, by default, with BERDS's prompt (Table 13, ``prompts/berds/query_expansion.j2``)
for a JSON object with one field per perspective (a meaningful key, the perspective its value);
``list`` (``prompts/berds/query_expansion_list.j2``, moot's earlier wording) asks for
``{"perspectives": [...]}``. Each perspective is searched as ``"<question> <perspective>"`` (as
BERDS does), and the per-perspective rankings are merged round-robin (first hit of each list, then
the second of each, ...), skipping chunks already taken, up to k. A reply that cannot be parsed is
an explicit `ParseFailure`; there is no fallback to the plain question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, Field, RootModel, StringConstraints

from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.structured import ParseFailure, Structured
from moot.core.retrieval.index import Hit, Retriever
from moot.prompts import render

STAGE = "query_expansion"
#: The expansion's completion budget (`moot retrieve` has no ``--max-tokens``).
EXPANSION_TOKENS = 1024


class Perspectives(BaseModel):
    """The expansion's answer under ``list``, and what `expand_query` returns: the perspectives."""

    perspectives: list[str] = Field(min_length=1)  # any number read; only the sent schema bounds

    def texts(self) -> list[str]:
        """The perspectives, as searched."""
        return self.perspectives


class _BoundedPerspectives(Perspectives):
    """The schema sent for constrained decoding: bounded, so small models cannot ramble."""

    perspectives: list[Annotated[str, StringConstraints(max_length=300)]] = Field(
        min_length=1, max_length=8
    )


class PerspectiveFields(RootModel[dict[str, str]]):
    """BERDS Table 13's answer: one field per perspective, its key a name, its value the text."""

    root: dict[str, str] = Field(min_length=1)  # Table 13 sets no most

    def texts(self) -> list[str]:
        """The fields' values, as searched (the released generate_perspectives.py's ``text``)."""
        return list(self.root.values())


class _BoundedFields(PerspectiveFields):
    """Table 13's answer bounded as `_BoundedPerspectives`, for constrained decoding."""

    root: dict[str, Annotated[str, StringConstraints(max_length=300)]] = Field(
        min_length=1, max_length=8
    )


@dataclass(frozen=True)
class ExpansionPrompt:
    """A way of asking for perspectives: its template and the answer it asks for.

    Args:
        template: The prompt's template (one user turn, ``question`` its placeholder).
        schema: The answer's schema.
        bounded: The schema sent as ``response_format`` with constrained decoding.
    """

    template: str
    schema: type[Perspectives] | type[PerspectiveFields]
    bounded: type[Perspectives] | type[PerspectiveFields]


#: The expansion prompts by name (`moot retrieve --expansion-prompt`): ``paper`` is BERDS's.
EXPANSION_PROMPTS: dict[str, ExpansionPrompt] = {
    "paper": ExpansionPrompt("berds/query_expansion.j2", PerspectiveFields, _BoundedFields),
    "list": ExpansionPrompt("berds/query_expansion_list.j2", Perspectives, _BoundedPerspectives),
}


async def expand_query(
    client: ModelClient,
    role: Role,
    question: str,
    *,
    prompt: str = "paper",
    seed: int = 0,
    max_tokens: int = EXPANSION_TOKENS,
    constrained: bool = False,
) -> Structured[Perspectives]:
    """Ask `role` for perspectives on `question` (one repair round, then a `ParseFailure`).

    Blank perspectives are dropped; a reply holding only blank ones is a `ParseFailure` too.

    Args:
        client: The model layer.
        role: The expansion model.
        question: The debatable question.
        prompt: A key of `EXPANSION_PROMPTS`: ``paper`` (default, BERDS Table 13) or ``list``.
        seed: Sampling seed.
        max_tokens: Completion budget.
        constrained: Send a bounded JSON schema as ``response_format``.
    """
    way = EXPANSION_PROMPTS[prompt]
    result = await client.complete_structured(
        role,
        expansion_messages(question, prompt),
        way.bounded if constrained else way.schema,
        stage=STAGE,
        max_tokens=max_tokens,
        seed=seed,
        constrained=constrained,
    )
    texts = [t.strip() for t in result.value.texts() if t.strip()] if result.value else []
    if not texts:
        repaired = len(result.completions) > 1
        failure = result.failure or ParseFailure(result.raw, "every perspective is blank", repaired)
        return Structured(None, failure, result.raw, result.completions)
    return Structured(Perspectives(perspectives=texts), None, result.raw, result.completions)


def expansion_messages(question: str, prompt: str = "paper") -> list[dict[str, str]]:
    """The request asking for `question`'s perspectives (`EXPANSION_PROMPTS` key `prompt`)."""
    template = EXPANSION_PROMPTS[prompt].template
    return [{"role": "user", "content": render(template, question=question)}]


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
