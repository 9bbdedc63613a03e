"""One item of a protocol (`moot.agents.protocol_spec`) as a LangGraph state machine.

    START ─┬→ speak ─┬→ speak  (the next round, unless `rounds` are done or a stop rule says so)
           │         ├→ final → END
           │         └→ END    (no final step, or a reply that could not be read)
           └→ final → END      (0 rounds)

A round is one node (``speak``), all its calls in one super-step (a super-step costs CPU that
counts at 50 ms a call: issue 19): the debaters' turns by the turn plan, each turn's extracted
answers, then the running summary and the stop check. Each item runs on its own checkpointer
thread (its stable id), so a run killed mid-debate resumes at its last finished round; the calls
of the round in flight are asked again, free from the request cache.

Every call's seed derives from the run's seed, the item's id and the call's place: a turn's is the
number of turns before it, and the final step's the number of turns: DEBATunE's debate
(`moot.graphs.debatune_debate`) is a protocol.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from moot.agents.protocol_agents import (
    GO_ON,
    StopCheck,
    ask,
    budget,
    messages,
    pick_schema,
    pick_stand_in,
    say,
    step_messages,
)
from moot.agents.protocol_spec import Protocol, Step
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import call_seed, gather_all

Turn = dict[str, Any]


class ProtocolState(TypedDict, total=False):
    """An item's state: its inputs, its transcript so far, and how it ended."""

    id: str
    inputs: dict[str, Any]
    vars: dict[str, dict[str, Any]]  # each agent's own variables (`Agent.vars`), rendered
    round: int  # rounds done
    turns: Annotated[list[Turn], operator.add]
    summaries: Annotated[list[str], operator.add]
    checks: Annotated[list[dict[str, Any]], operator.add]  # moderators' picks, stop checks
    ended: dict[str, Any]  # {"by": "rounds" | "judge" | "consensus", "round": r}
    final: dict[str, Any]
    failure: dict[str, Any]  # a structured reply that could not be read: the item ends there


@dataclass(frozen=True)
class ProtocolContext:
    """Run-level settings, passed as LangGraph runtime context (never checkpointed).

    Args:
        protocol: The protocol.
        roles: Each agent's role (its name, model and temperature).
        client: The model layer.
        seed: Base sampling seed.
    """

    protocol: Protocol
    roles: dict[str, Role]
    client: ModelClient
    seed: int = 0

    def seed_of(self, item_id: str, step: int | str) -> int:
        """The seed of an item's call at `step`."""
        return call_seed(self.seed, item_id, step)


def build_protocol_graph(checkpointer: Any = None) -> Any:
    """Compile the state machine; invoke it with ``context=ProtocolContext(...)``.

    Args:
        checkpointer: A LangGraph checkpointer (`open_checkpoints`'s) for resume.
    """
    graph = StateGraph(ProtocolState, context_schema=ProtocolContext)
    # "speak", not "round": a checkpoint of DEBATunE's own graph (before it was a protocol) names
    # nodes this graph lacks, so it is dropped (`run_thread`), never resumed with its old state
    graph.add_node("speak", _round)
    graph.add_node("final", _final)
    graph.add_conditional_edges(START, _first, ["speak", "final"])
    graph.add_conditional_edges("speak", _after_round, ["speak", "final", END])
    graph.add_edge("final", END)
    return graph.compile(checkpointer=checkpointer)


def start(protocol: Protocol, item_id: str, inputs: dict[str, Any]) -> ProtocolState:
    """An item's first state: its inputs and its agents' variables, rendered over them."""
    rendered = {
        name: {
            var: protocol.render_text(value, **inputs) if isinstance(value, str) else value
            for var, value in agent.vars.items()
        }
        for name, agent in protocol.agents.items()
    }
    return {"id": item_id, "inputs": inputs, "vars": rendered, "round": 0, "turns": []}


def recursion_limit(protocol: Protocol) -> int:
    """Super-steps an item may take, with a little headroom."""
    return protocol.rounds + 4


def variables(
    state: ProtocolState,
    protocol: Protocol,
    agent: str,
    seen: list[Turn],
    question: str = "",
    round_: int | None = None,
) -> dict[str, Any]:
    """What a template is given (`moot.agents.protocol_spec.STEP_VARIABLES` and the inputs).

    ``round`` is the round being spoken, or, after a round (a summary, a stop check, the final
    step), the round just ended (`round_`).
    """
    summaries, own = state.get("summaries", []), state["vars"]
    return {
        **state["inputs"],
        **own[agent],
        "agent": agent,
        "agents": protocol.order,
        "round": state.get("round", 0) if round_ is None else round_,
        "rounds": protocol.rounds,
        "transcript": [_shown(turn, agent, own[turn["agent"]]) for turn in seen],
        "summary": summaries[-1] if summaries else "",
        "question": question,
    }


def visible(protocol: Protocol, turns: list[Turn], round_: int) -> list[Turn]:
    """The turns a speaker of round `round_` sees (``visibility``), of those said before it."""
    if protocol.visibility == "all":
        return turns
    first = round_ - 1 if protocol.visibility == "last_round" else round_
    return [turn for turn in turns if turn["round"] >= first]


