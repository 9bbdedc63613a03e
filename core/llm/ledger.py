"""Token and cost ledger, per role and stage, written with every run.

Prices come from litellm's bundled cost map, read as a file (no network, no litellm import). Local
and embedded models cost 0; models on custom endpoints whose price is unknown are listed as unpriced
rather than counted as free.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from moot.core.llm.spec import ModelSpec


@dataclass
class Usage:
    """Counters for one (role, stage, model)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    failures: int = 0
    latency_s: float = 0.0

    def add(self, other: Usage) -> None:
        """Add another usage's counters to this one."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class UsageLedger:
    """Accumulates `Usage` per (role, stage, model); cheap enough to update on every call."""

    entries: dict[tuple[str, str, str], Usage] = field(default_factory=dict)
    unpriced: set[str] = field(default_factory=set)

    def record(
        self,
        spec: ModelSpec,
        role: str,
        stage: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cached: bool = False,
        retries: int = 0,
        failed: bool = False,
        latency: float = 0.0,
    ) -> None:
        """Count one call. Cache hits count tokens but cost nothing."""
        usage = self.entries.setdefault((role, stage, spec.name), Usage())
        usage.calls += 1
        usage.cache_hits += int(cached)
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.retries += retries
        usage.failures += int(failed)
        usage.latency_s += latency
        if cached or failed:
            return
        price = price_per_token(spec)
        if price is None:
            self.unpriced.add(spec.name)
        else:
            usage.cost_usd += prompt_tokens * price[0] + completion_tokens * price[1]

    def total(self) -> Usage:
        """All counters summed."""
        total = Usage()
        for usage in self.entries.values():
            total.add(usage)
        return total

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form: a list of rows plus totals."""
        rows = [
            {"role": role, "stage": stage, "model": model, **asdict(usage)}
            for (role, stage, model), usage in sorted(self.entries.items())
        ]
        return {"by_role": rows, "total": asdict(self.total()), "unpriced": sorted(self.unpriced)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UsageLedger:
        """Inverse of `to_json`."""
        ledger = cls(unpriced=set(data.get("unpriced", [])))
        for item in data.get("by_role", []):
            row = dict(item)
            key = (row.pop("role"), row.pop("stage"), row.pop("model"))
            ledger.entries[key] = Usage(**row)
        return ledger

    @classmethod
    def merged(cls, ledgers: Iterable[UsageLedger]) -> UsageLedger:
        """Sum several ledgers (e.g. from shards)."""
        out = cls()
        for ledger in ledgers:
            out.unpriced |= ledger.unpriced
            for key, usage in ledger.entries.items():
                out.entries.setdefault(key, Usage()).add(usage)
        return out


class Metered(Protocol):
    """What a model reply reports about its cost (a `moot.core.llm.models.Completion`)."""

    prompt_tokens: int
    completion_tokens: int
    cached: bool


def call_usage(stage: str, reply: Metered) -> dict[str, Any]:
    """One call's entry in a record's usage trace: its stage, tokens and whether it was cached."""
    return {
        "stage": stage,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "cached": reply.cached,
    }


def record_usage(calls: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A record's `call_usage` entries summed: calls, cached, prompt and completion tokens."""
    return {
        "calls": len(calls),
        "cached": sum(1 for c in calls if c["cached"]),
        "prompt_tokens": sum(c["prompt_tokens"] or 0 for c in calls),
        "completion_tokens": sum(c["completion_tokens"] or 0 for c in calls),
    }


def price_per_token(spec: ModelSpec) -> tuple[float, float] | None:
    """(input, output) USD per token for `spec`, 0 for local models, None if unknown."""
    if spec.transport in ("embedded", "hf"):
        return (0.0, 0.0)
    if spec.api_base:  # a self-hosted or proxied model: its price is the user's business
        return None
    prices = _cost_map()
    entry = prices.get(spec.name) or prices.get(spec.model)
    if not entry or "input_cost_per_token" not in entry:
        return None
    return (float(entry["input_cost_per_token"]), float(entry.get("output_cost_per_token", 0.0)))


@functools.cache
def _cost_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations)))
    try:
        return json.loads((path / "model_prices_and_context_window_backup.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
