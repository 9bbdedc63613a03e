"""A protocol run: every input record through the protocol's state machine, resumable.

The items go through the run engine (`moot.core.runs.run_claimed`): each finished one is appended
to ``transcripts.jsonl`` under a stable id (the protocol's digest, the agents' models, the seed,
the record's inputs). A rerun skips finished items, retries failed ones, resumes interrupted ones
from their checkpoint (``.moot/checkpoints.sqlite``) and pays for no call twice (the request
cache). ``summary.json`` and, with ``outputs.sft``, ``sft.jsonl`` are rebuilt atomically at the end.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.agents.protocol_spec import Protocol
from moot.core.data.records import stable_id, write_json, write_jsonl
from moot.core.errors import InputError
from moot.core.hub.cards import Card, write_card
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import STOPPED, Progress, Record, RunOutput, run_claimed

#: An item's status once it ran: ``ok``; ``incomplete`` (a structured reply that could not be
#: read ended it: asking again would read the same cached reply); ``error`` (a call failed for
#: good: the rerun retries it).
FINISHED = ("ok", "incomplete")


def read_inputs(protocol: Protocol, path: Path) -> list[dict[str, Any]]:
    """The input records' fields the protocol takes, each record checked.

    Raises:
        InputError: Unreadable, a record that is not an object or lacks an input field (naming
            the file and the record).
    """
    from moot.core.data.records import read_records

    records = []
    for place, record in read_records(path):
        if not isinstance(record, dict):
            raise InputError(path, "expected a JSON object", place)
        missing = [name for name in protocol.inputs if name not in record]
        if missing:
            wanted = ", ".join(protocol.inputs)
            raise InputError(path, f"no field {missing[0]!r} (the protocol takes {wanted})", place)
        records.append({name: record[name] for name in protocol.inputs})
    if not records:
        raise InputError(path, "no records")
    return records


def identity(protocol: Protocol, roles: dict[str, Role], seed: int) -> dict[str, Any]:
    """What makes two runs' items the same items (endpoints excluded)."""
    return {
        "protocol": protocol.name,
        "digest": protocol.digest(),
        "agents": {
            name: {"model": role.spec.name, "temperature": role.temperature}
            for name, role in roles.items()
        },
        "seed": seed,
    }


@dataclass(frozen=True)
class ProtocolResult(RunOutput):
    """The items' records (input order), the run's summary, and what its run did."""


async def run_protocol(
    protocol: Protocol,
    inputs: Sequence[dict[str, Any]],
    out_dir: Path,
    roles: dict[str, Role],
    client: ModelClient,
    *,
    seed: int = 0,
    concurrency: int = 8,
    progress: Progress | None = None,
) -> ProtocolResult:
    """Run (or resume) `protocol` on every input record into `out_dir`.

    Args:
        protocol: The protocol, checked (`moot.agents.protocol_spec.load_protocol`).
        inputs: The records' input fields (`read_inputs`).
        out_dir: The output folder (see docs/schemas.md).
        roles: Each agent's role.
        client: The model layer.
        seed: Base sampling seed.
        concurrency: Items in flight at once.
        progress: The command's progress bar.

    Raises:
        ConfigError: `out_dir` holds a run of another protocol or other settings.
    """
    from moot.graphs.checkpoints import durability_for, open_checkpoints, run_thread
    from moot.graphs.protocol_debate import (
        ProtocolContext,
        build_protocol_graph,
        recursion_limit,
        start,
    )

    out_dir = Path(out_dir)
    claim = identity(protocol, roles, seed)
    items = [{"id": stable_id("protocol", record, claim), "inputs": record} for record in inputs]
    context = ProtocolContext(protocol, roles, client, seed)
    async with open_checkpoints(out_dir) as saver:
        graph, durability = build_protocol_graph(saver), durability_for(client)

        async def task(item: Record) -> Record:
            state, error = await run_thread(
                graph,
                item["id"],
                start(protocol, item["id"], item["inputs"]),
                context=context,
                steps=recursion_limit(protocol),
                durability=durability,
                done=functools.partial(finished_state, protocol),
            )
            return _record(item, state, roles, error)

        result = await run_claimed(
            items,
            task,
            out_dir,
            claim,
            log="transcripts.jsonl",
            unit="items",
            concurrency=concurrency,
            progress=progress,
            finished=lambda record: record["status"] in FINISHED,
        )
    records = [r for r in result.records if r["status"] != STOPPED]
    summary = summarize(protocol, records) | {"stopped": result.tally.stopped}
    write_json(out_dir / "summary.json", {**claim, **summary, "ledger": client.ledger.to_json()})
    if protocol.outputs.sft is not None:
        rows = sft_records(protocol, records)
        write_jsonl(out_dir / "sft.jsonl", rows)
        write_card(out_dir, card(protocol, roles, summary, len(rows), client))
    return ProtocolResult(result.records, summary, [result.tally])


