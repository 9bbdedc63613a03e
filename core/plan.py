"""What a run would do, as data: its items and the model calls they would make (``--dry-run``).

A `Plan` is what a model-calling command's dry run answers: per stage, how many items it was
asked for, how many an earlier run in its ``--out`` finished (a rerun skips them, by the run
engine's own `finished` rule: `moot.core.runs.pending_items`) and how many are left; per role,
stage and model, the calls those items would make and their estimated tokens and cost. A dry
run is the command's own run against `moot.core.llm.planning.PlanningClient` (`Plan.of_run`).
Estimates are upper bounds where the basis allows it (a call's completion is at most its
``max_tokens``); each command states its basis in docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec

if TYPE_CHECKING:
    from moot.core.llm.planning import PlanningClient
    from moot.core.runs import Tally


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
        outputs: The records of each JSON or JSONL file the dry run wrote in its scratch copy,
            by the real path (what earlier runs did as they did it, the rest with stand-in
            replies): `moot run --dry-run` plans the later stages of a recipe from them
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

    def row_cost(self, row: PlanRow, batch: bool = False) -> float | None:
        """A row's estimated cost, or None when its model's price is unknown ("unpriced").

        `batch`: its calls sent through the provider's batch API (``--batch``), at batch rates.
        """
        return self.prices.cost(row.spec, row.input_tokens, row.output_tokens, batch=batch)

    @classmethod
    def of_run(cls, client: PlanningClient, tallies: Sequence[Tally] = ()) -> Plan:
        """The plan a dry run made (`moot.core.llm.planning`): its items and its calls.

        Args:
            client: The run's planning client: its ledger holds the calls, its notes what the
                estimate cannot know.
            tallies: The run's tallies: what it was asked for, what an earlier run finished.
        """
        plan = cls(
            prices=client.ledger.prices, calls_at_most=client.at_most, keys=list(client.keys)
        )
        plan.items = [PlanItems(t.unit, t.planned, t.skipped) for t in tallies]
        for (role, stage, model), usage in client.ledger.entries.items():
            tokens = (usage.prompt_tokens, usage.completion_tokens)
            plan.add_calls(role, stage, client.specs[model], usage.calls, *tokens)
        plan.notes = [note.format(calls=calls) for note, calls in client.notes.items()]
        return plan

    def limited_minutes(self) -> dict[str, float]:
        """Minutes each model with ``--rpm``/``--tpm`` needs for its calls at those limits.

        Its calls over its requests per minute, or its tokens (input and at most output: what
        the limits charge) over its tokens per minute, whichever is longer.
        """
        found: dict[str, float] = {}
        for name in dict.fromkeys(row.spec.name for row in self.rows):
            rows = [row for row in self.rows if row.spec.name == name]
            spec = rows[0].spec
            calls = sum(row.calls for row in rows)
            tokens = sum(row.input_tokens + row.output_tokens for row in rows)
            needs = [calls / spec.rpm if spec.rpm else 0.0, tokens / spec.tpm if spec.tpm else 0.0]
            if spec.rpm or spec.tpm:
                found[name] = max(needs)
        return found

    def cost_usd(self, batch: bool = False) -> float:
        """The estimated cost of the priced calls (see `unpriced` for the others).

        `batch`: all of them sent through the providers' batch APIs (``--batch``), at batch rates.
        """
        return sum(self.row_cost(row, batch) or 0.0 for row in self.rows)
