"""Answering debatable questions as LangGraph state machines: plain, vanilla RAG, ReAct RAG.

    plain:        START → answer → END
    rag:          START → retrieve → answer → END                    (top-k chunks, default 10)
    react:        START → search → agent ─┬→ answer → END            (Final Answer, or no searches
                              ↑           │                           left: the answerer answers)
                              └───────────┘  (Search: <query>)
    react-single: START → search → agent ─┬→ END                      (Final Answer)
                              ↑           ├→ search → agent ...       (Search: <query>)
                              └───────────┘→ final → END              (a search past the last)

ReAct runs at most ``max_searches`` retrievals (3) of ``search_k`` chunks (3), the first on the
question itself, the agent choosing the others; its trace (thoughts, queries, chunk ids, replies)
is saved with the answer. ``react`` is the paper's (DebateQA §5.4.1 and §F.1): a separate agent
model (Claude 3.5 Sonnet there) searches, and the evaluated model answers from the at most
3 × 3 = 9 distinct chunks it gathered with the RAG prompt of Table 17; the agent's own final
answer is kept in the trace only. ``react-single`` is one model that searches and answers in
the ReAct transcript (moot's variant; the paper does not run it). Questions go through the run
engine (`moot.core.runs.run_items`): each finished question is appended to ``answers.jsonl`` at
once, so a rerun answers only what is missing, and the folder is claimed for one model and set
of settings.
"""

from __future__ import annotations

import asyncio
import functools
import operator
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from moot.agents.debateqa_answerers import (
    observation,
    parse_react_step,
    plain_messages,
    rag_messages,
    react_messages,
)
from moot.core.data.questions import Question
from moot.core.data.records import write_json
from moot.core.llm.ledger import call_usage, record_usage
from moot.core.llm.models import Completion, ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn, stand_in
from moot.core.llm.tokens import count_tokens
from moot.core.metrics.stats import mean
from moot.core.runs import Progress, RunOutput, call_seed, outcome_counts, run_claimed
from moot.prompts import render, template_digest

if TYPE_CHECKING:
    from moot.core.retrieval.stand_in import StandInRetriever
from moot.core.retrieval.index import Retriever
from moot.core.retrieval.stand_in import StandInRetriever

#: The ``--mode`` choices.
MODES: tuple[str, ...] = ("plain", "rag", "react", "react-single")
#: The modes whose agent searches in a ReAct loop.
REACT_MODES: tuple[str, ...] = ("react", "react-single")


class AnswerState(TypedDict, total=False):
    """One question's state: what was retrieved, the ReAct trace, the calls, the answer."""

    id: str
    question: str
    chunks: Annotated[list[dict[str, Any]], operator.add]
    trace: Annotated[list[dict[str, Any]], operator.add]
    calls: Annotated[list[dict[str, Any]], operator.add]
    pending: str
    answer: str


@dataclass(frozen=True)
class AnswerSettings:
    """What an answering run does: its models, mode, prompt, retrieval sizes and budgets.

    Args:
        role: The answering model (the evaluated one).
        mode: ``plain``, ``rag``, ``react`` or ``react-single``.
        prompt: System prompt: ``basic``, ``comprehensive`` or ``detailed``.
        k: Chunks given to vanilla RAG.
        search_k: Chunks per ReAct search.
        max_searches: ReAct retrievals, the first on the question.
        max_tokens: Completion budget per call.
        seed: Base sampling seed.
        agent: The ReAct agent of ``react`` (default: `role`); ``react-single`` uses `role`.
    """

    role: Role
    mode: str = "plain"
    prompt: str = "basic"
    k: int = 10
    search_k: int = 3
    max_searches: int = 3
    max_tokens: int = 1024
    seed: int = 0
    agent: Role | None = None

    @property
    def agent_role(self) -> Role:
        """Who runs the ReAct loop: `agent` in ``react``, else the answering model."""
        return self.agent if self.mode == "react" and self.agent else self.role


@dataclass(frozen=True)
class AnswerContext(AnswerSettings):
    """An answering run's settings and what it runs with (the LangGraph runtime context).

    Args:
        client: The model layer.
        retriever: The search tool (a local index or web search); needed by rag and react.
    """

    client: ModelClient = field(kw_only=True)
    retriever: Retriever | None = field(default=None, kw_only=True)


