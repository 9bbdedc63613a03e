"""The calls of a protocol's agents (`moot.agents.protocol_spec`): turns, picks, checks, verdicts.

Each function renders the protocol's template for the step, makes one call through the model layer
and reads the reply. A structured reply that cannot be read is returned as the model layer's
`ParseFailure` (after its repair round), never as a default: the debate records it and ends.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from moot.agents.protocol_spec import Protocol, Step
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn
from moot.core.llm.structured import Structured

Messages = list[dict[str, str]]


def messages(
    protocol: Protocol,
    agent: str,
    template: str,
    variables: dict[str, Any],
    history: list[dict[str, Any]] = (),  # type: ignore[assignment]
    system: str | None = None,
) -> tuple[str, Messages]:
    """The prompt of `agent`'s call with `template`, and its messages.

    Args:
        protocol: The protocol.
        agent: Who speaks (their system template, if any, opens the messages).
        template: The step's template.
        variables: The template's variables (`moot.graphs.protocol_debate.variables`).
        history: The agent's own earlier turns, each with its ``prompt`` and ``text``: a chat
            before the new prompt (``turns.chat``).
        system: The system template (default: the agent's).
    """
    prompt = protocol.render(template, **variables)
    system = system or protocol.agents[agent].system
    chat: Messages = []
    if system:
        chat.append({"role": "system", "content": protocol.render(system, **variables)})
    for turn in history:
        chat += [
            {"role": "user", "content": turn["prompt"]},
            {"role": "assistant", "content": turn["text"]},
        ]
    return prompt, [*chat, {"role": "user", "content": prompt}]


async def say(
    client: ModelClient,
    role: Role,
    chat: Messages,
    *,
    stage: str,
    max_tokens: int,
    seed: int,
) -> str:
    """One free-text call: a turn, a summary, a conclusion."""
    reply = await client.complete(role, chat, stage=stage, max_tokens=max_tokens, seed=seed)
    return reply.text.strip()  # never empty: the model layer retries an empty reply


async def ask(
    client: ModelClient,
    role: Role,
    chat: Messages,
    schema: type[BaseModel],
    *,
    stage: str,
    max_tokens: int,
    seed: int,
    stand_in: StandIn | None = None,
) -> Structured[Any]:
    """One structured call: a moderator's pick, a judge's stop check, a verdict."""
    return await client.complete_structured(
        role, chat, schema, stage=stage, max_tokens=max_tokens, seed=seed, stand_in=stand_in
    )


def step_messages(protocol: Protocol, step: Step, variables: dict[str, Any]) -> Messages:
    """The messages of a step (its own system template, else its agent's)."""
    return messages(protocol, step.agent, step.template, variables, system=step.system)[1]


def budget(protocol: Protocol, step: Step) -> int:
    """A step's token budget: its own, else its agent's."""
    return step.max_tokens or protocol.agents[step.agent].max_tokens


@functools.cache
def pick_schema(speakers: tuple[str, ...]) -> type[BaseModel]:
    """A moderator's reply: who speaks next (one of `speakers`), and what it asks them."""
    return create_model(
        "ModeratorPick",
        speaker=(Literal[speakers], ...),  # type: ignore[valid-type]
        question=(str, ""),
    )


@functools.cache
def pick_stand_in(speakers: tuple[str, ...]) -> StandIn:
    """A dry run's moderator pick: the first speaker, asked nothing."""
    reply = json.dumps({"speaker": speakers[0], "question": ""})
    return StandIn(
        lambda _: reply,
        note="{calls} moderator picks are counted as the first speaker's turns: who speaks is "
        "the moderator's to say, so the calls per agent may differ (their total does not)",
    )


class StopCheck(BaseModel):
    """A stop judge's reply after a round (MAD's judge, Liang et al., 2023)."""

    stop: bool
    reason: str = Field(max_length=2000)


#: A dry run's stop check: the debate goes on, so the plan counts every round (an upper bound).
GO_ON = StandIn(
    lambda _: '{"stop": false, "reason": "the debate goes on"}',
    note="{calls} stop checks are counted as going on: a judge that stops earlier costs less",
    at_most=True,
)
