"""`moot generate`: answer the DEBATunE test instructions with any model, in the paper's format.

Each topic with given arguments yields one instruction per side and argument (the paper's
inference instruction, ordered topic → side → argument: 480 for the 80 test topics). Answers are
appended to a progress ledger beside the output as they finish, so a rerun asks only what is
missing; the output file (a JSON list of ``{topic, side, argument, instruction, raw_output,
response}``, the shape the judges read) is written atomically once every answer is in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.core.data.records import ResultLog, check_out_file, stable_id, write_json
from moot.core.data.topics import STANCES, Topic
from moot.core.errors import InputError, ModelCallError
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
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


async def generate_responses(
    items: list[dict[str, str]],
    out: Path,
    role: Role,
    client: ModelClient,
    *,
    concurrency: int = 8,
    max_tokens: int = 2048,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Answer every item; return (records in item order, number of failed items).

    The output file is written only when nothing failed.

    Raises:
        ConfigError: `out` cannot be written (checked before any model call).
    """
    out = Path(out)
    check_out_file(out)
    progress = ResultLog(out.with_name(f".{out.name}.progress.jsonl"))
    identity = {
        "model": role.spec.name,
        "temperature": role.temperature,
        "max_tokens": max_tokens,
        "seed": seed,
    }
    for item in items:
        item["id"] = stable_id("generate", identity, item["instruction"])
    done = {k: r for k, r in progress.load().items() if r.get("status") == "ok"}
    limit = asyncio.Semaphore(max(1, concurrency))

    async def answer(item: dict[str, Any]) -> None:
        messages = [{"role": "user", "content": item["instruction"]}]
        try:
            async with limit:
                reply = await client.complete(
                    role, messages, stage="generate", max_tokens=max_tokens, seed=seed
                )
            record = {
                **item,
                "status": "ok",
                "raw_output": reply.text,
                "response": reply.text.strip(),
            }
        except ModelCallError as exc:
            record = {**item, "status": "error", "error": str(exc)}
        await asyncio.to_thread(progress.append, record)

    await asyncio.gather(*(answer(item) for item in items if item["id"] not in done))
    records = progress.load()
    ordered = [records[item["id"]] for item in items]
    failed = sum(1 for r in ordered if r["status"] != "ok")
    if not failed:
        keys = ("topic", "side", "argument", "instruction", "raw_output", "response")
        write_json(out, [{k: r[k] for k in keys} for r in ordered])
    return ordered, failed
