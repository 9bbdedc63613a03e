"""Prices: litellm's cost map entries found as litellm keys them, and the user's price file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from moot.core.errors import InputError
from moot.core.llm.prices import FREE, Price, Prices, load_prices
from moot.core.llm.spec import parse_spec

CUSTOM = "http://127.0.0.1:8000/v1"


def cost_map() -> dict[str, Any]:
    """litellm's bundled cost map, read directly (not through moot)."""
    found = importlib.util.find_spec("litellm")
    assert found is not None and found.submodule_search_locations
    folder = Path(next(iter(found.submodule_search_locations)))
    return json.loads((folder / "model_prices_and_context_window_backup.json").read_text("utf-8"))


def as_price(entry: dict[str, Any]) -> tuple[float, float, float | None]:
    return (
        entry["input_cost_per_token"],
        entry["output_cost_per_token"],
        entry.get("cache_read_input_token_cost"),
    )


def price_of(text: str, prices: Prices | None = None, **options: Any) -> Price | None:
    return (prices or Prices()).price(parse_spec(text, **options))


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ("openai/gpt-4o-mini", "gpt-4o-mini"),  # OpenAI's keys are bare
        ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),  # so are Anthropic's
        ("gemini/gemini-flash-latest", "gemini/gemini-flash-latest"),  # most are provider/model
        ("mistral/mistral-small", "mistral/mistral-small"),
        ("deepseek/deepseek-chat", "deepseek/deepseek-chat"),
        # aliases: -latest and a dated snapshot without an entry of their own take the stem's
        ("anthropic/claude-sonnet-4-5-latest", "claude-sonnet-4-5"),
        ("anthropic/claude-haiku-4-5-20991231", "claude-haiku-4-5"),
    ],
)
def test_cost_map_entries_are_found_with_their_cached_input_price(spec: str, key: str) -> None:
    entry = cost_map()[key]
    price = price_of(spec)
    assert price is not None
    assert (price.input, price.output, price.cached_input) == as_price(entry)
    assert price.max_output == entry["max_output_tokens"]


def test_a_bare_key_of_another_provider_is_not_its_price() -> None:
    # `openai/claude-haiku-4-5` is not Anthropic's model: the bare key is Anthropic's entry
    assert cost_map()["claude-haiku-4-5"]["litellm_provider"] == "anthropic"
    assert price_of("openai/claude-haiku-4-5") is None
    # an embedding model's price is not a chat call's
    assert cost_map()["text-embedding-3-small"]["mode"] == "embedding"
    assert price_of("openai/text-embedding-3-small") is None


def test_readme_example_is_retired_from_the_map_and_a_price_file_prices_it(tmp_path: Path) -> None:
    # litellm 1.106 lists claude-3-5-haiku only under other providers (bedrock, vertex_ai):
    # Anthropic's own entry is gone, so it is unpriced, never borrowed from another provider
    assert not any(k.startswith("claude-3-5-haiku") for k in cost_map())
    assert price_of("anthropic/claude-3-5-haiku-latest") is None
    file = tmp_path / "prices.json"
    file.write_text(json.dumps({"anthropic/claude-3-5-haiku-latest": {"input": 0.8, "output": 4}}))
    price = price_of("anthropic/claude-3-5-haiku-latest", load_prices(file))
    assert price is not None and price.cost(1_000_000, 1_000_000) == pytest.approx(4.8)


def test_local_models_are_free_and_custom_endpoints_unpriced_unless_given(tmp_path: Path) -> None:
    assert price_of("local/smollm2") == FREE
    assert Prices().cost(parse_spec("local/smollm2"), 10_000, 10_000) == 0.0
    assert price_of("openai/gpt-4o-mini", api_base=CUSTOM) is None  # a proxy's price is unknown
    assert Prices().cost(parse_spec("openai/llama3", api_base=CUSTOM), 10, 10) is None
    file = tmp_path / "prices.yaml"
    file.write_text("openai/llama3: {input: 0.2, output: 0.6, cached_input: 0.1}\n")
    prices = load_prices(file)
    spec = parse_spec("openai/llama3", api_base=CUSTOM)
    # per million tokens: 600 fresh prompt tokens, 400 cached, 100 completion
    assert prices.cost(spec, 1000, 100, cached_tokens=400) == pytest.approx(
        (600 * 0.2 + 400 * 0.1 + 100 * 0.6) / 1e6
    )


def test_the_user_price_overrides_the_cost_map(tmp_path: Path) -> None:
    file = tmp_path / "prices.json"
    file.write_text(json.dumps({"openai/gpt-4o-mini": {"input": 1, "output": 2}}))
    price = price_of("openai/gpt-4o-mini", load_prices(file))
    assert price is not None and (price.input, price.output) == pytest.approx((1e-6, 2e-6))


