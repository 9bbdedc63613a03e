"""CompQA comparative answers as a LangGraph state machine per question (`moot compare`).

    START ─┬→ extract ─┬→ arguments ─┬→ answer → END      extract: free-text questions only
           │           │             └→ END                arguments: scenarios 2 and 4 only
           │           ├→ answer                           (a file's, else the model's)
           │           └→ END   (the extraction could not be read: a parse failure)
           ├→ arguments
           └→ answer

``extract`` asks the model for a free-text question's two objects and aspect (recorded as
``extracted`` so a person can check them); ``arguments`` takes the question's argument lists
from ``--arguments`` or, with ``--generate-arguments``, from the model; a question with none is
``no_arguments``, never answered as scenario 1 or 3. Questions go through the run engine
(`moot.core.runs.run_items`) into ``answers.jsonl``: a rerun asks only what is missing, and the
folder is claimed for one model, scenario, prompt set and arguments file. The answer
file (``<generator>_scenario_<N>.json``, the shape `moot eval compqa` reads) and
``summary.json`` are written atomically from the log.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from moot.agents.compqa_comparers import (
    ARGUMENT_SCENARIOS,
    ARGUMENTS_PER_OBJECT,
    TEMPLATES,
    compare,
    extract_objects,
    generate_arguments,
)
from moot.core.data.compqa_inputs import ArgumentFile, Arguments, CompQuestion
from moot.core.data.records import stable_id, write_json
from moot.core.llm.ledger import call_usage, record_usage
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.metrics.stats import mean
from moot.core.runs import Progress, Tally, call_seed, outcome_counts, run_claimed
from moot.prompts import render, template_digest

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class CompareState(TypedDict, total=False):
    """One question's state: its objects (given or extracted), arguments, answer and calls."""

    id: str
    text: str | None
    object1: str
    object2: str
    aspect: str | None
    extracted: dict[str, Any]
    arguments: dict[str, Any]
    failure: dict[str, Any]
    no_arguments: bool
    comparison: str
    calls: Annotated[list[dict[str, Any]], operator.add]


@dataclass(frozen=True)
class CompareSettings:
    """What a comparing run does: its model, scenario, arguments and budgets.

    Args:
        role: The answering model (it also extracts objects and generates arguments, at
            `helper_role`'s temperature).
        scenario: CompQA prompting scenario, 1-4.
        arguments: Argument lists from a file (scenarios 2 and 4).
        generate_arguments: Ask the model for the arguments instead (scenarios 2 and 4).
        constrained: Send JSON schemas as ``response_format`` for extraction and arguments.
        max_tokens: Completion budget of an answer and of an argument list.
        seed: Base sampling seed.
    """

    role: Role
    scenario: int
    arguments: ArgumentFile | None = None
    generate_arguments: bool = False
    constrained: bool = False
    max_tokens: int = 1024
    seed: int = 0

    def __post_init__(self) -> None:
        needs = self.scenario in ARGUMENT_SCENARIOS
        given = self.arguments is not None or self.generate_arguments
        if self.scenario not in (1, 2, 3, 4):
            raise ValueError(f"unknown scenario {self.scenario!r} (expected 1, 2, 3 or 4)")
        if needs != given or (self.arguments is not None and self.generate_arguments):
            raise ValueError(
                "scenarios 2 and 4 need exactly one of arguments and generate_arguments; "
                "scenarios 1 and 3 take neither"
            )

    @property
    def helper_role(self) -> Role:
        """`role` for moot's own steps: extracting objects and generating arguments.

        When the answers use the model's own default temperature (the paper's "standard
        configuration", Section 3), these steps still run at 0: the paper's inputs to them are
        fixed (its questions, CAM's arguments).
        """
        return (
            self.role if self.role.temperature is not None else replace(self.role, temperature=0.0)
        )


@dataclass(frozen=True)
class CompareContext(CompareSettings):
    """A comparing run's settings and its model layer (the LangGraph runtime context).

    Args:
        client: The model layer.
    """

    client: ModelClient = field(kw_only=True)


def build_compare_graph() -> Any:
    """Compile the per-question state machine (see the module docstring)."""
    graph = StateGraph(CompareState, context_schema=CompareContext)
    graph.add_node("extract", _extract)
    graph.add_node("arguments", _arguments)
    graph.add_node("answer", _answer)
    graph.add_conditional_edges(START, _start, ["extract", "arguments", "answer"])
    graph.add_conditional_edges("extract", _next, ["arguments", "answer", END])
    graph.add_conditional_edges("arguments", _next, ["answer", END])
    graph.add_edge("answer", END)
    return graph.compile()


def _start(
    state: CompareState, runtime: Runtime[CompareContext]
) -> Literal["extract", "arguments", "answer"]:
    return "extract" if state.get("object1") is None else _next(state, runtime)  # type: ignore[return-value]


