"""`moot.core.hub.cards`: the command line without secrets, size categories, the licence rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from huggingface_hub import DatasetCard

from moot.core.hub.cards import Card, command_line, render_card, size_category, write_card


def test_the_command_line_loses_every_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    monkeypatch.setenv("MY_API_KEY", "sk-0123456789")
    argv = [
        "moot",
        "debate",
        "--api-base",
        "https://user:hunter2pass@host.example/v1?api-key=sekrit123",
        "--note",
        "sk-0123456789 and hf_abcdefghijklmnop",
        "--topics",
        "my topics.json",
    ]
    shown = command_line(argv)
    for secret in ("hunter2pass", "sekrit123", "sk-0123456789", "hf_abcdefghijklmnop"):
        assert secret not in shown
    # the URL as every message shows it (`public_url`), the environment's values redacted
    assert "'https://host.example/v1?api-key=***'" in shown
    assert shown.count("[redacted]") == 2
    assert "'my topics.json'" in shown  # quoted as a shell takes it


@pytest.mark.parametrize(
    ("records", "category"),
    [(0, "n<1K"), (999, "n<1K"), (1000, "1K<n<10K"), (123_456, "100K<n<1M"), (10**8, "n>10M")],
)
def test_size_categories_are_the_hubs(records: int, category: str) -> None:
    assert size_category(records) == category


def card(**fields: object) -> Card:
    base = {
        "kind": "dataset",
        "title": "T",
        "summary": "S.",
        "schema": "X",
        "sizes": [("records", 1)],
    }
    return Card(**{**base, **fields})  # type: ignore[arg-type]


def test_mit_only_when_everything_it_derives_from_states_mit(tmp_path: Path) -> None:
    mit = tmp_path / "mit"
    write_card(mit, card(papers=["debatrix"]), command="moot x")
    assert DatasetCard.load(mit / "README.md").data.license == "mit"
    assert "mit" in render_card(card(inputs=[mit]), command="moot y").split("---")[1]
    mixed = render_card(card(papers=["debatrix"], inputs=[mit, tmp_path / "x.jsonl"]), "moot z")
    assert "license: unknown" in mixed and "licence not known (no moot card)" in mixed
    assert "license: unknown" in render_card(card(), command="moot")  # derived from nothing


def test_a_card_is_rewritten_whole(tmp_path: Path) -> None:
    write_card(tmp_path, card(sizes=[("records", 5)]), command="moot a")
    write_card(tmp_path, card(sizes=[("records", 2000)]), command="moot b")
    loaded = DatasetCard.load(tmp_path / "README.md")
    assert loaded.data.size_categories == ["1K<n<10K"] and "`moot b`" in loaded.text
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]  # no temporary left