def test_cached_tokens_without_a_cached_price_cost_the_input_price() -> None:
    assert Price(1.0, 2.0).cost(10, 1, cached_tokens=4) == 12.0
    assert Price(1.0, 2.0, 0.5).cost(10, 1, cached_tokens=4) == 10.0
    assert Price(1.0, 2.0, 0.5).cost(10, 1, cached_tokens=40) == 7.0  # never more than the prompt


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            '{"openai/m": {"input": "cheap", "output": 1}}',
            "openai/m: input: must be a valid number",
        ),
        ('{"openai/m": {"input": 1}}', "openai/m: output: required"),
        (
            '{"openai/m": {"input": 1, "output": -2}}',
            "openai/m: output: must be greater than or equal to 0",
        ),
        (
            '{"openai/m": {"input": 1, "output": 1, "cache": 1}}',
            "openai/m: cache: unknown key (known: input, output, cached_input, batch_input, "
            "batch_output, batch_cached_input)",
        ),
        (
            '{"openai/m": {"input": 1, "output": 1, "batch_output": -1}}',
            "openai/m: batch_output: must be greater than or equal to 0, got -1",
        ),
        (
            '{"openai/m": {"input": 1, "output": 1, "batch_input": "half"}}',
            "openai/m: batch_input: must be a valid number, got 'half'",
        ),
        (
            "openai/m: {input: 1, output: 1, batch_cached_input: .inf}",
            "openai/m: batch_cached_input: must be a finite number, got inf",
        ),
        (
            '{"openai/m": {"input": true, "output": 1}}',
            "openai/m: input: must be a valid number, got True",
        ),
        ('{"gpt-4o": {"input": 1, "output": 1}}', "'gpt-4o': expected a model spec"),
        ('{"openai/m": 3}', "openai/m: expected a mapping"),
        ("[1, 2]", "expected a mapping of model specs"),
        ("{", "cannot read prices"),
    ],
)
def test_a_bad_price_file_names_file_model_and_key(
    tmp_path: Path, content: str, problem: str
) -> None:
    file = tmp_path / "prices.json"
    file.write_text(content)
    with pytest.raises(InputError) as caught:
        load_prices(file)
    assert str(caught.value).startswith(f"{file}, ") or str(caught.value).startswith(f"{file}:")
    assert problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_batch_rates_come_from_the_cost_map_and_are_half_the_live_ones_without() -> None:
    spec = parse_spec("openai/gpt-4o-mini")
    batched = Prices().price(spec, batch=True)
    assert batched is not None  # the cost map's own batch rates, per token
    assert (batched.input, batched.output) == (7.5e-08, 3e-07)
    assert (batched.input, batched.output) == (
        cost_map()["gpt-4o-mini"]["input_cost_per_token_batches"],
        cost_map()["gpt-4o-mini"]["output_cost_per_token_batches"],
    )
    assert Prices().cost(spec, 1000, 100, batch=True) == pytest.approx(1000 * 7.5e-08 + 100 * 3e-07)
    # claude-haiku-4-5 has a cached-input batch rate too
    haiku = Prices().price(parse_spec("anthropic/claude-haiku-4-5"), batch=True)
    entry = cost_map()["claude-haiku-4-5"]
    assert haiku is not None
    assert haiku.cached_input == entry["cache_read_input_token_cost_batches"]
    # a model without batch keys: half of each live rate (as litellm's batch_cost_calculator)
    assert not any(k.endswith("_batches") for k in cost_map()["deepseek/deepseek-chat"])
    live = price_of("deepseek/deepseek-chat")
    half = Prices().price(parse_spec("deepseek/deepseek-chat"), batch=True)
    assert live is not None and half is not None and live.cached_input is not None
    assert (half.input, half.output, half.cached_input) == (
        live.input / 2,
        live.output / 2,
        live.cached_input / 2,
    )
    assert half.max_output == live.max_output  # what --budget reserves without max_tokens
    # local models are free in batches too; an unpriced model stays unpriced
    assert Prices().price(parse_spec("local/smollm2"), batch=True) == FREE
    assert Prices().cost(parse_spec("openai/llama3", api_base=CUSTOM), 10, 10, batch=True) is None


def test_a_price_file_gives_batch_rates_or_leaves_them_at_half(tmp_path: Path) -> None:
    file = tmp_path / "prices.yaml"
    file.write_text(
        "openai/given: {input: 2, output: 8, cached_input: 1, batch_input: 0.5, batch_output: 6,"
        " batch_cached_input: 0.25}\n"
        "openai/half: {input: 2, output: 8, cached_input: 1}\n"
        "openai/some: {input: 2, output: 8, batch_output: 5}\n"
    )
    prices = load_prices(file)

    def batch_rates(model: str) -> tuple[float, float, float | None]:
        """`model`'s batch rates per million tokens (its cached input's: None if it has none)."""
        price = prices.price(parse_spec(model, api_base=CUSTOM), batch=True)
        assert price is not None
        cached = None if price.cached_input is None else price.cached_input * 1e6
        return price.input * 1e6, price.output * 1e6, cached

    assert batch_rates("openai/given") == pytest.approx((0.5, 6, 0.25))
    assert batch_rates("openai/half") == pytest.approx((1, 4, 0.5))
    # no cached price: a cached prompt token costs the batch input price
    assert batch_rates("openai/some") == pytest.approx((1, 5, None))
    # live prices are unchanged by batch rates; cached tokens in a batch at its cached rate
    spec = parse_spec("openai/given", api_base=CUSTOM)
    assert prices.cost(spec, 1000, 100) == pytest.approx((1000 * 2 + 100 * 8) / 1e6)
    assert prices.cost(spec, 1000, 100, cached_tokens=400, batch=True) == pytest.approx(
        (600 * 0.5 + 400 * 0.25 + 100 * 6) / 1e6
    )
