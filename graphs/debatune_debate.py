"""One DEBATunE debate: its protocol (``prompts/debatune/protocol.yaml``), run as any protocol.

Agent A holds the stance and the argument, agent B the opposite stance. A opens with explanations
and evidence, B raises critical questions and counter-evidence, each later turn answers the
opponent's questions and counters; after the last round A concludes a detailed statement from the
whole transcript (Section 3.1). With 0 rounds there is no debate (the paper's "Topic Data without
Debate" ablation, Section 5.2, Table 2): A's statement is its opening turn, written from the topic,
stance and argument alone (Eq. 1, s_{1,1}), with the reference's opening prompt.

The debate runs on `moot.graphs.protocol_debate`'s state machine: a round is one node (A's turn,
then B's), each debate its own checkpointer thread (its stable id), each call's seed the debate's
and the number of turns before it; the requests are those DEBATunE's own graph sent before the
protocol existed, word for word (tests/graphs/test_debatune_debate.py).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from moot.agents.debatune_debaters import opposite
from moot.agents.protocol_spec import Final, Protocol, Step, load_protocol
from moot.core.llm.spec import Role
from moot.prompts import render

#: DEBATunE's protocol file, shipped with its prompts.
PROTOCOL = "debatune/protocol.yaml"


class ShippedProtocol(Protocol):
    """A protocol shipped with the prompts, its templates rendered as every built-in is.

    Through `moot.prompts.render`, so a run's ``--prompts`` overrides reach them.
    """

    def render(self, template: str, **variables: Any) -> str:
        """Render one of its templates, or the run's override of it."""
        return render(template, folder=PROTOCOL.rpartition("/")[0], **variables)


@functools.cache
def shipped_protocol() -> Protocol:
    """DEBATunE's protocol as shipped (2 rounds, the reference's budgets)."""
    with resources.as_file(resources.files("moot.prompts").joinpath(PROTOCOL)) as path:
        return ShippedProtocol.model_construct(**dict(load_protocol(path)))


@functools.cache
def debatune_protocol(rounds: int, turn_tokens: int, conclusion_tokens: int) -> Protocol:
    """DEBATunE's protocol for `rounds` rounds, with the run's budgets per turn and conclusion.

    With 0 rounds the final step is A's opening turn: its prompt, system prompt, budget and stage.
    """
    protocol = shipped_protocol()
    agents = {
        name: agent.model_copy(update={"max_tokens": turn_tokens})
        for name, agent in protocol.agents.items()
    }
    conclude = protocol.final.conclude  # type: ignore[union-attr]
    if rounds:
        step = conclude.model_copy(update={"max_tokens": conclusion_tokens})  # type: ignore[union-attr]
    else:
        step = Step(agent="A", template=protocol.turns.template, stage=protocol.turns.stages[0])  # type: ignore[index]
    return protocol.model_copy(
        update={"rounds": rounds, "agents": agents, "final": Final(conclude=step)}
    )


def debaters(debater_a: Role, debater_b: Role) -> dict[str, Role]:
    """The protocol's agents' roles: A and B."""
    return {"A": debater_a, "B": debater_b}


def transcript(stance: str, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A debate's turns as its record keeps them: speaker, side, round, text."""
    return [
        {
            "speaker": turn["agent"],
            "side": stance if turn["agent"] == "A" else opposite(stance),
            "round": turn["round"],
            "text": turn["text"],
        }
        for turn in turns
    ]
