"""Retrieval for questions (`moot retrieve`), with BERDS query expansion on the run engine.

Without query expansion each question's top-k chunks are searched directly. With it, a model first
lists each question's perspectives (`moot.agents.berds_query_expansion`): those calls go through
`moot.core.runs.run_items`, logged in ``.<out name>.progress.jsonl`` beside the output under a
stable id (model, sampling, prompt, question text), so a rerun pays only for the questions not yet
expanded; an expansion that failed (the call, or a reply that cannot be read) is recorded and asked
again on rerun. Each perspective is then searched and the rankings merge round-robin. The output
(one record per question: its chunks, or why it has none) is written atomically at the end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.agents.berds_query_expansion import EXPANSION_PROMPTS, expand_query, expanded_search
from moot.core.data.questions import Question
from moot.core.data.records import ResultLog, check_out_file, progress_log, stable_id, write_jsonl
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.retrieval.index import Retriever
from moot.core.runs import Progress, Tally, run_items
from moot.prompts import template_digest


@dataclass(frozen=True)
class ExpansionSettings:
    """How each question's perspectives are listed before retrieval (BERDS).

    Args:
        role: The expansion model (BERDS used GPT-4).
        constrained: Send a bounded JSON schema as ``response_format``.
        seed: Sampling seed.
        prompt: A key of `EXPANSION_PROMPTS`: ``paper`` (BERDS Table 13) or ``list``.
    """

    role: Role
    constrained: bool = False
    seed: int = 0
    prompt: str = "paper"

    def identity(self) -> dict[str, Any]:
        """What makes two expansions of a question the same: model, sampling, prompt.

        The prompt is its template's digest alone, so ``list`` keeps the ids it had as the
        default (before BERDS's Table 13 prompt became it).
        """
        return {
            "model": self.role.spec.name,
            "temperature": self.role.temperature,
            "constrained": self.constrained,
            "seed": self.seed,
            "prompts": template_digest(EXPANSION_PROMPTS[self.prompt].template),
        }


@dataclass(frozen=True)
class QueryExpansion(ExpansionSettings):
    """The model that lists each question's perspectives before retrieval, and its model layer.

    Args:
        client: The model layer.
    """

    client: ModelClient = field(kw_only=True)


@dataclass(frozen=True)
class RetrieveRun:
    """What `retrieve_questions` wrote and ran.

    Attributes:
        records: The output's records, in question order: ``status`` ``ok`` with ``chunks``
            (and ``perspectives`` with query expansion), else ``error`` with ``error`` or
            ``parse_failure`` with ``failure``, and no chunks.
        tallies: What the expansion's `run_items` call did (none without query expansion).
        k: The chunks asked for per question.
    """

    records: list[dict[str, Any]]
    tallies: list[Tally]
    k: int

    @property
    def failed(self) -> int:
        """Questions whose expansion failed (a rerun asks again)."""
        return sum(1 for r in self.records if r["status"] != "ok")

    @property
    def short(self) -> int:
        """Questions that got fewer than k chunks."""
        return sum(1 for r in self.records if r["status"] == "ok" and len(r["chunks"]) < self.k)


async def retrieve_questions(
    questions: Sequence[Question],
    retriever: Retriever,
    out: Path,
    *,
    k: int = 10,
    query_expansion: QueryExpansion | None = None,
    mmr_norm: str = "dataset",
    concurrency: int = 8,
    progress: Progress | None = None,
) -> RetrieveRun:
    """Retrieve up to `k` chunks per question (after query expansion, if asked); write `out`.

    Args:
        questions: The questions.
        retriever: The search tool (a local index or web search).
        out: The output JSONL file (written atomically, every question, failures included).
        k: Chunks per question.
        query_expansion: The expansion model, or None to search each question as it is.
        mmr_norm: With an MMR retriever and no query expansion, what divides the retrieval
            scores: the maximum over every question's candidates (``dataset``, BERDS Appendix
            B.6) or each question's own (``question``, the released reranking.py). Expanded
            searches are normalised per query.
        concurrency: Expansions in flight.
        progress: The command's progress bar (over the expansions).

    Raises:
        ConfigError: `out` cannot be written (checked before any model call).
    """
    out = Path(out)
    check_out_file(out)
    expansions: dict[str, dict[str, Any]] = {}
    tallies: list[Tally] = []
    if query_expansion is not None:
        expansions, tally = await _expand(questions, query_expansion, out, concurrency, progress)
        tallies.append(tally)

    def search() -> list[dict[str, Any]]:  # indexes are not reentrant: one search at a time
        records = []
        pools, max_score = {}, None
        if query_expansion is None and getattr(retriever, "lam", None) is not None:
            pools = {q.id: retriever.candidates(q.text, k) for q in questions}  # type: ignore[attr-defined]
            if mmr_norm == "dataset":
                max_score = max((h.score for p in pools.values() for h in p), default=None)
        for question in questions:
            record: dict[str, Any] = {
                "id": question.id,
                "question": question.text,
                "retriever": retriever.name,
                "k": k,
                "mmr": getattr(retriever, "lam", None),
                "mmr_norm": mmr_norm if pools else None,
                "query_expansion": query_expansion is not None,
                "trusted_domains": getattr(retriever, "trusted_domains", False),
            }
            if pools:
                hits = retriever.rerank(pools[question.id], k, max_score)  # type: ignore[attr-defined]
            elif query_expansion is None:
                hits = retriever.search(question.text, k)
            else:
                found = expansions[question.id]
                if found["status"] != "ok":  # its failure, and no chunks
                    keys = [key for key in ("status", "error", "failure") if key in found]
                    records.append({**record, **{key: found[key] for key in keys}, "chunks": []})
                    continue
                record["perspectives"] = found["perspectives"]
                hits = expanded_search(retriever, question.text, found["perspectives"], k)
            records.append({**record, "status": "ok", "chunks": [hit.to_json() for hit in hits]})
        return records

    records = await asyncio.to_thread(search)
    write_jsonl(out, records)
    return RetrieveRun(records, tallies, k)


async def _expand(
    questions: Sequence[Question],
    expansion: QueryExpansion,
    out: Path,
    concurrency: int,
    progress: Progress | None,
) -> tuple[dict[str, dict[str, Any]], Tally]:
    """Each question's expansion record, by question id, and the run's tally."""
    ids, items = _expansion_items(questions, expansion)

    async def expand(item: dict[str, Any]) -> dict[str, Any]:
        result = await expand_query(
            expansion.client,
            expansion.role,
            item["question"],
            prompt=expansion.prompt,
            seed=expansion.seed,
            constrained=expansion.constrained,
        )
        if result.value is None:  # final for this run, asked again by the next
            failure = result.failure.to_json() if result.failure else result.raw
            return {**item, "status": "parse_failure", "failure": failure}
        return {**item, "status": "ok", "perspectives": result.value.perspectives}

    run = await run_items(
        items,
        expand,
        ResultLog(progress_log(out)),
        unit="expansions",
        concurrency=concurrency,
        failed=lambda record: record["status"] != "ok",
        progress=progress,
    )
    by_id = {record["id"]: record for record in run.records}
    return {q.id: by_id[ids[q.id]] for q in questions}, run.tally


def _expansion_items(
    questions: Sequence[Question], expansion: ExpansionSettings
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Each question's expansion id (by question id), and the run engine's items."""
    identity = expansion.identity()
    ids = {q.id: stable_id("query_expansion", identity, q.text) for q in questions}
    # one text, one expansion: two questions with one text share their item
    return ids, [{"id": ids[q.id], "question": q.text} for q in questions]
