"""The SQLite request cache and the token / cost ledger."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from moot.core.errors import InputError
from moot.core.llm.cache import RequestCache, default_cache_path, request_key
from moot.core.llm.ledger import Usage, UsageLedger
from moot.core.llm.prices import FREE, Prices
from moot.core.llm.spec import parse_spec

# --- cache -------------------------------------------------------------------


def test_get_put_len_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "folder" / "requests.sqlite"
    cache = RequestCache(path)
    assert cache.get("k1") is None and len(cache) == 0
    cache.put("k1", {"text": "hello ü", "prompt_tokens": 3})
    cache.put("k2", {"text": "second"})
    assert cache.get("k1") == {"text": "hello ü", "prompt_tokens": 3}
    assert len(cache) == 2
    cache.close()

    reopened = RequestCache(path)
    assert len(reopened) == 2
    assert reopened.get("k2") == {"text": "second"}
    reopened.close()


def test_first_writer_wins(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path / "c.sqlite")
    cache.put("k", {"text": "first"})
    cache.put("k", {"text": "second"})
    assert cache.get("k") == {"text": "first"}
    assert len(cache) == 1


def test_two_cache_objects_on_one_file_concurrently(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    caches = [RequestCache(path), RequestCache(path)]
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            cache = caches[index]
            for n in range(150):
                cache.put(f"{index}-{n}", {"n": n, "writer": index})
                cache.put(f"common-{n}", {"writer": index})
                assert cache.get(f"{index}-{n}") == {"n": n, "writer": index}
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(caches[0]) == len(caches[1]) == 450
    assert caches[1].get("0-149") == {"n": 149, "writer": 0}
    assert caches[0].get("1-0") == {"n": 0, "writer": 1}
    assert caches[0].get("common-7") == caches[1].get("common-7")


def test_opening_waits_for_a_connection_that_is_creating_the_file(tmp_path: Path) -> None:
    # SQLite refuses the switch to WAL at once, without its busy handler, while another
    # connection holds a new file's write lock (issue 36)
    path = tmp_path / "new.sqlite"
    creator = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    creator.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, creator.execute, ["ROLLBACK"])
    release.start()
    started = time.monotonic()
    cache = RequestCache(path)
    assert time.monotonic() - started >= 0.25
    cache.put("k", {"text": "after the wait"})
    assert RequestCache(path).get("k") == {"text": "after the wait"}
    release.join()


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("folder.sqlite", "a folder, not a request cache file"),
        ("text.sqlite", "cannot open as a request cache (file is not a database)"),
        ("a-file/c.sqlite", "cannot make its folder (File exists)"),
    ],
)
def test_a_file_that_cannot_be_a_cache_is_an_input_error(
    tmp_path: Path, name: str, problem: str
) -> None:
    (tmp_path / "folder.sqlite").mkdir()
    (tmp_path / "text.sqlite").write_text("not a database\n")
    (tmp_path / "a-file").write_text("")
    with pytest.raises(InputError) as raised:
        RequestCache(tmp_path / name)
    assert str(raised.value) == f"{tmp_path / name}: {problem}"


def test_request_key_is_canonical() -> None:
    one = request_key({"model": "m", "params": {"seed": 1, "temperature": 0.5}})
    two = request_key({"params": {"temperature": 0.5, "seed": 1}, "model": "m"})
    assert one == two and len(one) == 64
    assert one != request_key({"model": "m", "params": {"seed": 2, "temperature": 0.5}})


def test_default_cache_path_follows_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOOT_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert default_cache_path() == tmp_path / "elsewhere" / "requests.sqlite"


# --- ledger ------------------------------------------------------------------

LOCAL = parse_spec("local/smollm2")
OPENAI = parse_spec("openai/gpt-4o-mini")
CUSTOM = parse_spec("openai/llama3", api_base="http://127.0.0.1:8000/v1")


def bundled_prices(name: str) -> tuple[float, float]:
    """Read litellm's bundled cost map directly (not through moot)."""
    found = importlib.util.find_spec("litellm")
    assert found is not None and found.submodule_search_locations
    folder = Path(next(iter(found.submodule_search_locations)))
    data = json.loads((folder / "model_prices_and_context_window_backup.json").read_text("utf-8"))
    entry = data.get(f"openai/{name}") or data[name]
    return entry["input_cost_per_token"], entry["output_cost_per_token"]


