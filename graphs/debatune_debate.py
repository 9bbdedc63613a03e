"""One DEBATunE debate as a LangGraph state machine.

    START ─┬→ debater_a → debater_b ─┬→ debater_a (next round)
           │                         └→ conclude → END   (after `rounds` rounds)
           └→ statement → END                            (`rounds` 0: no debate)

Agent A holds the stance and the argument, agent B the opposite stance. A opens with explanations
and evidence, B raises critical questions and counter-evidence, each later turn answers the
opponent's questions and counters; after the last round A concludes a detailed statement from the
whole transcript. With 0 rounds there is no debate (the paper's "Topic Data without Debate"
ablation, Section 5.2, Table 2): A's statement is its opening turn, written from the topic, stance
and argument alone (Eq. 1, s_{1,1}), with the reference's opening prompt. Each debate runs on its
own checkpointer thread (its stable id), so an interrupted debate resumes at its last finished
turn.
"""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from moot.agents.debatune_debaters import Turn, conclude, opposite, speak
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role


class DebateState(TypedDict, total=False):
    """The graph state: the debate's inputs, its transcript so far, and the conclusion."""

    id: str
    topic: str
    stance: str
    argument: str
    turns: Annotated[list[dict[str, Any]], operator.add]
    conclusion: str


@dataclass(frozen=True)
class DebateContext:
    """Run-level settings, passed as LangGraph runtime context (never checkpointed).

    Args:
        client: The model layer.
        debater_a: Holds the stance and concludes.
        debater_b: Takes the opposite stance.
        rounds: Debate rounds (one A turn and one B turn each); 0: no debate, A's opening
            statement is the conclusion.
        seed: Base sampling seed; each call's seed derives from it and the debate id.
        turn_tokens: Completion budget per turn.
        conclusion_tokens: Completion budget for the conclusion.
    """

    client: ModelClient
    debater_a: Role
    debater_b: Role
    rounds: int = 2
    seed: int = 0
    turn_tokens: int = 800
    conclusion_tokens: int = 2048


def call_seed(seed: int, debate_id: str, step: int) -> int:
    """A per-call seed: distinct across debates and turns, identical across reruns."""
    digest = hashlib.sha256(f"{seed}:{debate_id}:{step}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


def recursion_limit(rounds: int) -> int:
    """Steps a debate of `rounds` rounds needs, with a little headroom."""
    return 2 * rounds + 4


def build_debate_graph(checkpointer: Any = None) -> Any:
    """Compile the debate state machine.

    Args:
        checkpointer: A LangGraph checkpointer (e.g. ``AsyncSqliteSaver``) for resume.

    Returns:
        The compiled graph; invoke it with ``context=DebateContext(...)`` and
        ``{"configurable": {"thread_id": debate_id}, "recursion_limit": recursion_limit(rounds)}``.
    """
    graph = StateGraph(DebateState, context_schema=DebateContext)
    graph.add_node("debater_a", _debater_a)
    graph.add_node("debater_b", _debater_b)
    graph.add_node("conclude", _conclude)
    graph.add_node("statement", _statement)
    graph.add_conditional_edges(START, _first, ["debater_a", "statement"])
    graph.add_edge("statement", END)
    graph.add_edge("debater_a", "debater_b")
    graph.add_conditional_edges("debater_b", _after_round, ["debater_a", "conclude"])
    graph.add_edge("conclude", END)
    return graph.compile(checkpointer=checkpointer)


def transcript(state: DebateState) -> list[Turn]:
    """The debate's turns so far."""
    return [Turn(**turn) for turn in state.get("turns", [])]


async def _debater_a(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    return await _speak("A", state, runtime.context)


async def _debater_b(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    return await _speak("B", state, runtime.context)


async def _speak(speaker: str, state: DebateState, ctx: DebateContext) -> DebateState:
    history = transcript(state)
    text = await speak(
        ctx.client,
        ctx.debater_a if speaker == "A" else ctx.debater_b,
        topic=state["topic"],
        stance=state["stance"],
        argument=state["argument"],
        speaker=speaker,
        history=history,
        seed=call_seed(ctx.seed, state["id"], len(history)),
        max_tokens=ctx.turn_tokens,
    )
    side = state["stance"] if speaker == "A" else opposite(state["stance"])
    turn = {"speaker": speaker, "side": side, "round": len(history) // 2, "text": text}
    return {"turns": [turn]}


async def _first(
    state: DebateState, runtime: Runtime[DebateContext]
) -> Literal["debater_a", "statement"]:
    return "debater_a" if runtime.context.rounds else "statement"


async def _statement(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    """No debate: A's opening turn, from the topic, stance and argument alone, is the statement."""
    turn = await _speak("A", state, runtime.context)
    return {"conclusion": turn["turns"][0]["text"]}


async def _after_round(
    state: DebateState, runtime: Runtime[DebateContext]
) -> Literal["debater_a", "conclude"]:
    return "conclude" if len(state["turns"]) >= 2 * runtime.context.rounds else "debater_a"


async def _conclude(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    ctx = runtime.context
    history = transcript(state)
    text = await conclude(
        ctx.client,
        ctx.debater_a,
        topic=state["topic"],
        stance=state["stance"],
        argument=state["argument"],
        transcript=history,
        seed=call_seed(ctx.seed, state["id"], len(history)),
        max_tokens=ctx.conclusion_tokens,
    )
    return {"conclusion": text}