def _next(
    state: CompareState, runtime: Runtime[CompareContext]
) -> Literal["arguments", "answer", "__end__"]:
    if "failure" in state or state.get("no_arguments"):
        return END
    if runtime.context.scenario in ARGUMENT_SCENARIOS and "arguments" not in state:
        return "arguments"
    return "answer"


async def _extract(state: CompareState, runtime: Runtime[CompareContext]) -> CompareState:
    ctx = runtime.context
    result = await extract_objects(
        ctx.client,
        ctx.helper_role,
        state["text"] or "",
        seed=call_seed(ctx.seed, state["id"], 0),
        constrained=ctx.constrained,
        arguments=ctx.arguments,
    )
    calls = [call_usage("extract", c) for c in result.completions]
    if result.value is None:
        return {"failure": {"stage": "extract", **result.failure.to_json()}, "calls": calls}  # type: ignore[union-attr]
    found = result.value
    return {
        "object1": found.object1,
        "object2": found.object2,
        "aspect": found.aspect or None,
        "extracted": {**found.model_dump(), "model": ctx.role.spec.name},
        "calls": calls,
    }


async def _arguments(state: CompareState, runtime: Runtime[CompareContext]) -> CompareState:
    ctx = runtime.context
    if ctx.arguments is not None:
        found = ctx.arguments.find(state["object1"], state["object2"], state.get("aspect"))
        return {"arguments": found.to_json()} if found else {"no_arguments": True}
    result = await generate_arguments(
        ctx.client,
        ctx.helper_role,
        state["object1"],
        state["object2"],
        state.get("aspect"),
        max_tokens=ctx.max_tokens,
        seed=call_seed(ctx.seed, state["id"], 1),
        constrained=ctx.constrained,
    )
    calls = [call_usage("arguments", c) for c in result.completions]
    if result.value is None:
        return {"failure": {"stage": "arguments", **result.failure.to_json()}, "calls": calls}  # type: ignore[union-attr]
    source = {"source": "model", "model": ctx.role.spec.name}
    made = Arguments(tuple(result.value.object1), tuple(result.value.object2), source)
    return {"arguments": made.to_json(), "calls": calls}


async def _answer(state: CompareState, runtime: Runtime[CompareContext]) -> CompareState:
    ctx = runtime.context
    given = state.get("arguments")
    numbered = [*given["object1"], *given["object2"]] if given else []
    reply = await compare(
        ctx.client,
        ctx.role,
        ctx.scenario,
        state["object1"],
        state["object2"],
        numbered,
        max_tokens=ctx.max_tokens,
        seed=call_seed(ctx.seed, state["id"], 2),
    )
    return {  # never empty: the model layer retries an empty reply, then fails the call
        "comparison": reply.text.strip(),
        "calls": [call_usage(f"scenario_{ctx.scenario}", reply)],
    }


def run_identity(ctx: CompareSettings) -> dict[str, Any]:
    """What makes two comparing runs the same: model, scenario, sampling, prompts, arguments."""
    identity: dict[str, Any] = {
        "run": "compare",
        "model": ctx.role.spec.name,
        "temperature": ctx.role.temperature,
        "scenario": ctx.scenario,
        "max_tokens": ctx.max_tokens,
        "seed": ctx.seed,
        "constrained": ctx.constrained,
        "prompts": template_digest(*TEMPLATES),
        "arguments_sha256": ctx.arguments.sha256 if ctx.arguments else None,
        "generate_arguments": ctx.generate_arguments,
    }
    if ctx.generate_arguments:
        identity["arguments_per_object"] = ARGUMENTS_PER_OBJECT
    return identity


def generator_name(model: str) -> str:
    """A file-safe generator name from a model spec: ``local/smollm2`` → ``smollm2``."""
    name = _UNSAFE.sub("-", model.rstrip("/").rsplit("/", 1)[-1]).strip("-.")
    return name or "model"


@dataclass(frozen=True)
class CompareRun:
    """Per-question records (question order), the answer records written, and the summary.

    Attributes:
        records: ``answers.jsonl``: every question, with its ``status`` (``ok``,
            ``no_arguments`` or ``error``) and, when its extraction or arguments could not be
            read, ``parse_failure`` (final: the reply is kept, and a rerun does not ask again).
        answers: The answer file's records (answered questions, question order).
        summary: ``summary.json``.
        path: The answer file, or None when no question was answered.
        tallies: What its `run_items` call did.
    """

    records: list[dict[str, Any]]
    answers: list[dict[str, Any]]
    summary: dict[str, Any]
    path: Path | None
    tallies: list[Tally] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        """Questions with this outcome: ``error``, ``no_arguments`` or ``parse_failure``."""
        return _count(self.records, outcome)


