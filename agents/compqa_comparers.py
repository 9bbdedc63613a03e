"""The comparer of CompQA (Nikishina et al., 2025, arXiv:2502.14476): four prompting scenarios.

The prompts are the paper's Figure 4, verbatim; their slots are the two objects (A, B) and, in
scenarios 2 and 4, the argument list (ARGS, numbered 1..N). The figure has no aspect slot.

    1  "Compare A and B" (no role)                               (prompts/compqa/scenario_1.j2)
    2  a helpful assistant, "using following arguments: ARGS"    (scenario_2.j2)
    3  an analyst's 300-word comparison: summary, bullet-point    (scenario_3.j2)
       aspects, the best option (1 word)
    4  3 over ARGS: cite argument numbers in square brackets,     (scenario_4.j2)
       15 arguments, create some if needed ([generated]), numbered list of used arguments

Two helper calls feed it: `extract_objects` splits a free-text question into its two objects
and aspect, and `generate_arguments` asks for per-object arguments when no file gives them.
Both are structured output (JSON schema, tolerant parse, one repair round); a reply that still
does not fit is an explicit `ParseFailure`, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from moot.core.data.compqa_inputs import ArgumentFile
from moot.core.llm.models import Completion, ModelClient
from moot.core.llm.spec import Role
from moot.core.llm.stand_in import StandIn, stand_in
from moot.core.llm.structured import Structured
from moot.prompts import render

#: Scenarios whose prompt lists arguments.
ARGUMENT_SCENARIOS: tuple[int, ...] = (2, 4)
#: Arguments `generate_arguments` asks for, per object: CAM's maximum (Section 2.2, "a maximum of
#: 10 arguments for each object").
ARGUMENTS_PER_OBJECT = 10
#: Completion budget of an extraction (three short strings).
EXTRACT_TOKENS = 256
#: Every template a comparing run may send (their digest pins a run).
TEMPLATES: tuple[str, ...] = (
    "compqa/scenario_1.j2",
    "compqa/scenario_2.j2",
    "compqa/scenario_3.j2",
    "compqa/scenario_4.j2",
    "compqa/extract.j2",
    "compqa/arguments.j2",
    "core/repair.j2",
)

Messages = list[dict[str, str]]
# bounded lengths: small models under constrained decoding ramble otherwise
_Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120)]
_Argument = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=400)]


class ExtractedObjects(BaseModel):
    """The two objects a free-text comparative question compares, and its aspect ("" for none)."""

    model_config = ConfigDict(str_strip_whitespace=True)

    object1: _Name
    object2: _Name
    aspect: str = Field(default="", max_length=120)

    @model_validator(mode="after")
    def _distinct(self) -> ExtractedObjects:
        if self.object1.casefold() == self.object2.casefold():
            raise ValueError(f"object1 and object2 are the same ({self.object1!r})")
        return self


class GeneratedArguments(BaseModel):
    """Arguments that object1 is better (``object1``) and that object2 is (``object2``)."""

    object1: list[_Argument] = Field(max_length=ARGUMENTS_PER_OBJECT)
    object2: list[_Argument] = Field(max_length=ARGUMENTS_PER_OBJECT)

    @model_validator(mode="after")
    def _some(self) -> GeneratedArguments:
        if not self.object1 and not self.object2:
            raise ValueError("no arguments for either object")
        return self


def comparison_messages(
    scenario: int,
    object1: str,
    object2: str,
    arguments: Sequence[str] = (),
) -> Messages:
    """The request of `scenario` (1-4); `arguments` (numbered 1..N) are for scenarios 2 and 4.

    Figure 4's slots only: the two objects and the arguments (no aspect).

    Raises:
        ValueError: An unknown scenario, or arguments missing (2, 4) or given (1, 3).
    """
    if scenario not in (1, 2, 3, 4):
        raise ValueError(f"unknown scenario {scenario!r}")
    if (scenario in ARGUMENT_SCENARIOS) != bool(arguments):
        raise ValueError(
            f"scenario {scenario} {'needs' if not arguments else 'takes no'} arguments"
        )
    prompt = render(
        f"compqa/scenario_{scenario}.j2",
        object1=object1,
        object2=object2,
        arguments=list(arguments),
    )
    return [{"role": "user", "content": prompt}]


async def compare(
    client: ModelClient,
    role: Role,
    scenario: int,
    object1: str,
    object2: str,
    arguments: Sequence[str] = (),
    *,
    max_tokens: int = 1024,
    seed: int = 0,
) -> Completion:
    """Ask `role` for the comparison of `scenario` (see `comparison_messages`)."""
    messages = comparison_messages(scenario, object1, object2, arguments)
    return await client.complete(
        role, messages, stage=f"scenario_{scenario}", max_tokens=max_tokens, seed=seed
    )


async def extract_objects(
    client: ModelClient,
    role: Role,
    question: str,
    *,
    seed: int = 0,
    constrained: bool = False,
    arguments: ArgumentFile | None = None,
) -> Structured[ExtractedObjects]:
    """Split a free-text comparative question into `ExtractedObjects` (or a parse failure).

    `arguments` is the file the answer's arguments will come from, if any: a dry run takes the
    objects to be its record with the most argument text (`objects_stand_in`).
    """
    return await client.complete_structured(
        role,
        object_messages(question),
        ExtractedObjects,
        stage="extract",
        max_tokens=EXTRACT_TOKENS,
        seed=seed,
        constrained=constrained,
        stand_in=objects_stand_in(arguments),
    )


def objects_stand_in(arguments: ArgumentFile | None = None) -> StandIn:
    """A dry run's extracted objects: two distinct names (the schema refuses one name twice).

    With an argument file, its record with the most argument text, so the answer that follows
    is counted at its longest prompt.
    """
    if arguments is None:
        return _FREE_TEXT_OBJECTS

    def reply(_: int) -> str:  # read by a dry run alone: a real call never scans the file
        (object1, object2, aspect), _ = arguments.longest()
        return ExtractedObjects(object1=object1, object2=object2, aspect=aspect).model_dump_json()

    note = (
        "{calls} free-text questions' objects are still to extract: each is counted with "
        "--arguments' longest lists (a question whose objects the file lacks is not answered)"
    )
    return StandIn(reply, note=note)


_FREE_TEXT_OBJECTS = StandIn(
    lambda _: ExtractedObjects(object1="first object", object2="second object").model_dump_json(),
    note="{calls} free-text questions' objects are still to extract: counted as 2 words each",
)


def arguments_stand_in(tokens: int) -> str:
    """A dry run's generated arguments: `ARGUMENTS_PER_OBJECT` per object, `tokens` in all.

    Each at most 80 words (400 characters, the schema's bound), so a budget over 1,600 tokens
    is not filled.
    """
    each, more = divmod(tokens, 2 * ARGUMENTS_PER_OBJECT)
    made = [stand_in(min(80, each + (n < more))) for n in range(2 * ARGUMENTS_PER_OBJECT)]
    half = ARGUMENTS_PER_OBJECT
    return json.dumps({"object1": made[:half], "object2": made[half:]})


async def generate_arguments(
    client: ModelClient,
    role: Role,
    object1: str,
    object2: str,
    aspect: str | None,
    *,
    max_tokens: int = 1024,
    seed: int = 0,
    constrained: bool = False,
) -> Structured[GeneratedArguments]:
    """Ask `role` for up to `ARGUMENTS_PER_OBJECT` arguments per object (`GeneratedArguments`)."""
    return await client.complete_structured(
        role,
        argument_list_messages(object1, object2, aspect),
        GeneratedArguments,
        stage="arguments",
        max_tokens=max_tokens,
        seed=seed,
        constrained=constrained,
        stand_in=StandIn(arguments_stand_in),
    )


__all__ = [
    "ARGUMENTS_PER_OBJECT",
    "ARGUMENT_SCENARIOS",
    "TEMPLATES",
    "ExtractedObjects",
    "GeneratedArguments",
    "compare",
    "comparison_messages",
    "extract_objects",
    "generate_arguments",
]


def object_messages(question: str) -> Messages:
    """The request splitting a free-text comparative question into its objects and aspect."""
    return [{"role": "user", "content": render("compqa/extract.j2", question=question)}]


def argument_list_messages(object1: str, object2: str, aspect: str | None) -> Messages:
    """The request for up to `ARGUMENTS_PER_OBJECT` arguments per object."""
    prompt = render(
        "compqa/arguments.j2",
        object1=object1,
        object2=object2,
        aspect=aspect or "",
        count=ARGUMENTS_PER_OBJECT,
    )
    return [{"role": "user", "content": prompt}]
