"""Token and cost ledger, per role and stage, written with every run.

Prices come from `moot.core.llm.prices` (the user's price file over litellm's cost map). Local and
embedded models cost 0; a paid call to a model whose price is unknown makes its cost, and the
total's, None ("unpriced", ``null`` in JSON), and names the model in ``unpriced``: never counted
as free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec


@dataclass
class Usage:
    """Counters for one (role, stage, model).

    Attributes:
        cached_prompt_tokens: Of the prompt tokens, those the provider read from its prompt
            cache (``usage.prompt_tokens_details.cached_tokens``), priced at its cached rate.
        cost_usd: USD paid; None once a paid call's price is unknown (unpriced).
        endpoints: For a model with several endpoints, the calls each answered, by URL
            (without credentials); empty otherwise.
        counted_replies: Replies whose tokens moot counted with its tokenizer: their server
            reported no usage, or usage that cannot be true (`moot.core.llm.billing`).
        longer_replies: Replies longer than the ``max_tokens`` asked (a server that ignores it).
        batch_calls: Calls answered through a provider's batch API, priced at its batch rates.
    """

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    retries: int = 0
    failures: int = 0
    latency_s: float = 0.0
    cached_prompt_tokens: int = 0
    endpoints: dict[str, int] = field(default_factory=dict)
    counted_replies: int = 0
    longer_replies: int = 0
    batch_calls: int = 0

    def add(self, other: Usage) -> None:
        """Add another usage's counters to this one (an unpriced cost stays unpriced)."""
        for name, value in asdict(other).items():
            mine = getattr(self, name)
            if name == "endpoints":
                for url, calls in value.items():
                    mine[url] = mine.get(url, 0) + calls
                continue
            setattr(self, name, None if mine is None or value is None else mine + value)

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form.

        ``endpoints`` only when several endpoints answered, ``batch_calls`` only when some call
        was batched (a ledger without batches is written as earlier versions wrote it).
        """
        data = asdict(self)
        if not self.endpoints:
            del data["endpoints"]
        if not self.batch_calls:
            del data["batch_calls"]
        return data


@dataclass
class UsageLedger:
    """Accumulates `Usage` per (role, stage, model); cheap enough to update on every call."""

    entries: dict[tuple[str, str, str], Usage] = field(default_factory=dict)
    unpriced: set[str] = field(default_factory=set)
    prices: Prices = field(default_factory=Prices, compare=False, repr=False)

    def record(
        self,
        spec: ModelSpec,
        role: str,
        stage: str,
        *,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cached_prompt_tokens: int = 0,
        cached: bool = False,
        retries: int = 0,
        failed: bool = False,
        latency: float = 0.0,
        endpoint: str | None = None,
        counted: int = 0,
        longer: int = 0,
        batch: bool = False,
    ) -> None:
        """Count one call; cache hits count tokens but cost nothing.

        A failed call costs the tokens its replies were paid for (an empty reply is paid for,
        then retried). `endpoint` is the one of several that answered it, if any; `counted` and
        `longer` are how many of its replies moot counted, and were longer than asked; `batch`:
        it was answered through the provider's batch API, at its batch rates.
        """
        usage = self.entries.setdefault((role, stage, spec.name), Usage())
        usage.calls += 1
        usage.cache_hits += int(cached)
        usage.prompt_tokens += prompt_tokens
        usage.completion_tokens += completion_tokens
        usage.cached_prompt_tokens += cached_prompt_tokens
        usage.retries += retries
        usage.failures += int(failed)
        usage.latency_s += latency
        usage.counted_replies += counted
        usage.longer_replies += longer
        usage.batch_calls += int(batch)
        if endpoint is not None:
            usage.endpoints[endpoint] = usage.endpoints.get(endpoint, 0) + 1
        if cached or (failed and not prompt_tokens + completion_tokens):
            return
        cost = self.prices.cost(spec, prompt_tokens, completion_tokens, cached_prompt_tokens, batch)
        if cost is None:
            self.unpriced.add(spec.name)
            usage.cost_usd = None
        elif usage.cost_usd is not None:
            usage.cost_usd += cost

    def spent(self) -> float | None:
        """USD paid so far, None if any paid call was unpriced."""
        return self.total().cost_usd

    def total(self) -> Usage:
        """All counters summed."""
        total = Usage()
        for usage in self.entries.values():
            total.add(usage)
        return total

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form: a list of rows plus totals."""
        rows = [
            {"role": role, "stage": stage, "model": model, **usage.to_json()}
            for (role, stage, model), usage in sorted(self.entries.items())
        ]
        total = self.total().to_json()
        return {"by_role": rows, "total": total, "unpriced": sorted(self.unpriced)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UsageLedger:
        """Inverse of `to_json`; reads ledgers of earlier versions too (fields they lack are 0)."""
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
