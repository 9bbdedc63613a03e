"""DebateQA partial-answer curation (Algorithm 1) as a LangGraph state machine, per question.

    START → retrieve → extract ─Send per POV→ explain → dedup → END
                              └→ END   (no POV could be read: a parse failure)

``retrieve`` takes the question's top documents from the corpus; ``extract`` asks the model for
the points of view (POVs) they hold, each with the numbers of its supporting documents (the
paper's prompt p_POV, Table 9, read with `parse_povs`); ``explain`` expands each POV into an
explanation of at most 300 words from its documents (p_Explan, Table 9; a longer
reply is cut at 300 words and flagged); ``dedup`` drops a POV whose embedding's cosine similarity to
an earlier kept POV is above the threshold (0.75, as the paper). Questions go through the run
engine (`moot.core.runs.run_items`) into ``curation.jsonl``; ``partial_answers.jsonl`` (the
layout of DebateQA's released test set, ``point_of_view`` / ``explanation``, which `moot eval pd`
reads) is written atomically from the curated questions.
"""

from __future__ import annotations

import asyncio
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from moot.core.data.questions import Question
from moot.core.data.records import write_json, write_jsonl
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn, stand_in
from moot.core.llm.tokens import count_tokens
from moot.core.retrieval.embeddings import unit_rows
from moot.core.runs import Progress, RunOutput, call_seed, outcome_counts, run_claimed
from moot.graphs.checkpoints import invoke, settled
from moot.graphs.debateqa_answer import retriever_identity, search
from moot.prompts import render, template_digest

if TYPE_CHECKING:
    from moot.core.retrieval.embeddings import Embedder
    from moot.core.retrieval.index import Retriever

#: Words an explanation may have (DebateQA Algorithm 1).
MAX_EXPLANATION_WORDS = 300


_POV_LINE = re.compile(
    r"^[^\w\n]*point[- ]of[- ]view[ \t]*\[?\d+\]?[^\w\n]*?:[* \t]*(.*)$", re.I | re.M
)
_DOCUMENTS = re.compile(r"[\[(]\s*(?:documents?|docs?)\b", re.I)


def parse_povs(text: str) -> list[tuple[str, list[int]]]:
    """The POVs of a reply to p_POV: ``Point-of-View N: content [Document [n], ...]`` lines.

    Each POV comes with the numbers in its ``[Document ...]`` (or ``(Document ...)``) tail, in
    order of appearance; a line without content is skipped.

    Example:
        >>> parse_povs("Point-of-View 1: It helps. [Document [1], [3]]")
        [('It helps.', [1, 3])]
    """
    povs = []
    for match in _POV_LINE.finditer(text):
        line = match.group(1)
        tail = _DOCUMENTS.search(line)
        content = (line[: tail.start()] if tail else line).strip(" *_-")
        numbers = [int(n) for n in re.findall(r"\d+", line[tail.start() :])] if tail else []
        if content:
            povs.append((content, numbers))
    return povs


class CurateState(TypedDict, total=False):
    """One question's curation state."""

    id: str
    question: str
    chunks: list[dict[str, Any]]
    povs: list[dict[str, Any]]
    explained: Annotated[list[dict[str, Any]], operator.add]
    failure: dict[str, Any]
    partial_answers: list[dict[str, Any]]


@dataclass(frozen=True)
class CurateSettings:
    """What a curation run does: its model, documents per question, threshold and budgets.

    Args:
        role: The curating model.
        documents: Documents (chunks) retrieved per question.
        threshold: Cosine similarity above which a POV duplicates an earlier one.
        max_tokens: Completion budget per call.
        seed: Base sampling seed.
    """

    role: Role
    documents: int = 10
    threshold: float = 0.75
    max_tokens: int = 1024
    seed: int = 0


@dataclass(frozen=True)
class CurateContext(CurateSettings):
    """A curation run's settings and what it runs with (the LangGraph runtime context).

    Args:
        client: The model layer.
        retriever: Where the documents come from (a `moot index` folder).
        embedder: Embeds POVs for near-duplicate removal.
    """

    client: ModelClient = field(kw_only=True)
    retriever: Retriever = field(kw_only=True)
    embedder: Embedder = field(kw_only=True)


def build_curate_graph() -> Any:
    """Compile the curation state machine (see the module docstring)."""
    graph = StateGraph(CurateState, context_schema=CurateContext)
    graph.add_node("retrieve", _retrieve)
    graph.add_node("extract", _extract)
    graph.add_node("explain", settled(_explain))  # a failed POV leaves the others cached
    graph.add_node("dedup", _dedup)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "extract")
    graph.add_conditional_edges("extract", _fan_out, ["explain", END])
    graph.add_edge("explain", "dedup")
    graph.add_edge("dedup", END)
    return graph.compile()