def build_answer_graph(mode: str) -> Any:
    """Compile the state machine of `mode` (see the module docstring)."""
    graph = StateGraph(AnswerState, context_schema=AnswerContext)
    graph.add_node("answer", _answer)
    if mode == "plain":
        graph.add_edge(START, "answer")
    elif mode == "rag":
        graph.add_node("retrieve", _retrieve)
        graph.add_edge(START, "retrieve")
        graph.add_edge("retrieve", "answer")
    else:
        graph.add_node("search", _search)
        graph.add_node("agent", _agent)
        graph.add_edge(START, "search")
        graph.add_edge("search", "agent")
        if mode == "react":
            graph.add_conditional_edges("agent", _after_agent, ["search", "answer"])
        else:
            graph.add_node("final", _final)
            graph.add_conditional_edges("agent", _after_agent, ["search", "final", END])
            graph.add_edge("final", END)
    if mode != "react-single":
        graph.add_edge("answer", END)
    return graph.compile()


def hit_json(hit: Any) -> dict[str, Any]:
    """A retrieved chunk as a JSON record: id, doc_id, text, title, url, score."""
    chunk = hit.chunk
    return {
        "id": chunk.id,
        "doc_id": chunk.doc_id,
        "text": chunk.text,
        "title": chunk.title,
        "url": chunk.url,
        "score": float(hit.score),
    }


_SEARCH_LOCK = threading.Lock()  # one search at a time: indexes are not reentrant


async def search(retriever: Retriever | None, query: str, k: int) -> list[dict[str, Any]]:
    """Run `retriever` off the event loop; its hits as JSON records (see `hit_json`)."""
    if retriever is None:
        raise ValueError("this mode needs a retriever (an index or web search)")

    def run() -> list[Any]:
        with _SEARCH_LOCK:
            return retriever.search(query, k)

    return [hit_json(hit) for hit in await asyncio.to_thread(run)]


async def _call(
    ctx: AnswerContext,
    state: AnswerState,
    messages: list,
    stage: str,
    role: Role | None = None,
    shape: StandIn | None = None,
) -> tuple[Completion, dict[str, Any]]:
    step = len(state.get("calls", []))
    reply = await ctx.client.complete(
        role or ctx.role,
        messages,
        stage=stage,
        max_tokens=ctx.max_tokens,
        seed=call_seed(ctx.seed, state["id"], step),
        stand_in=shape,
    )
    return reply, call_usage(stage, reply)


async def _retrieve(state: AnswerState, runtime: Runtime[AnswerContext]) -> AnswerState:
    ctx = runtime.context
    return {"chunks": await search(ctx.retriever, state["question"], ctx.k)}


async def _answer(state: AnswerState, runtime: Runtime[AnswerContext]) -> AnswerState:
    ctx = runtime.context
    if ctx.mode in ("rag", "react"):  # react: the agent's chunks, Table 17 (§5.4.1)
        messages = rag_messages(state["question"], state.get("chunks", []), ctx.prompt)
    else:
        messages = plain_messages(state["question"], ctx.prompt)
    reply, usage = await _call(ctx, state, messages, ctx.mode)
    return {"answer": reply.text.strip(), "calls": [usage]}


async def _search(state: AnswerState, runtime: Runtime[AnswerContext]) -> AnswerState:
    ctx = runtime.context
    query = state.get("pending") or state["question"]
    hits = await search(ctx.retriever, query, ctx.search_k)
    number = sum(1 for event in state.get("trace", []) if event["kind"] == "search") + 1
    event = {
        "kind": "search",
        "query": query,
        "chunk_ids": [hit["id"] for hit in hits],
        "observation": observation(query, hits, number, ctx.max_searches),
    }
    known = {chunk["id"] for chunk in state.get("chunks", [])}
    fresh = [hit for hit in hits if hit["id"] not in known]
    return {"trace": [event], "chunks": fresh}


