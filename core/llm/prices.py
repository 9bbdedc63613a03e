"""What a model call costs: the user's price file over litellm's bundled cost map.

One place prices every call (the ledger, ``--budget``'s reservations, ``--dry-run``'s
estimates). A price is looked up in this order:

1. local models (``local/``, ``hf/``) are free: $0, not unpriced;
2. the user's prices (``--prices FILE`` or ``prices:`` in ``--config``), by spec string;
3. a model on a custom ``api_base`` is unpriced (a self-hosted or proxied model's price is the
   user's business);
4. litellm's cost map, read as a file (no network, no litellm import), by `cost_map_entry`.

Anything else is unpriced: None, shown as "unpriced", never as $0. A call answered through a
provider's batch API (``--batch``) is priced at the model's batch rates (`Price.batched`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from moot.core.errors import InputError
from moot.core.llm.spec import ModelSpec
from moot.core.loader import Unreadable, load_yaml
from moot.core.validation import ConfigModel, problem


class PriceEntry(ConfigModel):
    """A model's entry in a price file: USD per million tokens, each 0 or more and finite.

    Attributes:
        input: A prompt token's price.
        output: A completion token's price.
        cached_input: A cached prompt token's price; None: the input price.
        batch_input: A prompt token's price in a batch; None: half the input price.
        batch_output: A completion token's price in a batch; None: half the output price.
        batch_cached_input: A cached prompt token's price in a batch; None: half the cached
            input price (the batch input price when there is none).
    """

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(None, ge=0, allow_inf_nan=False)
    batch_input: float | None = Field(None, ge=0, allow_inf_nan=False)
    batch_output: float | None = Field(None, ge=0, allow_inf_nan=False)
    batch_cached_input: float | None = Field(None, ge=0, allow_inf_nan=False)


PER_MILLION = 1_000_000

_DATED = re.compile(r"^(?P<stem>.+?)[-@](?P<date>20\d{6}|20\d{2}-\d{2}-\d{2})(?P<tail>-v\d+:\d+)?$")


@dataclass(frozen=True)
class Price:
    """A model's prices in USD per token.

    Attributes:
        input: Per prompt token.
        output: Per completion token.
        cached_input: Per prompt token the provider read from its prompt cache; None: the input
            price (the provider gives no discount, or its price is not known).
        max_output: The most completion tokens the model returns, when known (what ``--budget``
            reserves for a call sent without ``max_tokens``).
        batch_input: Per prompt token in a batch; None: half of `input`.
        batch_output: Per completion token in a batch; None: half of `output`.
        batch_cached_input: Per cached prompt token in a batch; None: half of `cached_input`.
    """

    input: float
    output: float
    cached_input: float | None = None
    max_output: int | None = None
    batch_input: float | None = None
    batch_output: float | None = None
    batch_cached_input: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """USD for one call: cached prompt tokens at the cached rate, the others at full price."""
        cached = min(max(cached_tokens, 0), prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (prompt_tokens - cached) * self.input
            + cached * cached_rate
            + completion_tokens * self.output
        )

    def batched(self) -> Price:
        """The prices of a call answered through the provider's batch API.

        Each rate not given is half the live one: OpenAI and Anthropic bill batches at 50%, and
        litellm's ``batch_cost_calculator`` (``_batch_or_half``) and curator fall back to half.
        """
        cached = self.batch_cached_input
        if cached is None and self.cached_input is not None:
            cached = self.cached_input / 2
        return Price(
            self.input / 2 if self.batch_input is None else self.batch_input,
            self.output / 2 if self.batch_output is None else self.batch_output,
            cached,
            self.max_output,
        )


FREE = Price(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Prices:
    """The price of every model a command calls: the user's prices over litellm's cost map.

    Args:
        own: The user's prices by spec string (``openai/my-vllm-model``), from `load_prices`.

    Example:
        >>> Prices().cost(parse_spec("local/smollm2"), 1000, 200)  # doctest: +SKIP
        0.0
    """

    own: Mapping[str, Price] = field(default_factory=dict)

    def price(self, spec: ModelSpec, batch: bool = False) -> Price | None:
        """`spec`'s price, or None when it is unknown (unpriced).

        Args:
            spec: The model.
            batch: The call is answered through the provider's batch API: its batch rates.
        """
        price = self._live(spec)
        return price.batched() if batch and price is not None else price

    def _live(self, spec: ModelSpec) -> Price | None:
        if spec.transport_class.free:
            return FREE
        own = self.own.get(spec.name)
        if own is not None:
            return own
        if spec.api_base:
            return None
        entry = cost_map_entry(spec.provider, spec.model)
        if entry is None:
            return None
        limit = entry.get("max_output_tokens") or entry.get("max_tokens")
        return Price(
            float(entry["input_cost_per_token"]),
            float(entry.get("output_cost_per_token") or 0.0),
            _rate(entry, "cache_read_input_token_cost"),
            limit if isinstance(limit, int) and limit > 0 else None,
            batch_input=_rate(entry, "input_cost_per_token_batches"),
            batch_output=_rate(entry, "output_cost_per_token_batches"),
            batch_cached_input=_rate(entry, "cache_read_input_token_cost_batches"),
        )

    def cost(
        self,
        spec: ModelSpec,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        batch: bool = False,
    ) -> float | None:
        """USD for a call to `spec` of these token counts; None when `spec` is unpriced.

        The one function to price a call, a real one (the ledger) or an estimate (``--dry-run``).

        Args:
            spec: The model.
            prompt_tokens: Prompt tokens, the cached ones included.
            completion_tokens: Completion tokens.
            cached_tokens: Of the prompt tokens, those the provider read from its prompt cache.
            batch: The call is answered through the provider's batch API: its batch rates.
        """
        price = self.price(spec, batch)
        if price is None:
            return None
        return price.cost(prompt_tokens, completion_tokens, cached_tokens)


def load_prices(source: Path, data: Any = None, *, where: str | None = None) -> Prices:
    """The user's prices from a price file, or from an inline mapping of the same format.

    The format (JSON or YAML): a mapping of model spec strings to their prices in USD per
    million tokens, ``{"openai/my-model": {"input": 0.2, "output": 0.6, "cached_input": 0.1}}``;
    ``input`` and ``output`` are required; ``cached_input`` and the batch rates
    ``batch_input``, ``batch_output``, ``batch_cached_input`` optional.

    Args:
        source: The file (read unless `data` is given), named in every error.
        data: The mapping itself (``prices:`` in ``--config``), instead of reading `source`.
        where: Where in `source` the mapping is (``prices``), for error messages.

    Raises:
        InputError: The file cannot be read, or a model or key is wrong (the message names the
            file, the model and the key).
    """
    if data is None:
        try:
            data = load_yaml(Path(source).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(source, f"cannot read prices: {str(exc).splitlines()[0]}") from None
        except Unreadable as exc:
            raise InputError(source, f"cannot read prices: {exc.problem}", exc.place) from None
    prefix = f"{where}, " if where else ""
    if not isinstance(data, dict) or not data:
        raise InputError(
            source,
            'expected a mapping of model specs to prices per million tokens, e.g. {"openai/'
            'my-model": {"input": 0.2, "output": 0.6}}',
            where,
        )
    own = {}
    for model, entry in data.items():
        record = f"{prefix}{model}"
        if not isinstance(model, str) or "/" not in model.strip("/"):
            raise InputError(source, "expected a model spec, provider/model", f"{prefix}{model!r}")
        if not isinstance(entry, dict):
            raise InputError(source, "expected a mapping with input and output prices", record)
        try:
            given = PriceEntry.model_validate(entry)
        except ValidationError as exc:
            raise InputError(source, problem(exc, PriceEntry), record) from None
        own[model.strip()] = Price(
            given.input / PER_MILLION,
            given.output / PER_MILLION,
            _per_token(given.cached_input),
            batch_input=_per_token(given.batch_input),
            batch_output=_per_token(given.batch_output),
            batch_cached_input=_per_token(given.batch_cached_input),
        )
    return Prices(own)


def _per_token(per_million: float | None) -> float | None:
    return None if per_million is None else per_million / PER_MILLION


def _rate(entry: Mapping[str, Any], key: str) -> float | None:
    """A cost map entry's optional rate per token."""
    value = entry.get(key)
    return None if value is None else float(value)


