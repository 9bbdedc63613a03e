"""A dry run's search tool: it searches nothing, loads no model and reads no key.

`moot.core.llm.planning` runs a command's real pipeline without sending a request; where the
pipeline would search, the CLI gives it a `StandInRetriever` (`moot.cli.retrieval.
retriever_from_args`), whose hits are the longest a search could find, so the prompts that hold
them are counted at their most.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from moot.core.data.corpus import Chunk
from moot.core.retrieval.index import Hit, longest_chunks
from moot.core.retrieval.websearch import STAND_IN


class StandInRetriever:
    """Every search finds the `k` longest hits it could: nothing is searched.

    The hits are the index's `k` longest chunks (`longest_chunks`), or for web search `k`
    distinct results of `STAND_IN`'s size. Each hit's id is made unique to its search
    (``<id>@<n>``), so what a ReAct agent gathers over several searches counts as that many
    chunks, and merged rankings (BERDS' round robin) keep all `k`. MMR keeps them as they are.

    Args:
        name: The name of the retriever it stands in for (``bm25``, ``web:brave``).
        chunks: What a search of the index may find; None: web search.
        identity: What a run's claim pins about the search tool it stands in for.
        lam: ``--mmr``'s lambda, if asked (None: no MMR).
        trusted_domains: ``--trusted-domains``, as the real tool would be built with.
    """

    def __init__(
        self,
        name: str,
        chunks: Sequence[Chunk] | None,
        identity: dict[str, Any],
        *,
        lam: float | None = None,
        trusted_domains: bool = False,
    ) -> None:
        self.name, self.chunks, self.identity = name, chunks, identity
        self.lam, self.trusted_domains = lam, trusted_domains
        self._searches = itertools.count(1)
        self._longest: dict[int, list[Chunk]] = {}  # by k

    def search(self, query: str, k: int) -> list[Hit]:
        """The `k` longest hits, whatever `query` is, their ids this search's own."""
        if k not in self._longest:
            self._longest[k] = longest_chunks(self.chunks, k) if self.chunks else _web(k)
        n = next(self._searches)
        return [Hit(replace(c, id=f"{c.id}@{n}"), 0.0) for c in self._longest[k]]

    def candidates(self, query: str, k: int) -> list[Hit]:
        """MMR's candidates: `search`'s."""
        return self.search(query, k)

    def rerank(self, hits: list[Hit], k: int, max_score: float | None = None) -> list[Hit]:
        """MMR's reranking: `hits` as they are."""
        return hits[:k]


def _web(k: int) -> list[Chunk]:
    """`k` distinct web results of `STAND_IN`'s size."""
    text = STAND_IN.text.partition(" ")[2]
    return [replace(STAND_IN, id=f"{STAND_IN.doc_id}#{n}", text=f"{n} {text}") for n in range(k)]