async def _agent(state: AnswerState, runtime: Runtime[AnswerContext]) -> AnswerState:
    ctx = runtime.context
    messages = react_messages(
        state["question"], state["trace"], ctx.prompt, ctx.max_searches, ctx.search_k
    )
    stage = "react:agent" if ctx.mode == "react" else "react"
    shape = react_stand_in(ctx.mode, ctx.max_searches)
    reply, usage = await _call(ctx, state, messages, stage, ctx.agent_role, shape)
    step = parse_react_step(reply.text)
    event = {"kind": "step", "thought": step.thought, "reply": reply.text}
    update: AnswerState = {"trace": [event], "calls": [usage]}
    if step.query is not None:
        event["query"] = step.query
        update["pending"] = step.query
    elif ctx.mode == "react":
        event["answer"] = step.answer or ""  # the agent's own answer: kept, not the result
    else:
        update["answer"] = step.answer or ""
    return update


def _after_agent(
    state: AnswerState, runtime: Runtime[AnswerContext]
) -> Literal["search", "answer", "final", "__end__"]:
    done = "answer" if runtime.context.mode == "react" else END
    if state["trace"][-1].get("query") is None:
        return done
    searches = sum(1 for event in state["trace"] if event["kind"] == "search")
    if searches < runtime.context.max_searches:
        return "search"
    return "answer" if runtime.context.mode == "react" else "final"


async def _final(state: AnswerState, runtime: Runtime[AnswerContext]) -> AnswerState:
    ctx = runtime.context
    messages = react_messages(
        state["question"], state["trace"], ctx.prompt, ctx.max_searches, ctx.search_k
    )
    messages.append({"role": "user", "content": render("debateqa/react_final.j2")})
    reply, usage = await _call(ctx, state, messages, "react:final")
    answer = parse_react_step(reply.text).answer or reply.text.strip()
    event = {"kind": "final", "reply": reply.text}
    return {"trace": [event], "calls": [usage], "answer": answer}


#: What stands in for a query the ReAct agent has not chosen yet: 100 characters.
UNKNOWN_QUERY = "word " * 20


@functools.cache
@functools.cache  # asked for at every step of a real run too, which never reads it
def react_stand_in(mode: str, max_searches: int) -> StandIn:
    """A dry run's ReAct step: a thought, then a search for `UNKNOWN_QUERY`, at the full budget.

    The agent always searches again, so each question is counted at its most calls.
    """
    ask = "\nSearch: " + UNKNOWN_QUERY.strip()
    asking = count_tokens("word" + ask) - 1  # as it follows the thought's words
    final = "the answer" if mode == "react" else "the final call"
    return StandIn(
        lambda tokens: stand_in(tokens - asking) + ask,
        note=f"ReAct: each question is counted at its most calls, {max_searches} agent steps "
        f"(--max-searches) and {final}; an agent that answers before its last search makes "
        "fewer",
        at_most=True,
    )


def run_identity(ctx: AnswerContext) -> dict[str, Any]:
    """What makes two answering runs the same: model, mode, prompts, retrieval, budgets."""
    names = ["answer_basic", "answer_comprehensive", "answer_detailed", "rag_system", "rag"]
    names += ["react_system", "react_question", "react_observation", "react_final"]
    identity: dict[str, Any] = {
        "run": "answer",
        "model": ctx.role.spec.name,
        "temperature": ctx.role.temperature,
        "mode": ctx.mode,
        "prompt": ctx.prompt,
        "max_tokens": ctx.max_tokens,
        "seed": ctx.seed,
        "prompts": template_digest(*(f"debateqa/{name}.j2" for name in names)),
    }
    search = retriever_identity(ctx.retriever) if ctx.mode != "plain" else None
    if ctx.mode == "rag":
        identity |= {**(search or {}), "k": ctx.k}
    elif ctx.mode in REACT_MODES:
        identity |= {
            **(search or {}),
            "search_k": ctx.search_k,
            "max_searches": ctx.max_searches,
        }
    if ctx.mode == "react":
        agent = ctx.agent_role
        identity |= {"agent_model": agent.spec.name, "agent_temperature": agent.temperature}
    return identity


