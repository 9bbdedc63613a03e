"""What a run would do, as data: its items and the model calls they would make (``--dry-run``).

A `Plan` is what a model-calling command answers instead of running: per stage, how many items
it was asked for, how many an earlier run in its ``--out`` finished (a rerun skips them, by the
run engine's own `finished` rule: `moot.core.runs.pending_items`) and how many are left; per
role, stage and model, the calls those items would make and their estimated tokens and cost.
Estimates are upper bounds where the basis allows it (a call's completion is at most its
``max_tokens``); each command states its basis in docs/cli.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moot.core.data.records import ResultLog
from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec
from moot.core.runs import Record, is_ok, pending_items

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True)
class PlanItems:
    """One stage's items.

    Attributes:
        unit: What an item is, plural (``debates``).
        planned: Items the run is asked for.
        done: Of those, items an earlier run finished (a rerun skips them).
    """

    unit: str
    planned: int
    done: int = 0

    @property
    def to_run(self) -> int:
        """Items a run would work on."""
        return self.planned - self.done


@dataclass(frozen=True)
class PlanRow:
    """The calls of one role, stage and model, and their estimated tokens (totals).

    Attributes:
        role: The ledger's role name (``debater_a``).
        stage: The ledger's stage (``opening``).
        spec: The model.
        calls: Model calls.
        input_tokens: Estimated prompt tokens of all of them.
        output_tokens: Estimated completion tokens of all of them (their ``max_tokens``: at most).
    """

    role: str
    stage: str
    spec: ModelSpec
    calls: int
    input_tokens: int
    output_tokens: int


@dataclass
class Plan:
    """What a command would do: its items per stage and its model calls.

    Attributes:
        items: Each stage's items, in run order.
        rows: The calls per role, stage and model.
        keys: What each model needs to be called: ``(model, what)`` (``OPENAI_API_KEY (set)``).
        notes: What the estimate cannot know (lists not yet proposed, ...).
        prices: What the calls cost (the command's ``--prices`` over litellm's cost map).
        calls_at_most: The calls are an upper bound, not a count (ReAct's steps: an agent may
            answer before its last search); `notes` say which.
        outputs: The records of each file the run would write that a later command reads, by
            path (what is done as its log holds it, the rest with `stand_in` replies):
            `moot run --dry-run` plans the later stages of a recipe from them
            (`moot.core.data.planned`).
    """

    items: list[PlanItems] = field(default_factory=list)
    rows: list[PlanRow] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    prices: Prices = field(default_factory=Prices)
    calls_at_most: bool = False
    outputs: dict[Path, list[Any]] = field(default_factory=dict)

    def add_calls(
        self,
        role: str,
        stage: str,
        spec: ModelSpec,
        calls: int,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        """Count `calls` more calls of (`role`, `stage`, `spec`) with these token totals."""
        if calls <= 0:
            return
        for i, row in enumerate(self.rows):
            if (row.role, row.stage, row.spec) == (role, stage, spec):
                self.rows[i] = PlanRow(
                    role,
                    stage,
                    spec,
                    row.calls + calls,
                    row.input_tokens + input_tokens,
                    row.output_tokens + output_tokens,
                )
                return
        self.rows.append(PlanRow(role, stage, spec, calls, input_tokens, output_tokens))

    @property
    def calls(self) -> int:
        """All model calls of the plan."""
        return sum(row.calls for row in self.rows)

    @property
    def unpriced(self) -> list[str]:
        """The models whose price is unknown, each once."""
        return list(dict.fromkeys(r.spec.name for r in self.rows if self.row_cost(r) is None))

    def row_cost(self, row: PlanRow) -> float | None:
        """A row's estimated cost, or None when its model's price is unknown ("unpriced")."""
        return self.prices.cost(row.spec, row.input_tokens, row.output_tokens)

    def cost_usd(self) -> float:
        """The estimated cost of the priced calls (see `unpriced` for the others)."""
        return sum(self.row_cost(row) or 0.0 for row in self.rows)


def items_of(
    unit: str,
    items: Sequence[Record],
    log: Path,
    finished: Callable[[Record], bool] = is_ok,
) -> tuple[PlanItems, list[Record]]:
    """A stage's items as the run engine would see them, and those a run would work on.

    Args:
        unit: What an item is, plural.
        items: The work, as the command would hand it to `moot.core.runs.run_items`.
        log: The stage's JSONL log in ``--out`` (read, never written; it may not exist).
        finished: The stage's `finished` rule, as the command passes it to `run_items`.
    """
    unique, pending = pending_items(items, ResultLog(log).load(), finished)
    return PlanItems(unit, len(unique), len(unique) - len(pending)), pending


@dataclass(frozen=True)
class StandIn:
    """What a dry run takes a call's reply to be (`moot.core.llm.planning`).

    Attributes:
        reply: The reply at a budget of so many tokens, in a shape the caller's parser reads
            (default `stand_in`: words, for a caller that reads text).
        note: What the estimate cannot know because of it, said once in the plan;
            ``{calls}`` is replaced by the number of calls it stood in for.
        at_most: The calls after it are an upper bound, not a count (`Plan.calls_at_most`).
    """

    reply: Callable[[int], str] = field(default=lambda tokens: stand_in(tokens))
    note: str | None = None
    at_most: bool = False


def stand_in(tokens: int) -> str:
    """A reply not yet written, at its full budget: `tokens` tokens of text (at least one).

    ``word`` repeated, one ``cl100k_base`` token each (as `moot.core.llm.tokens` counts), so a
    later call that holds the reply is counted at the reply's most.
    """
    return " ".join(["word"] * max(1, tokens))


def schema_stand_in(schema: dict[str, Any], words: int = 8) -> Any:
    """A JSON value a JSON `schema` (pydantic's ``model_json_schema``) accepts, for dry runs.

    The least value each constraint allows (numbers at their minimum, lists at their shortest
    non-empty length, an enum's first value), strings `words` words long within their
    ``maxLength``. A schema with cross-field rules (two names that must differ) needs its
    caller's own `StandIn`: the planning client refuses a stand-in its parser refuses.
    """
    defs = schema.get("$defs", {})

    def value(node: dict[str, Any]) -> Any:
        if "$ref" in node:
            return value(defs[node["$ref"].rsplit("/", 1)[-1]])
        for key in ("const", "default"):
            if key in node:
                return node[key]
        if "enum" in node:
            return node["enum"][0]
        if "anyOf" in node or "oneOf" in node:
            return value((node.get("anyOf") or node["oneOf"])[0])
        kind = node.get("type", "object")
        if kind == "object":
            return {name: value(sub) for name, sub in node.get("properties", {}).items()}
        if kind == "array":
            return [value(node.get("items", {})) for _ in range(max(1, node.get("minItems", 1)))]
        if kind in ("integer", "number"):
            low = node.get("minimum", node.get("exclusiveMinimum", 0) + 1)
            return int(low) if kind == "integer" else low
        if kind == "boolean":
            return True
        text = stand_in(words)
        return text[: node["maxLength"]] if "maxLength" in node else text

    return value(schema)


def json_stand_in(schema: type[BaseModel]) -> StandIn:
    """The `StandIn` of a reply that is a JSON value of pydantic `schema` (`schema_stand_in`)."""
    text = json.dumps(schema_stand_in(schema.model_json_schema()))
    return StandIn(lambda _: text)