def row(ledger: UsageLedger, role: str, stage: str) -> dict[str, Any]:
    (match,) = [r for r in ledger.to_json()["by_role"] if (r["role"], r["stage"]) == (role, stage)]
    return match


def test_record_counts_per_role_stage_model() -> None:
    ledger = UsageLedger()
    ledger.record(LOCAL, "debater_a", "opening", prompt_tokens=10, completion_tokens=5)
    ledger.record(LOCAL, "debater_a", "opening", prompt_tokens=1, completion_tokens=2, retries=2)
    ledger.record(LOCAL, "debater_b", "opening", prompt_tokens=7, latency=0.5)
    ledger.record(LOCAL, "debater_b", "opening", failed=True, retries=5)

    a = row(ledger, "debater_a", "opening")
    assert (a["calls"], a["prompt_tokens"], a["completion_tokens"], a["retries"]) == (2, 11, 7, 2)
    b = row(ledger, "debater_b", "opening")
    assert (b["calls"], b["failures"], b["retries"], b["latency_s"]) == (2, 1, 5, 0.5)
    total = ledger.to_json()["total"]
    assert total["calls"] == 4 and total["prompt_tokens"] == 18 and total["failures"] == 1


def test_embedded_model_costs_nothing_and_is_priced() -> None:
    ledger = UsageLedger()
    ledger.record(LOCAL, "judge", "verdict", prompt_tokens=1000, completion_tokens=1000)
    assert Prices().price(LOCAL) == FREE
    assert ledger.total().cost_usd == 0.0
    assert ledger.unpriced == set()


def test_priced_openai_model_uses_bundled_cost_map() -> None:
    input_price, output_price = bundled_prices("gpt-4o-mini")
    assert input_price > 0 and output_price > 0
    ledger = UsageLedger()
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=1200, completion_tokens=300)
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=800, completion_tokens=100)

    expected = 2000 * input_price + 400 * output_price
    assert row(ledger, "judge", "verdict")["cost_usd"] == pytest.approx(expected, rel=1e-12)
    price = Prices().price(OPENAI)
    assert price is not None and (price.input, price.output) == (input_price, output_price)
    assert ledger.unpriced == set()


def test_cached_and_unanswered_calls_cost_nothing_paid_failures_cost_their_tokens() -> None:
    ledger = UsageLedger()
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=500, completion_tokens=50, cached=True)
    ledger.record(OPENAI, "judge", "verdict", failed=True)
    usage = row(ledger, "judge", "verdict")
    assert usage["cost_usd"] == 0.0
    assert usage["cache_hits"] == 1 and usage["prompt_tokens"] == 500
    assert usage["failures"] == 1
    # a call whose replies were all empty failed, but each reply was paid for
    ledger.record(OPENAI, "judge", "verdict", failed=True, prompt_tokens=100, completion_tokens=0)
    input_price, _ = bundled_prices("gpt-4o-mini")
    assert row(ledger, "judge", "verdict")["cost_usd"] == pytest.approx(100 * input_price)


def test_cached_prompt_tokens_are_priced_at_the_cached_rate() -> None:
    ledger = UsageLedger()
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=1000, cached_prompt_tokens=600)
    price = Prices().price(OPENAI)
    assert price is not None and price.cached_input is not None
    assert price.cached_input < price.input  # gpt-4o-mini's cached input is half price
    usage = row(ledger, "judge", "verdict")
    assert usage["cached_prompt_tokens"] == 600
    assert usage["cost_usd"] == pytest.approx(400 * price.input + 600 * price.cached_input)


def test_custom_api_base_is_unpriced_not_free() -> None:
    ledger = UsageLedger()
    ledger.record(CUSTOM, "debater_a", "opening", prompt_tokens=100, completion_tokens=10)
    assert Prices().price(CUSTOM) is None
    assert ledger.to_json()["unpriced"] == ["openai/llama3"]
    assert ledger.total().cost_usd is None  # unpriced, never $0
    assert ledger.to_json()["total"]["cost_usd"] is None
    assert row(ledger, "debater_a", "opening")["cost_usd"] is None
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=10)
    assert row(ledger, "judge", "verdict")["cost_usd"] > 0  # the priced rows keep their cost
    assert ledger.total().cost_usd is None

    cached_only = UsageLedger()
    cached_only.record(CUSTOM, "debater_a", "opening", prompt_tokens=100, cached=True)
    assert cached_only.unpriced == set()