async def _retrieve(state: CurateState, runtime: Runtime[CurateContext]) -> CurateState:
    ctx = runtime.context
    return {"chunks": await search(ctx.retriever, state["question"], ctx.documents)}


async def _extract(state: CurateState, runtime: Runtime[CurateContext]) -> CurateState:
    ctx = runtime.context
    reply = await ctx.client.complete(
        ctx.role,
        extract_messages(state["question"], state["chunks"]),
        stage="curate:extract",
        max_tokens=ctx.max_tokens,
        seed=call_seed(ctx.seed, state["id"], 0),
        stand_in=POVS_STAND_IN,
    )
    count = len(state["chunks"])
    povs = [
        {"pov": pov, "documents": sorted({d for d in numbers if 1 <= d <= count})}
        for pov, numbers in parse_povs(reply.text)
    ]
    if not povs:  # a final parse failure of this question, never an empty list
        error = "no 'Point-of-View N: ...' line in the reply"
        return {"failure": {"parse_failure": True, "error": error, "raw": reply.text}}
    return {"povs": povs}


def extract_messages(question: str, chunks: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The request for a question's POVs: p_POV (Table 9) with its numbered documents."""
    prompt = render("debateqa/curate_extract.j2", question=question, chunks=chunks)
    return [{"role": "user", "content": prompt}]


def explain_messages(
    question: str, pov: str, chunks: Sequence[dict[str, Any]]
) -> list[dict[str, str]]:
    """The request explaining one POV: p_Explan (Table 9) with the POV's documents."""
    prompt = render("debateqa/curate_explain.j2", question=question, pov=pov, chunks=chunks)
    return [{"role": "user", "content": prompt}]


def _fan_out(state: CurateState) -> list[Send] | str:
    if "failure" in state:
        return END
    return [
        Send("explain", {**state, "index": index, "pov": pov})
        for index, pov in enumerate(state["povs"])
    ]


async def _explain(state: dict[str, Any], runtime: Runtime[CurateContext]) -> CurateState:
    ctx = runtime.context
    pov = state["pov"]
    # a POV that names no valid document is explained from all of the question's documents
    chunks = [state["chunks"][d - 1] for d in pov["documents"]] or state["chunks"]
    reply = await ctx.client.complete(
        ctx.role,
        explain_messages(state["question"], pov["pov"], chunks),
        stage="curate:explain",
        max_tokens=ctx.max_tokens,
        seed=call_seed(ctx.seed, state["id"], 1 + state["index"]),
    )
    words = reply.text.split()
    explained = {
        **pov,
        "index": state["index"],
        "explanation": " ".join(words[:MAX_EXPLANATION_WORDS]),
        "chunk_ids": [chunk["id"] for chunk in chunks],
        "cut_at_300_words": len(words) > MAX_EXPLANATION_WORDS,
    }
    return {"explained": [explained]}


async def _dedup(state: CurateState, runtime: Runtime[CurateContext]) -> CurateState:
    ctx = runtime.context
    explained = sorted(state["explained"], key=lambda e: e["index"])
    vectors = await asyncio.to_thread(ctx.embedder.encode, [e["pov"] for e in explained])
    vectors = unit_rows(vectors)  # cosine: `<family>:` embedders' vectors are raw
    kept: list[int] = []
    partials = []
    for i, item in enumerate(explained):
        similar = [(float(vectors[i] @ vectors[j]), j) for j in kept]
        best = max(similar, default=(0.0, -1))
        entry = {k: v for k, v in item.items() if k != "index"}
        if best[0] > ctx.threshold:
            entry["duplicate_of"] = explained[best[1]]["pov"]
            entry["similarity"] = round(best[0], 4)
        else:
            kept.append(i)
        partials.append(entry)
    return {"partial_answers": partials}


def curate_identity(ctx: CurateContext) -> dict[str, Any]:
    """What makes two curation runs the same: model, retriever, embedder, settings, prompts."""
    return {
        "run": "curate",
        "model": ctx.role.spec.name,
        "temperature": ctx.role.temperature,
        **retriever_identity(ctx.retriever),
        "embedder": ctx.embedder.name,
        "documents": ctx.documents,
        "threshold": ctx.threshold,
        "max_tokens": ctx.max_tokens,
        "seed": ctx.seed,
        "prompts": template_digest("debateqa/curate_extract.j2", "debateqa/curate_explain.j2"),
    }


@dataclass(frozen=True)
class CurateRun(RunOutput):
    """``curation.jsonl``'s records of the questions (question order), the summary, the tallies."""

    @property
    def unparsed(self) -> int:
        """Questions whose POV list could not be read (final; see ``curation.jsonl``)."""
        return sum(1 for r in self.records if r["status"] == "ok" and r.get("failure"))


async def curate(
    questions: Sequence[Question],
    out_dir: Path,
    ctx: CurateContext,
    *,
    concurrency: int = 4,
    progress: Progress | None = None,
) -> CurateRun:
    """Curate partial answers for every question not yet curated in `out_dir`.

    Writes ``curation.jsonl`` (every question, with duplicates and failures),
    ``partial_answers.jsonl`` (curated questions, duplicates removed) and ``summary.json``.

    Args:
        questions: The questions (ids unique).
        out_dir: Output folder.
        ctx: Model, retriever, embedder and budgets.
        concurrency: Questions in flight.
        progress: The command's progress bar.

    Raises:
        ConfigError: `out_dir` holds a run with other settings.
    """
    identity = curate_identity(ctx)
    graph = build_curate_graph()

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        state = await invoke(
            graph,
            {"id": item["id"], "question": item["question"]},
            {"recursion_limit": 10},
            context=ctx,
        )
        record = {**item, "status": "ok", "chunk_ids": [c["id"] for c in state["chunks"]]}
        if "failure" in state:
            return record | {"failure": state["failure"]}
        return record | {"partial_answers": state["partial_answers"]}

    run = await run_claimed(
        _items(questions),
        task,
        out_dir,
        identity,
        log="curation.jsonl",
        unit="questions",
        concurrency=concurrency,
        progress=progress,
    )
    records = run.records
    curated = [r for r in records if r["status"] == "ok" and not r.get("failure")]
    write_jsonl(
        Path(out_dir) / "partial_answers.jsonl",
        (
            {
                "id": r["id"],
                "question": r["question"],
                "partial_answers": [
                    {
                        "point_of_view": p["pov"],
                        "explanation": p["explanation"],
                        "documents": p["chunk_ids"],
                    }
                    for p in r["partial_answers"]
                    if "duplicate_of" not in p
                ],
            }
            for r in curated
        ),
    )
    povs = [p for r in curated for p in r["partial_answers"]]
    summary = {
        **identity,
        "questions": len(records),
        "curated": len(curated),
        "unparsed": sum(1 for r in records if r["status"] == "ok" and r.get("failure")),
        **outcome_counts(records),
        "povs_extracted": len(povs),
        "duplicates_removed": sum(1 for p in povs if "duplicate_of" in p),
        "cut_at_300_words": sum(1 for p in povs if p["cut_at_300_words"]),
        "ledger": ctx.client.ledger.to_json(),
    }
    write_json(Path(out_dir) / "summary.json", summary)
    return CurateRun(records, summary, [run.tally])


def _items(questions: Sequence[Question]) -> list[dict[str, Any]]:
    """The run engine's items: one per question."""
    return [{"id": q.id, "question": q.text} for q in questions]


#: POVs a dry run's extraction finds per question: DebateQA's questions keep about 3.7 partial
#: answers each (Xu et al., 2024, App. H), rounded up. The real number is unknown before it runs.
PLANNED_POVS = 4
#: What stands in for a POV not yet extracted: 200 characters (p_POV asks for a short sentence).
UNKNOWN_POV = "word " * 40


def _povs_stand_in(tokens: int) -> str:
    """`PLANNED_POVS` POVs citing no document (each explained from all of them), at `tokens`."""
    povs = "".join(
        f"Point-of-View {n}: {UNKNOWN_POV.strip()}\n" for n in range(1, PLANNED_POVS + 1)
    )
    return povs + stand_in(tokens - count_tokens(povs))


#: A dry run's extraction reply (`moot.core.llm.planning`).
POVS_STAND_IN = StandIn(
    _povs_stand_in,
    note=f"curate:explain is counted at {PLANNED_POVS} POVs per question (DebateQA keeps about "
    "3.7); the real calls are one per POV the extraction finds, so more or fewer",
)


class StandInEmbedder:
    """A dry run's embedder: loads no model; no two POVs are alike, so none is dropped.

    Args:
        name: The embedder it stands in for (a run's claim names it).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Orthogonal unit vectors, one per text."""
        return np.eye(len(texts), dtype=np.float32)