async def compare_questions(
    questions: Sequence[CompQuestion],
    out_dir: Path,
    ctx: CompareContext,
    *,
    generator: str | None = None,
    concurrency: int = 8,
    progress: Progress | None = None,
) -> CompareRun:
    """Answer every question not yet answered in `out_dir`; write the answer file and summary.

    Args:
        questions: The questions (ids unique).
        out_dir: Output folder: ``answers.jsonl`` (one record per question),
            ``<generator>_scenario_<N>.json`` (the answered questions) and ``summary.json``.
        ctx: Model, scenario, arguments and budgets.
        generator: The answers' ``generator`` and file name (default: `generator_name`).
        concurrency: Questions in flight.
        progress: The command's progress bar.

    Raises:
        ConfigError: `out_dir` holds a run with other settings.
    """
    generator = generator or generator_name(ctx.role.spec.name)
    # the generator names the answer file: two names would judge the same answers twice
    identity = run_identity(ctx) | {"generator": generator}
    graph = build_compare_graph()

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        start = {k: item[k] for k in ("id", "object1", "object2", "aspect") if item[k] is not None}
        state = await graph.ainvoke(
            {**start, "text": item["question"]}, {"recursion_limit": 10}, context=ctx
        )
        record = {**item, "status": "ok"}
        record |= {k: state[k] for k in ("extracted", "arguments", "comparison") if k in state}
        if "failure" in state:
            record["parse_failure"] = state["failure"]  # final: the reply is kept, not retried
        if state.get("no_arguments"):
            record["status"] = "no_arguments"
        return record | {"ledger": record_usage(state.get("calls", []))}

    items = _items(questions)
    run = await run_claimed(
        items,
        task,
        out_dir,
        identity,
        log="answers.jsonl",
        unit="questions",
        concurrency=concurrency,
        progress=progress,
    )
    records = run.records
    answers = [
        _answer_record(r, generator, ctx)
        for r in records
        if r["status"] == "ok" and "comparison" in r
    ]
    path = Path(out_dir) / f"{generator}_scenario_{ctx.scenario}.json" if answers else None
    if path:
        write_json(path, answers)
    summary = {
        **identity,
        "questions": len(records),
        "answered": len(answers),
        "no_arguments": _count(records, "no_arguments"),
        "parse_failures": _count(records, "parse_failure"),
        **outcome_counts(records),
        "mean_answer_words": mean([len(a["comparison"].split()) for a in answers], digits=2),
        "answers": path.name if path else None,
        # every recorded question's calls (earlier runs too); `ledger` is this run's alone
        "usage": {
            key: sum(r.get("ledger", {}).get(key, 0) for r in records)
            for key in ("calls", "cached", "prompt_tokens", "completion_tokens")
        },
        "ledger": ctx.client.ledger.to_json(),
    }
    write_json(Path(out_dir) / "summary.json", summary)
    return CompareRun(records, answers, summary, path, [run.tally])


def _answer_record(record: dict[str, Any], generator: str, ctx: CompareSettings) -> dict[str, Any]:
    """A log record as an answer-file record (the raw_summaries shape plus provenance)."""
    found = record.get("extracted") or record
    aspect = found["aspect"] or ""
    question = record["question"] or render(
        "compqa/question.j2", object1=found["object1"], object2=found["object2"], aspect=aspect
    )
    answer = {
        "object1": found["object1"],
        "object2": found["object2"],
        "aspect": aspect,
        "comparison": record["comparison"],
        "generator": generator,
        "scenario": ctx.scenario,
        "model": ctx.role.spec.name,
        "question_id": record["question_id"],
        "question": question,
    }
    return answer | {k: record[k] for k in ("arguments", "extracted") if k in record}


def _count(records: list[dict[str, Any]], outcome: str) -> int:
    if outcome == "parse_failure":
        return sum(1 for r in records if "parse_failure" in r)
    return sum(1 for r in records if r["status"] == outcome)


def _items(questions: Sequence[CompQuestion]) -> list[dict[str, Any]]:
    return [
        {
            "id": _item_id(q),
            "question_id": q.id,
            "object1": q.object1,
            "object2": q.object2,
            "aspect": q.aspect,
            "question": q.text,
        }
        for q in questions
    ]


def _item_id(question: CompQuestion) -> str:
    # the content, not only the file's id: an edited question is asked again
    fields = (question.id, question.object1, question.object2, question.aspect, question.text)
    return stable_id("compqa", *fields)


__all__ = [
    "CompareContext",
    "CompareSettings",
    "CompareRun",
    "CompareState",
    "build_compare_graph",
    "compare_questions",
    "generator_name",
    "run_identity",
]
