"""`moot generate`: answer the DEBATunE test instructions with any model, in the paper's format.

Each topic with given arguments yields one instruction per side and argument (the paper's
inference instruction, ordered topic → side → argument: 480 for the 80 test topics). Answers go
through the run engine, appended to a progress log beside the output as they finish, so a rerun
asks only what is missing; the output file (a JSON list of ``{topic, side, argument, instruction,
raw_output, response}``, the shape the judges read) is written atomically once every answer is in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.records import (
    ResultLog,
    check_out_file,
    progress_log,
    stable_id,
    write_json,
)
from moot.core.data.topics import STANCES, Topic
from moot.core.errors import InputError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import Progress, Tally, run_items
from moot.prompts import overridden, template_digest
from moot.training.debatune_data import instruction


def debate_test_instructions(topics: Sequence[Topic], source: str) -> list[dict[str, str]]:
    """The instructions to answer, in the paper's order.

    Raises:
        InputError: A topic has no given arguments, or an argument is listed twice for a topic and
            side (the judges identify an answer by topic, side and argument).
    """
    items = []
    seen: set[tuple[str, str, str]] = set()
    for index, topic in enumerate(topics):
        if not topic.arguments:
            raise InputError(
                source,
                "needs topics with arguments per side (the debate_test_v1_arg.jsonl shape)",
                f"topic {index}",
            )
        for stance in STANCES:
            for argument in topic.arguments[stance]:
                side = stance.lower()
                if (topic.topic, side, argument) in seen:
                    raise InputError(
                        source, f"argument {argument!r} listed twice for {side}", f"topic {index}"
                    )
                seen.add((topic.topic, side, argument))
                items.append(
                    {
                        "topic": topic.topic,
                        "side": side,
                        "argument": argument,
                        "instruction": instruction(topic.topic, stance, argument),
                    }
                )
    return items


@dataclass(frozen=True)
class GenerateResult:
    """What `answer_instructions` did.

    Attributes:
        records: One record per item, in item order (``status`` ``ok`` with ``raw_output`` and
            ``response``, or ``error`` with ``error``).
        tallies: What the run's `run_items` call did.
    """

    records: list[dict[str, Any]]
    tallies: list[Tally]

    @property
    def failed(self) -> int:
        """Items without an answer."""
        return sum(1 for r in self.records if r["status"] != "ok")


async def answer_instructions(
    items: list[dict[str, str]],
    out: Path,
    role: Role,
    client: ModelClient,
    *,
    concurrency: int = 8,
    max_tokens: int | None = 2048,
    max_length: int | None = None,
    seed: int = 0,
    template: str | None = None,
    progress: Progress | None = None,
) -> GenerateResult:
    """Answer every item (``instruction`` and what to copy into the output) into `out`.

    Answers go through the run engine, logged in ``.<out name>.progress.jsonl`` beside `out`;
    the output file is written only when nothing failed.

    Args:
        items: From `debate_test_instructions`.
        out: The output JSON file.
        role: The model answering.
        client: The model layer.
        concurrency: Requests in flight at once.
        max_tokens: Completion budget per answer (new tokens).
        max_length: Instead of `max_tokens`, the budget with the prompt's tokens counted, as the
            reference's ``generate(max_length=2048)`` (local models only).
        seed: Sampling seed of every request.
        template: The chat template's name under ``prompts/``, for the ids: given, a template
            whose text changes makes new ids (answers in another format are not reused).
        progress: The command's progress bar.

    Raises:
        ConfigError: `out` cannot be written (checked before any model call).
    """
    out = Path(out)
    check_out_file(out)
    items = _identified(items, role, max_tokens, max_length, seed, template)

    async def answer(item: dict[str, Any]) -> dict[str, Any]:
        reply = await client.complete(
            role,
            _messages(item),
            stage="generate",
            max_tokens=max_tokens,
            max_length=max_length,
            seed=seed,
        )
        return {**item, "status": "ok", "raw_output": reply.text, "response": reply.text.strip()}

    result = await run_items(
        items,
        answer,
        ResultLog(progress_log(out)),
        unit="instructions",
        concurrency=concurrency,
        progress=progress,
    )
    by_id = {record["id"]: record for record in result.records}
    done = GenerateResult([by_id[item["id"]] for item in items], [result.tally])
    if not done.failed:
        write_json(out, [_output(record) for record in done.records])
    return done


def _identified(
    items: list[dict[str, str]],
    role: Role,
    max_tokens: int | None,
    max_length: int | None,
    seed: int,
    template: str | None,
) -> list[dict[str, Any]]:
    """The items with their stable ids (model, sampling, budget, template, instruction)."""
    identity: dict[str, Any] = {
        "model": role.spec.name,
        "temperature": role.temperature,
        "max_tokens": max_tokens,
        "seed": seed,
    }
    if max_length is not None:  # only then, so earlier runs' ids stay as they were
        identity["max_length"] = max_length
    if template is not None:  # likewise
        identity["template"] = template_digest(template)
    if overrides := overridden():  # `--prompts` (a chat template's): likewise
        identity["prompt_overrides"] = overrides
    return [{**item, "id": stable_id("generate", identity, item["instruction"])} for item in items]


def _output(record: dict[str, Any]) -> dict[str, str]:
    """An answer as the output file holds it (the shape the judges read)."""
    keys = ("topic", "side", "argument", "instruction", "raw_output")
    return {**{k: record[k] for k in keys}, "response": record["raw_output"].strip()}


def _messages(item: dict[str, Any]) -> list[dict[str, str]]:
    return [{"role": "user", "content": item["instruction"]}]