def finished_state(protocol: Protocol, state: dict[str, Any]) -> bool:
    """Whether an item's saved state is at its end: failed, final, or ended with no final step."""
    ended = state.get("ended") and protocol.final is None
    return bool(state.get("failure") or state.get("final") or ended)


def _record(
    item: Record, state: dict[str, Any], roles: dict[str, Role], error: Exception | None
) -> Record:
    """An item's record in ``transcripts.jsonl`` (docs/schemas.md)."""
    failure = state.get("failure")
    status = "error" if error else "incomplete" if failure else "ok"
    return {
        "id": item["id"],
        "inputs": item["inputs"],
        "status": status,
        "error": str(error) if error else None,
        "turns": state.get("turns", []),
        "summaries": state.get("summaries", []),
        "checks": state.get("checks", []),
        "ended": state.get("ended"),
        "final": state.get("final"),
        "failure": failure,
        "models": {name: role.spec.name for name, role in roles.items()},
    }


def summarize(protocol: Protocol, records: Sequence[Record]) -> dict[str, Any]:
    """What the run made: counts, rounds, how items ended, and accuracy against ``gold``."""
    ran = [r for r in records if r["status"] != "error"]
    ended: dict[str, int] = {}
    for record in ran:
        if record["ended"]:
            ended[record["ended"]["by"]] = ended.get(record["ended"]["by"], 0) + 1
    summary: dict[str, Any] = {
        "items": len(records),
        "ok": sum(r["status"] == "ok" for r in records),
        "incomplete": sum(r["status"] == "incomplete" for r in records),
        "errors": len(records) - len(ran),
        "ended_by": ended,
        "mean_rounds": _mean([_rounds(r) for r in ran]),
    }
    if protocol.final and protocol.final.vote:
        summary["no_answer"] = sum(
            1 for r in ran if r["final"] is not None and r["final"]["answer"] is None
        )
    if protocol.gold is not None:
        summary["accuracy"] = accuracy(protocol, ran)
    return summary


def accuracy(protocol: Protocol, records: Sequence[Record]) -> dict[str, Any]:
    """Accuracy against the gold answers: the final vote, each round's vote, a single agent.

    A round's vote is the majority of that round's answers (`moot.graphs.protocol_debate.vote`);
    an item that ended before a round counts its last vote there (its answer stands). "Single
    agent" is each agent's first-round answer, before it read any other: the baseline Du et al.
    (2023) compare debate against. An item with no answer counts as wrong.
    """
    from moot.graphs.protocol_debate import vote

    assert protocol.gold is not None and protocol.final and protocol.final.vote
    name, gold = protocol.final.vote, protocol.gold
    scored = [r for r in records if r["final"] is not None]
    per_round: list[float | None] = []
    for round_ in range(protocol.rounds):
        hits = [
            same(
                vote([t for t in r["turns"] if t["round"] <= round_], name)["answer"],
                r["inputs"][gold],
            )
            for r in scored
        ]
        per_round.append(_mean(hits))
    singles = [
        same(t["answers"][name], r["inputs"][gold])
        for r in scored
        for t in r["turns"]
        if t["round"] == 0
    ]
    finals = [same(r["final"]["answer"], r["inputs"][gold]) for r in scored]
    return {
        "items": len(scored),
        "final": _mean(finals),
        "per_round": per_round,
        "single_agent": _mean(singles),
    }