def cost_map_entry(provider: str, model: str) -> dict[str, Any] | None:
    """The cost map's entry of a chat model, found the way litellm keys its entries.

    The map keys most providers' models as ``provider/model`` (``gemini/gemini-flash-latest``)
    but OpenAI's and Anthropic's bare (``gpt-4o-mini``, ``claude-haiku-4-5``); a bare key counts
    only if its ``litellm_provider`` is the spec's provider (never another provider's price for
    a model of the same name). Aliases resolve to their snapshot's price: ``NAME-latest`` and a
    dated ``NAME-20250929`` (or ``NAME@20250929``) without an entry of their own fall back to
    ``NAME``, and ``NAME-latest`` to the newest dated ``NAME-<date>`` when ``NAME`` has none.
    A model retired from the map (``anthropic/claude-3-5-haiku-latest`` in litellm 1.106) has no
    entry: it is unpriced, and a price file can price it.
    """
    for name in _aliases(model):
        entry = _entry(provider, name)
        if entry is not None:
            return entry
    if model.endswith("-latest"):
        stem = model.removesuffix("-latest")
        dated = sorted(
            (match["date"], key)
            for key in _cost_map()
            if (match := _DATED.match(key.removeprefix(f"{provider}/")))
            and match["stem"] == stem
            and not match["tail"]
            and _entry(provider, key.removeprefix(f"{provider}/")) is not None
        )
        if dated:
            return _entry(provider, dated[-1][1].removeprefix(f"{provider}/"))
    return None


def _aliases(model: str) -> list[str]:
    """`model`, then the undated name its alias or snapshot stands for."""
    names = [model]
    if model.endswith("-latest"):
        names.append(model.removesuffix("-latest"))
    match = _DATED.match(model)
    if match and not match["tail"]:
        names.append(match["stem"])
    return names


def _entry(provider: str, model: str) -> dict[str, Any] | None:
    prices = _cost_map()
    entry = prices.get(f"{provider}/{model}")
    if entry is None:
        bare = prices.get(model)
        own = bare.get("litellm_provider", "") if isinstance(bare, dict) else ""
        # vertex_ai's entries say vertex_ai-language-models, vertex_ai-anthropic_models ...
        entry = bare if own == provider or own.startswith(f"{provider}-") else None
    if not isinstance(entry, dict) or entry.get("input_cost_per_token") is None:
        return None
    if entry.get("mode", "chat") not in ("chat", "completion", "responses"):
        return None  # an embedding or image model's price is not a chat call's
    return entry


@functools.cache
def _cost_map() -> dict[str, Any]:
    found = importlib.util.find_spec("litellm")
    if found is None or not found.submodule_search_locations:
        return {}
    path = Path(next(iter(found.submodule_search_locations)))
    try:
        data = json.loads((path / "model_prices_and_context_window_backup.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