def _shown(turn: Turn, agent: str, speaker_vars: dict[str, Any]) -> dict[str, Any]:
    """A turn as a template sees it: its speaker's variables, the turn, whether it is `agent`'s."""
    shown = {key: value for key, value in turn.items() if key != "prompt"}
    return speaker_vars | shown | {"own": turn["agent"] == agent}


async def _first(
    state: ProtocolState, runtime: Runtime[ProtocolContext]
) -> Literal["speak", "final"]:
    # routers are coroutines: LangGraph runs a plain function in a thread pool
    return "speak" if runtime.context.protocol.rounds else "final"


async def _round(state: ProtocolState, runtime: Runtime[ProtocolContext]) -> ProtocolState:
    ctx = runtime.context
    protocol, round_ = ctx.protocol, state.get("round", 0)
    plan = protocol.turns.plan
    update: ProtocolState = {"round": round_ + 1}
    if plan == "moderated":
        checks, said = await _moderated(state, ctx)
        update["checks"] = checks
        if said is None:
            update["failure"] = checks[-1]
            return update
    elif plan == "simultaneous":
        before = state.get("turns", [])
        said = await gather_all(
            *(
                _turn(state, ctx, agent, before, len(before) + i)
                for i, agent in enumerate(protocol.order)
            )
        )
    else:
        said = []
        for agent in protocol.order:
            before = state.get("turns", []) + said
            said.append(await _turn(state, ctx, agent, before, len(before)))
    update["turns"] = said
    state = {**state, **update, "turns": state.get("turns", []) + said}
    if protocol.summarizer is not None and round_ + 1 < protocol.rounds:
        update["summaries"] = [await _summary(state, ctx, protocol.summarizer, said)]
        state["summaries"] = state.get("summaries", []) + update["summaries"]
    ended = await _stop(state, ctx, said, update)
    if ended is not None:
        update["ended"] = ended
    return update


async def _turn(
    state: ProtocolState,
    ctx: ProtocolContext,
    agent: str,
    before: list[Turn],
    step: int,
    question: str = "",
) -> Turn:
    """`agent`'s turn after the turns `before`; the `step`-th turn of the item."""
    protocol, round_ = ctx.protocol, state.get("round", 0)
    template = (
        protocol.turns.opening
        if round_ == 0 and protocol.turns.opening
        else protocol.turns.template
    )
    seen = visible(protocol, before, round_)
    own = [turn for turn in before if turn["agent"] == agent] if protocol.turns.chat else []
    prompt, chat = messages(
        protocol, agent, template, variables(state, protocol, agent, seen, question), own
    )
    text = await say(
        ctx.client,
        ctx.roles[agent],
        chat,
        stage=turn_stage(protocol, round_, step),
        max_tokens=protocol.agents[agent].max_tokens,
        seed=ctx.seed_of(state["id"], step),
    )
    turn: Turn = {"agent": agent, "round": round_, "text": text}
    if question:
        turn["question"] = question
    if protocol.extract:
        turn["answers"] = {name: rule.read(text) for name, rule in protocol.extract.items()}
    if protocol.turns.chat:
        turn["prompt"] = prompt
    return turn


async def _moderated(
    state: ProtocolState, ctx: ProtocolContext
) -> tuple[list[dict], list[Turn] | None]:
    """The moderator picks a speaker (and may ask them a question), who then speaks."""
    protocol, round_ = ctx.protocol, state.get("round", 0)
    step = protocol.turns.moderator
    assert step is not None  # a moderated plan has one (checked at load)
    before = state.get("turns", [])
    reply = await _structured(
        state,
        ctx,
        step,
        pick_schema(tuple(protocol.order)),
        visible(protocol, before, round_),
        f"moderator:{round_}",
        "moderator",
        pick_stand_in(tuple(protocol.order)),
    )
    if not reply.ok:
        return [_failed("turns.moderator", round_, reply)], None
    pick = reply.value.model_dump()
    turn = await _turn(state, ctx, pick["speaker"], before, len(before), pick["question"])
    return [{"step": "moderator", "round": round_, **pick}], [turn]


async def _summary(state: ProtocolState, ctx: ProtocolContext, step: Step, said: list[Turn]) -> str:
    """The running summary after a round: the previous summary and the round's turns."""
    protocol = ctx.protocol
    seen = variables(state, protocol, step.agent, said, round_=state["round"] - 1)
    chat = step_messages(protocol, step, seen)
    return await say(
        ctx.client,
        ctx.roles[step.agent],
        chat,
        stage=step.stage or "summary",
        max_tokens=budget(protocol, step),
        seed=ctx.seed_of(state["id"], f"summary:{state['round'] - 1}"),
    )


