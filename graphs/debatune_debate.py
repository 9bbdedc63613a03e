"""One DEBATunE debate as a LangGraph state machine.

    START ─┬→ round ─┬→ round (next round: A's turn, then B's)
           │         └→ conclude → END   (after `rounds` rounds)
           └→ statement → END            (`rounds` 0: no debate)

Agent A holds the stance and the argument, agent B the opposite stance. A opens with explanations
and evidence, B raises critical questions and counter-evidence, each later turn answers the
opponent's questions and counters; after the last round A concludes a detailed statement from the
whole transcript. With 0 rounds there is no debate (the paper's "Topic Data without Debate"
ablation, Section 5.2, Table 2): A's statement is its opening turn, written from the topic, stance
and argument alone (Eq. 1, s_{1,1}), with the reference's opening prompt. Each debate runs on its
own checkpointer thread (its stable id), so an interrupted debate resumes at its last finished
round.

A round is one node, both its turns in one super-step: a LangGraph super-step costs CPU (task and
config set-up, channel writes, the step's checkpoint) that counts when the server answers in 50 ms
(issue 19). Measured with a client that answers at once (32 debates at a time, load ~20): the
graph's work was 2.2-2.4 ms of CPU per call with a node per turn, 1.7-1.9 ms with a node per
round. What a round holds back is A's turn of a round that fails or is killed during B's turn:
with the request cache (the default) asking again is free; with ``--no-cache`` it is paid again.
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
    return rounds + 4


def build_debate_graph(checkpointer: Any = None) -> Any:
    """Compile the debate state machine.

    Args:
        checkpointer: A LangGraph checkpointer (e.g. ``AsyncSqliteSaver``) for resume.

    Returns:
        The compiled graph; invoke it with ``context=DebateContext(...)`` and
        ``{"configurable": {"thread_id": debate_id}, "recursion_limit": recursion_limit(rounds)}``.
    """
    graph = StateGraph(DebateState, context_schema=DebateContext)
    graph.add_node("round", _round)
    graph.add_node("conclude", _conclude)
    graph.add_node("statement", _statement)
    graph.add_conditional_edges(START, _first, ["round", "statement"])
    graph.add_edge("statement", END)
    graph.add_conditional_edges("round", _after_round, ["round", "conclude"])
    graph.add_edge("conclude", END)
    return graph.compile(checkpointer=checkpointer)


def transcript(state: DebateState) -> list[Turn]:
    """The debate's turns so far."""
    return [Turn(**turn) for turn in state.get("turns", [])]


async def _round(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    """A's turn, then B's on the transcript with it."""
    opening = await _speak("A", state, runtime.context)
    answer = await _speak(
        "B", {**state, "turns": state.get("turns", []) + opening["turns"]}, runtime.context
    )
    return {"turns": opening["turns"] + answer["turns"]}


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
) -> Literal["round", "statement"]:
    # routers are coroutines: LangGraph runs a plain function in a thread pool
    return "round" if runtime.context.rounds else "statement"


async def _statement(state: DebateState, runtime: Runtime[DebateContext]) -> DebateState:
    """No debate: A's opening turn, from the topic, stance and argument alone, is the statement."""
    turn = await _speak("A", state, runtime.context)
    return {"conclusion": turn["turns"][0]["text"]}


async def _after_round(
    state: DebateState, runtime: Runtime[DebateContext]
) -> Literal["round", "conclude"]:
    return "conclude" if len(state["turns"]) >= 2 * runtime.context.rounds else "round"


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
