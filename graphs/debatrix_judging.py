"""Debatrix judging as a LangGraph state machine with explicit memory.

    START ─route─▶ analyze ×dimension (speech i) ─▶ sync ─route─▶ analyze (speech i+1) ─▶ …
            └─────────────────────────────────────────────────▶ judge ×dimension ─▶ panel ─▶ END

Dimensions advance in lockstep, one speech per superstep (`Send` fan-out), each with its own memory:
the analyses so far (``memory``: what the judge is shown next) and the per-speech judgments. When a
prompt would not fit the judge's context window it is never sent: Debatrix condenses its oldest
analyses into a summary until it fits; the transcript-based frameworks (``non-iterative``,
``direct``, ``dimensional``) record the debate as incomplete, as the paper counts them.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from moot.agents.debatrix_judges import (
    Dimension,
    Extractor,
    Framework,
    analysis_messages,
    compression_messages,
    judgment_messages,
    panel_messages,
    transcript,
)
from moot.core.data.debates import Debate
from moot.core.errors import ContextWindowExceeded
from moot.core.llm.models import Completion, ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn
from moot.core.llm.structured import Structured
from moot.core.llm.tokens import count_message_tokens
from moot.graphs.checkpoints import settled


def _merge(left: dict, right: dict) -> dict:
    return {**left, **right}


def _first(left: str | None, right: str | None) -> str | None:
    return left or right


def _add_usage(left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
    merged = {key: left.get(key, 0) + right.get(key, 0) for key in {*left, *right}}
    merged["largest_prompt"] = max(left.get("largest_prompt", 0), right.get("largest_prompt", 0))
    return merged


class JudgeState(TypedDict, total=False):
    """The judgment of one debate so far (checkpointed after every superstep)."""

    plan: dict[str, Any]  # dimensions, speeches, chronological: fixed at the start
    memory: Annotated[
        dict[str, dict[str, Any]], _merge
    ]  # per dimension: memory, speeches, summaries
    dimensions: Annotated[dict[str, dict[str, Any]], _merge]  # per dimension: its verdict
    final: dict[str, Any] | None
    incomplete: Annotated[str | None, _first]  # why the debate could not be judged
    usage: Annotated[dict[str, int], _add_usage]


@dataclass(frozen=True)
class JudgeContext:
    """What one debate is judged with (runtime context, never checkpointed).

    Args:
        client: The model layer.
        role: The judge's model.
        debate: The debate.
        framework: How to judge it.
        dimensions: What to judge it on.
        extractor: Reads scores and winners from judgments.
        window: The judge's context window in tokens (None: unknown, not checked here).
        analysis_tokens: Completion budget of a speech analysis (and of a memory summary).
        judgment_tokens: Completion budget of a dimension's or the panel's judgment.
    """

    client: ModelClient
    role: Role
    debate: Debate
    framework: Framework
    dimensions: tuple[Dimension, ...]
    extractor: Extractor
    window: int | None
    analysis_tokens: int = 1024
    judgment_tokens: int = 1536

    def dimension(self, name: str) -> Dimension:
        """The judged dimension called `name`."""
        return next(d for d in self.dimensions if d.name == name)

    def fits(self, messages: list[dict[str, str]], reserve: int) -> bool:
        """Whether the prompt leaves `reserve` tokens of the window for the reply."""
        return self.window is None or count_message_tokens(messages) + reserve <= self.window

    async def ask(
        self,
        messages: list[dict[str, str]],
        stage: str,
        max_tokens: int,
        stand_in: StandIn | None = None,
    ) -> Completion:
        """One free-text call of the judge (a dry run's reply: `stand_in`, else its full budget)."""
        return await self.client.complete(
            self.role,
            messages,
            stage=stage,
            max_tokens=max_tokens,
            seed=self.extractor.seed,
            stand_in=stand_in,
        )


def initial_state(debate: Debate, framework: Framework, dimensions: Sequence[Dimension]) -> dict:
    """The state a debate's judgment starts from."""
    names = [d.name for d in dimensions]
    return {
        "plan": {
            "dimensions": names,
            "speeches": len(debate.speeches),
            "chronological": framework.chronological,
        },
        "memory": {name: {"memory": [], "speeches": [], "summaries": []} for name in names},
        "dimensions": {},
        "final": None,
        "incomplete": None,
        "usage": {},
    }


def _usage(*calls: Completion | Structured | dict[str, Structured]) -> dict[str, int]:
    completions: list[Completion] = []
    for call in calls:
        if isinstance(call, Completion):
            completions.append(call)
        elif isinstance(call, Structured):
            completions.extend(call.completions)
        else:
            completions.extend(c for s in call.values() for c in s.completions)
    return {
        "calls": len(completions),
        "cached": sum(c.cached for c in completions),
        "prompt_tokens": sum(c.prompt_tokens for c in completions),
        "completion_tokens": sum(c.completion_tokens for c in completions),
        "largest_prompt": max((c.prompt_tokens for c in completions), default=0),
    }


def _scored(result: Structured) -> dict[str, Any]:
    if result.ok:
        return result.value.model_dump()  # type: ignore[union-attr]
    return {"parse_failure": result.failure.to_json()}  # type: ignore[union-attr]


#: A dry run's memory summary: counted as a run whose every reply is at its full budget asks.
_SUMMARY_STAND_IN = StandIn(
    note="{calls} memory summaries are counted for prompts over the judge's window with every "
    "earlier reply at its full budget: shorter replies need fewer"
)


async def _condense(
    ctx: JudgeContext, dimension: Dimension, memory: list, reserve: int, build: Any
) -> tuple[list, list[str], list[Completion]]:
    """Summarise the oldest analyses until ``build(memory)`` fits with `reserve` tokens to spare.

    Raises:
        ContextWindowExceeded: Even a memory of one summary leaves no room.
    """
    summaries: list[str] = []
    calls: list[Completion] = []
    words = ctx.analysis_tokens * 3 // 4
    while not ctx.fits(build(memory), reserve):
        take = len(memory)
        while take > 1 and not ctx.fits(
            compression_messages(ctx.debate, dimension, memory[:take], words), ctx.analysis_tokens
        ):
            take -= 1
        if take < 2:
            raise ContextWindowExceeded(
                f"the analysis memory cannot shrink enough to fit the {ctx.window}-token window"
            )
        messages = compression_messages(ctx.debate, dimension, memory[:take], words)
        reply = await ctx.ask(messages, "memory_summary", ctx.analysis_tokens, _SUMMARY_STAND_IN)
        calls.append(reply)
        summaries.append(reply.text)
        title = f"Summary of: {'; '.join(section[0] for section in memory[:take])}"
        memory = [[title, reply.text], *memory[take:]]
    return memory, summaries, calls


async def _analyze(payload: dict[str, Any], runtime: Runtime[JudgeContext]) -> JudgeState:
    """Analyse one speech for one dimension and score it; grow that dimension's memory."""
    ctx, index = runtime.context, payload["index"]
    dimension, state = ctx.dimension(payload["dimension"]), payload["memory"]
    speech = ctx.debate.speeches[index]
    memory, summaries, calls = list(state["memory"]), [], []
    try:
        if ctx.framework.iterative:

            def build(mem: list) -> list[dict[str, str]]:
                return analysis_messages(ctx.debate, dimension, index, mem, analyses=True)

            memory, summaries, calls = await _condense(
                ctx, dimension, memory, ctx.analysis_tokens, build
            )
            messages = build(memory)
        else:  # the previous speeches' raw text
            messages = analysis_messages(
                ctx.debate, dimension, index, transcript(ctx.debate, index), analyses=False
            )
            if not ctx.fits(messages, ctx.analysis_tokens):
                raise ContextWindowExceeded(_too_long(ctx, messages, f"speech {index + 1}"))
        analysis = await ctx.ask(messages, "speech_analysis", ctx.analysis_tokens)
        score = await ctx.extractor.speech_score(ctx.debate, speech.speaker, analysis.text)
    except ContextWindowExceeded as exc:
        return {
            "incomplete": f"{dimension.name}, speech {index + 1}: {exc}",
            "usage": _usage(*calls),
        }
    title = f"Analysis of Speech {index + 1} by {speech.speaker}"
    judged = {
        "index": index,
        "speaker": speech.speaker,
        "analysis": analysis.text,
        **_scored(score),
    }
    updated = {
        "memory": [*memory, [title, analysis.text]],
        "speeches": [*state["speeches"], judged],
        "summaries": [*state["summaries"], *summaries],
    }
    return {"memory": {dimension.name: updated}, "usage": _usage(*calls, analysis, score)}


async def _judge(payload: dict[str, Any], runtime: Runtime[JudgeContext]) -> JudgeState:
    """Turn one dimension's memory (or the transcript) into a verdict with debater scores."""
    ctx = runtime.context
    dimension, state = ctx.dimension(payload["dimension"]), payload["memory"]
    memory, summaries, calls = list(state["memory"]), [], []
    try:
        if ctx.framework.chronological:

            def build(mem: list) -> list[dict[str, str]]:
                return judgment_messages(ctx.debate, dimension, mem, analyses=True)

            if ctx.framework.iterative:
                memory, summaries, calls = await _condense(
                    ctx, dimension, memory, ctx.judgment_tokens, build
                )
            messages = build(memory)
        else:
            messages = judgment_messages(ctx.debate, dimension, transcript(ctx.debate), False)
        if not ctx.fits(messages, ctx.judgment_tokens):
            raise ContextWindowExceeded(_too_long(ctx, messages, "the debate judgment"))
        judgment = await ctx.ask(messages, "judgment", ctx.judgment_tokens)
        verdict, extracted = await _verdict(ctx, judgment.text, dimension.allow_tie)
    except ContextWindowExceeded as exc:
        return {"incomplete": f"{dimension.name}: {exc}", "usage": _usage(*calls)}
    record = {
        "weight": dimension.weight,
        "allow_tie": dimension.allow_tie,
        "speeches": state["speeches"],
        "summaries": [*state["summaries"], *summaries],
        **verdict,
    }
    return {"dimensions": {dimension.name: record}, "usage": _usage(*calls, judgment, *extracted)}


async def _panel(state: JudgeState, runtime: Runtime[JudgeContext]) -> JudgeState:
    """Combine the dimensions' verdicts by weight into one winner (or adopt the only one)."""
    ctx = runtime.context
    if state.get("incomplete"):
        return {}
    if not ctx.framework.split:
        only = state["dimensions"][ctx.dimensions[0].name]
        keys = ("judgment", "debaters", "winner", "winner_failure")
        return {"final": {key: only[key] for key in keys}}
    verdicts = [(d, state["dimensions"][d.name]["judgment"]) for d in ctx.dimensions]
    messages = panel_messages(ctx.debate, verdicts)
    try:
        if not ctx.fits(messages, ctx.judgment_tokens):
            raise ContextWindowExceeded(_too_long(ctx, messages, "the panel"))
        judgment = await ctx.ask(messages, "panel", ctx.judgment_tokens)
        verdict, extracted = await _verdict(ctx, judgment.text, allow_tie=False)
    except ContextWindowExceeded as exc:
        return {"incomplete": f"panel: {exc}"}
    return {"final": verdict, "usage": _usage(judgment, *extracted)}


async def _verdict(ctx: JudgeContext, judgment: str, allow_tie: bool) -> tuple[dict, list]:
    scores = await ctx.extractor.debater_scores(ctx.debate, judgment)
    winner = await ctx.extractor.winner(ctx.debate, judgment, allow_tie)
    verdict = {
        "judgment": judgment,
        "debaters": {name: _scored(result) for name, result in scores.items()},
        "winner": winner.value.winner if winner.ok else None,  # type: ignore[union-attr]
        "winner_failure": None if winner.ok else winner.failure.to_json(),  # type: ignore[union-attr]
    }
    return verdict, [scores, winner]


def _too_long(ctx: JudgeContext, messages: list[dict[str, str]], what: str) -> str:
    return (
        f"the prompt for {what} ({count_message_tokens(messages)} tokens) leaves no room for the "
        f"reply in the {ctx.window}-token window"
    )


def _route(state: JudgeState) -> list[Send] | str:
    """The next superstep: the next speech for every dimension, or the judgments."""
    if state.get("incomplete"):
        return END
    plan, memory = state["plan"], state["memory"]
    if plan["chronological"]:
        done = min(len(memory[name]["speeches"]) for name in plan["dimensions"])
        if done < plan["speeches"]:
            return [
                Send("analyze", {"dimension": name, "index": done, "memory": memory[name]})
                for name in plan["dimensions"]
            ]
    return [Send("judge", {"dimension": n, "memory": memory[n]}) for n in plan["dimensions"]]


def recursion_limit(speeches: int) -> int:
    """Supersteps a debate of `speeches` speeches needs, with room to spare."""
    return 2 * speeches + 10


@functools.cache
def _builder() -> StateGraph:
    graph = StateGraph(JudgeState, context_schema=JudgeContext)
    graph.add_node("analyze", settled(_analyze))  # a failed dimension leaves the others saved
    graph.add_node("sync", lambda state: {})  # joins the dimensions' parallel analyses
    graph.add_node("judge", settled(_judge))
    graph.add_node("panel", _panel)
    graph.add_conditional_edges(START, _route, ["analyze", "judge", END])
    graph.add_edge("analyze", "sync")
    graph.add_conditional_edges("sync", _route, ["analyze", "judge", END])
    graph.add_edge("judge", "panel")
    graph.add_edge("panel", END)
    return graph


def build_judge_graph(checkpointer: Any = None) -> Any:
    """The compiled Debatrix state machine (one thread per judged debate and repeat).

    Args:
        checkpointer: A LangGraph checkpointer (`open_checkpoints`'s) for resume.
    """
    return _builder().compile(checkpointer=checkpointer)


__all__ = ["JudgeContext", "JudgeState", "build_judge_graph", "initial_state", "operator"]