def same(answer: str | None, gold: Any) -> bool:
    """An extracted answer is the gold one: as numbers when both are, else as trimmed text."""
    if answer is None:
        return False
    number, expected = _number(answer), _number(gold)
    if number is not None and expected is not None:
        return number == expected
    return answer.strip().casefold() == str(gold).strip().casefold()


def _number(value: Any) -> float | None:
    try:
        return float(str(value).replace(",", "").replace("$", "").strip())
    except ValueError:
        return None


def _rounds(record: Record) -> int:
    return len({turn["round"] for turn in record["turns"]})


def _mean(values: Sequence[float | bool]) -> float | None:
    return sum(values) / len(values) if values else None


def card(
    protocol: Protocol,
    roles: dict[str, Role],
    summary: dict[str, Any],
    records: int,
    client: ModelClient,
) -> Card:
    """The card of a protocol run's SFT dataset (`moot.core.hub.cards`)."""
    what = protocol.description or f"the `{protocol.name}` protocol"
    return Card(
        kind="dataset",
        title=f"{protocol.name}: debate data",
        summary=(
            f"Chat SFT records made by debate: {what}, run by `moot protocol` "
            f"({len(protocol.agents)} agents, at most {protocol.rounds} round(s), "
            f"{protocol.turns.plan.replace('_', ' ')} turns), one record per item that ended "
            "ok, through the protocol's `outputs.sft` mapping. The protocol is the user's: its "
            "prompts are its own templates, not a paper's."
        ),
        schema="Output folder of `moot protocol`",
        sizes=[
            ("records", records),
            (
                "items ok / incomplete / failed",
                f"{summary['ok']} / {summary['incomplete']} / {summary['errors']}",
            ),
        ],
        notes=[
            (
                "Protocol",
                f"`{protocol.name}` (digest `{protocol.digest()}`); its templates, beside its "
                "file: " + ", ".join(f"`{path}` ({key})" for key, path in protocol.templates()),
            )
        ],
        models=list(dict.fromkeys(role.spec.name for role in roles.values())),
        ledger=client.ledger.to_json(),
        tags=["debate", "protocol", "synthetic", "sft"],
        data_files={"train": "sft.jsonl"},
    )


def sft_records(protocol: Protocol, records: Sequence[Record]) -> list[dict[str, Any]]:
    """One chat SFT record per item that ended ``ok`` with a final answer (``outputs.sft``).

    An item whose vote found no answer makes no record (the summary counts it ``no_answer``).
    """
    sft = protocol.outputs.sft
    assert sft is not None
    turns = [("user", sft.instruction), ("assistant", sft.response)]
    if sft.system:
        turns.insert(0, ("system", sft.system))
    rows = []
    for record in records:
        final = final_text(record["final"])
        if record["status"] != "ok" or (protocol.final and final is None):
            continue
        given = {**record["inputs"], "final": final}
        chat = [
            {"role": who, "content": protocol.render_text(text, **given)} for who, text in turns
        ]
        rows.append({"id": record["id"], "messages": chat})
    return rows


def final_text(final: dict[str, Any] | None) -> str | None:
    """A final step's result as text: the vote's answer, the conclusion, the verdict as JSON."""
    if final is None:
        return None
    if "verdict" in final:
        return json.dumps(final["verdict"], ensure_ascii=False)
    return final.get("text", final.get("answer"))