def sample_ledger() -> UsageLedger:
    ledger = UsageLedger()
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=100, completion_tokens=20, latency=0.25)
    ledger.record(CUSTOM, "debater_a", "opening", prompt_tokens=50, completion_tokens=5, retries=1)
    ledger.record(LOCAL, "debater_b", "opening", prompt_tokens=9, cached=True)
    ledger.record(LOCAL, "debater_b", "conclusion", failed=True)
    return ledger


def test_to_json_from_json_round_trip() -> None:
    ledger = sample_ledger()
    data = json.loads(json.dumps(ledger.to_json()))  # JSON-safe

    restored = UsageLedger.from_json(data)

    assert restored.entries == ledger.entries
    assert restored.unpriced == ledger.unpriced == {"openai/llama3"}
    assert restored.to_json() == ledger.to_json()
    assert data["total"]["calls"] == 4


def test_from_json_reads_a_ledger_written_before_cached_prompt_tokens() -> None:
    data = sample_ledger().to_json()
    for item in [*data["by_role"], data["total"]]:
        del item["cached_prompt_tokens"]
    restored = UsageLedger.from_json(data)
    assert restored.total().calls == 4 and restored.total().cached_prompt_tokens == 0


def test_from_json_does_not_mutate_its_input() -> None:
    data = sample_ledger().to_json()
    snapshot = json.loads(json.dumps(data))
    UsageLedger.from_json(data)
    assert data == snapshot
    UsageLedger.from_json(data)


def test_merged_sums_entries_and_unions_unpriced() -> None:
    first, second = sample_ledger(), UsageLedger()
    second.record(OPENAI, "judge", "verdict", prompt_tokens=1, completion_tokens=2, retries=3)
    second.record(LOCAL, "judge", "extra", prompt_tokens=4)

    merged = UsageLedger.merged([first, second])

    verdict = row(merged, "judge", "verdict")
    assert (verdict["calls"], verdict["prompt_tokens"], verdict["completion_tokens"]) == (
        2,
        101,
        22,
    )
    assert verdict["retries"] == 3
    assert verdict["cost_usd"] == pytest.approx(
        row(first, "judge", "verdict")["cost_usd"] + row(second, "judge", "verdict")["cost_usd"]
    )
    assert row(merged, "judge", "extra")["prompt_tokens"] == 4
    assert merged.unpriced == {"openai/llama3"}
    assert merged.total().calls == first.total().calls + second.total().calls == 6
    # merging never changes its inputs
    assert row(first, "judge", "verdict")["calls"] == 1
    assert UsageLedger.merged([]).to_json()["total"] == Usage().to_json()


def test_a_batch_call_is_priced_at_batch_rates_and_counted() -> None:
    ledger = UsageLedger()
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=1000, completion_tokens=100)
    ledger.record(OPENAI, "judge", "verdict", prompt_tokens=1000, completion_tokens=100, batch=True)
    live, batched = Prices().price(OPENAI), Prices().price(OPENAI, batch=True)
    assert live is not None and batched is not None
    usage = row(ledger, "judge", "verdict")
    assert (usage["calls"], usage["batch_calls"]) == (2, 1)
    # gpt-4o-mini in batches: the cost map's 7.5e-08 and 3e-07 per token, half the live rates
    assert usage["cost_usd"] == pytest.approx(
        1000 * 1.5e-07 + 100 * 6e-07 + 1000 * 7.5e-08 + 100 * 3e-07
    )
    assert ledger.to_json()["total"]["batch_calls"] == 1

    restored = UsageLedger.from_json(json.loads(json.dumps(ledger.to_json())))
    assert restored.entries == ledger.entries
    merged = UsageLedger.merged([ledger, restored])
    assert merged.total().batch_calls == 2
    # a ledger without batches reads and writes as earlier versions did: no batch_calls key
    plain = sample_ledger().to_json()
    assert "batch_calls" not in plain["total"]
    assert all("batch_calls" not in r for r in plain["by_role"])
    assert UsageLedger.from_json(plain).total().batch_calls == 0