def retriever_identity(retriever: Retriever | None) -> dict[str, Any]:
    """What a run's claim pins about its search tool: kind, corpus, filters."""
    from moot.core.retrieval.index import LocalRetriever

    if isinstance(retriever, StandInRetriever):
        return retriever.identity
    name = getattr(retriever, "name", None)
    trusted = getattr(retriever, "trusted_domains", False)
    if isinstance(retriever, LocalRetriever):
        return search_identity(name, trusted, retriever.lam, retriever.index.manifest)
    return search_identity(name, trusted)


def search_identity(
    name: str | None,
    trusted_domains: bool = False,
    mmr: float | None = None,
    manifest: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A search tool's identity from its settings, without loading it (a dry run's).

    Args:
        name: The retriever's name (``bm25``, ``web:brave``).
        trusted_domains: Whether it keeps trusted domains only.
        mmr: A local index's MMR lambda.
        manifest: A local index's manifest (None: web search).
    """
    identity: dict[str, Any] = {"retriever": name, "trusted_domains": trusted_domains}
    if manifest is not None:
        identity |= {
            "mmr": mmr,
            "corpus_sha256": manifest["source_sha256"],
            "chunk_chars": manifest["chunk_chars"],
        }
    return identity


async def answer_questions(
    questions: Sequence[Question],
    out_dir: Path,
    ctx: AnswerContext,
    *,
    concurrency: int = 8,
    progress: Progress | None = None,
) -> RunOutput:
    """Answer every question not yet answered in `out_dir`; write ``summary.json``.

    Args:
        questions: The questions (ids unique).
        out_dir: Output folder: ``answers.jsonl`` (one record per question), ``summary.json``.
        ctx: Model, mode, prompt, retriever and budgets.
        concurrency: Questions in flight.
        progress: The command's progress bar.

    Returns:
        Every record, in question order, the summary and the tally.

    Raises:
        ConfigError: `out_dir` holds a run with other settings.
    """
    identity = run_identity(ctx)
    graph = build_answer_graph(ctx.mode)
    limit = 5 + 3 * ctx.max_searches

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        state = await graph.ainvoke(
            {"id": item["id"], "question": item["question"]},
            {"recursion_limit": limit},
            context=ctx,
        )
        record = {**item, "status": "ok", "answer": state["answer"]}
        record["chunks"] = state.get("chunks", [])
        if ctx.mode in REACT_MODES:
            # observations are the chunks again, as text: the ids in each search event suffice
            record["trace"] = [
                {k: v for k, v in event.items() if k != "observation"} for event in state["trace"]
            ]
        record["ledger"] = record_usage(state.get("calls", []))
        return record

    run = await run_claimed(
        _items(questions, ctx),
        task,
        out_dir,
        identity,
        log="answers.jsonl",
        unit="questions",
        concurrency=concurrency,
        progress=progress,
    )
    records = run.records
    answered = [r for r in records if r["status"] == "ok"]
    summary = {
        **identity,
        "questions": len(records),
        "answered": len(answered),
        **outcome_counts(records),
        "empty_answers": sum(1 for r in answered if not r["answer"]),
        "mean_answer_words": mean([len(r["answer"].split()) for r in answered], digits=2),
        "ledger": ctx.client.ledger.to_json(),
    }
    if ctx.mode in REACT_MODES:
        summary["mean_searches"] = mean(
            [sum(1 for e in r["trace"] if e["kind"] == "search") for r in answered], digits=2
        )
    write_json(Path(out_dir) / "summary.json", summary)
    return RunOutput(records, summary, [run.tally])


def _items(questions: Sequence[Question], ctx: AnswerSettings) -> list[dict[str, Any]]:
    """The run engine's items: one per question."""
    return [
        {"id": q.id, "question": q.text, "mode": ctx.mode, "prompt": ctx.prompt} for q in questions
    ]


__all__ = [
    "MODES",
    "REACT_MODES",
    "UNKNOWN_QUERY",
    "AnswerContext",
    "AnswerSettings",
    "AnswerState",
    "answer_questions",
    "build_answer_graph",
    "hit_json",
    "retriever_identity",
    "run_identity",
    "search_identity",
]