async def _stop(
    state: ProtocolState, ctx: ProtocolContext, said: list[Turn], update: ProtocolState
) -> dict[str, Any] | None:
    """How the debate ended after this round, or None when it goes on."""
    protocol, round_ = ctx.protocol, state["round"] - 1
    if state["round"] >= protocol.rounds:
        return {"by": "rounds", "round": round_}
    rule = protocol.stop
    if rule is None:
        return None
    if rule.consensus is not None:
        answers = {turn.get("answers", {}).get(rule.consensus) for turn in said}
        agreed = len(answers) == 1 and None not in answers and len(said) == len(protocol.order)
        return {"by": "consensus", "round": round_} if agreed else None
    assert rule.judge is not None  # one of the two (checked at load)
    seen = visible(protocol, state["turns"], state["round"])
    reply = await _structured(
        state, ctx, rule.judge, StopCheck, seen, f"stop:{round_}", "stop", GO_ON, round_
    )
    if not reply.ok:
        update["failure"] = _failed("stop.judge", round_, reply)
        update["checks"] = [*update.get("checks", []), update["failure"]]
        return None
    check = {"step": "stop", "round": round_, **reply.value.model_dump()}
    update["checks"] = [*update.get("checks", []), check]
    return {"by": "judge", "round": round_} if check["stop"] else None


async def _structured(
    state: ProtocolState,
    ctx: ProtocolContext,
    step: Step,
    schema: Any,
    seen: list[Turn],
    seed_step: str,
    stage: str,
    stand_in: Any = None,
    round_: int | None = None,
) -> Any:
    protocol = ctx.protocol
    given = variables(state, protocol, step.agent, seen, round_=round_)
    chat = step_messages(protocol, step, given)
    return await ask(
        ctx.client,
        ctx.roles[step.agent],
        chat,
        schema,
        stage=step.stage or stage,
        max_tokens=budget(protocol, step),
        seed=ctx.seed_of(state["id"], seed_step),
        stand_in=stand_in,
    )


def turn_stage(protocol: Protocol, round_: int, step: int) -> str:
    """The ledger stage of the item's `step`-th turn, in round `round_` (``turns.stages``)."""
    stages = protocol.turns.stages
    if stages:
        return stages[min(step, len(stages) - 1)]
    return "opening" if round_ == 0 else "turn"


def _failed(key: str, round_: int | None, reply: Any) -> dict[str, Any]:
    return {"step": key, "round": round_, **reply.failure.to_json()}


async def _after_round(
    state: ProtocolState, runtime: Runtime[ProtocolContext]
) -> Literal["speak", "final", "__end__"]:
    # routers are coroutines: LangGraph runs a plain function in a thread pool
    if state.get("failure"):
        return END
    if not state.get("ended"):
        return "speak"
    return "final" if runtime.context.protocol.final else END


async def _final(state: ProtocolState, runtime: Runtime[ProtocolContext]) -> ProtocolState:
    """The final step, which sees the whole transcript and the latest summary."""
    ctx = runtime.context
    final = ctx.protocol.final
    assert final is not None  # routed here only with one
    turns, ended = state["turns"], max(state["round"] - 1, 0)  # the last round (0: none)
    if final.vote is not None:
        return {"final": vote(turns, final.vote)}
    if final.mean is not None:
        return {"final": mean(turns, final.mean)}
    if final.conclude is not None:
        step = final.conclude
        seen = variables(state, ctx.protocol, step.agent, turns, round_=ended)
        text = await say(
            ctx.client,
            ctx.roles[step.agent],
            step_messages(ctx.protocol, step, seen),
            stage=step.stage or "final",
            max_tokens=budget(ctx.protocol, step),
            seed=ctx.seed_of(state["id"], len(turns)),  # as DEBATunE's conclusion's
        )
        return {"final": {"text": text}}
    assert final.verdict is not None
    schema = ctx.protocol.verdict_model
    reply = await _structured(
        state, ctx, final.verdict, schema, turns, len(turns), "final", None, ended
    )
    if not reply.ok:
        return {"failure": _failed("final.verdict", None, reply)}
    return {"final": {"verdict": reply.value.model_dump()}}


def vote(turns: list[Turn], name: str) -> dict[str, Any]:
    """The majority of the last round's answers `name` (a tie: the first to reach the top count).

    Agents whose turn had no answer are left out, as Du et al.'s released code does; when no
    turn had one the vote has no answer (counted so, never guessed).
    """
    answers = last_answers(turns, name)
    votes = Counter(answers)
    answer = max(votes, key=lambda a: (votes[a], -answers.index(a))) if votes else None
    return {"answer": answer, "votes": dict(votes)}


def mean(turns: list[Turn], names: list[str]) -> dict[str, Any]:
    """The mean of the last round's answers of each extraction in `names`, read as numbers.

    ChatEval's averaged scores (Chan et al., 2023). A turn whose answer is missing or not a
    number is left out, as `vote` leaves it out; an extraction with no number has no mean.
    """
    scores = {
        name: [number for number in map(_number, last_answers(turns, name)) if number is not None]
        for name in names
    }
    means = {name: sum(values) / len(values) if values else None for name, values in scores.items()}
    return {"mean": means, "scores": scores}


def last_answers(turns: list[Turn], name: str) -> list[str]:
    """The last round's answers `name`, in turn order; a turn with none is left out."""
    last = max(turn["round"] for turn in turns)
    return [t["answers"][name] for t in turns if t["round"] == last and t["answers"][name]]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
