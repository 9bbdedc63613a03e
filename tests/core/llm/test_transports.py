"""Transports as a registry: the docs' example transport, and what callers may ask of a spec."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from moot.core import ConfigError, ModelSpec, Transport, parse_spec, register_transport
from moot.core.llm.prices import Prices
from moot.core.llm.spec import key_needs

ROOT = Path(__file__).resolve().parents[3]


def test_the_docs_example_transport_registers_and_answers_through_the_model_layer() -> None:
    page = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    section = page.split("\n## A transport\n")[1].split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    scope: dict[str, object] = {}
    for block in blocks:  # the page's own assertions run here
        exec(compile(block, "docs/extending.md", "exec"), scope)
    spec = parse_spec("echo/hi")
    assert spec.transport == "echo" and spec.transport_class is scope["Echo"]
    assert key_needs(spec) == "no key (runs on this machine)"
    assert Prices().price(spec) is not None  # free: --budget needs no price file
    with pytest.raises(ConfigError, match="takes no --api-base"):
        parse_spec("echo/hi", api_base="http://127.0.0.1:9/v1")

    class Again(Transport):  # the same name again (a notebook cell run twice) replaces it
        name, prefixes = "echo", ("echo",)

    register_transport(Again)
    assert parse_spec("echo/hi").transport_class is Again

    class Thief(Transport):
        name, prefixes = "thief", ("echo",)

    with pytest.raises(ValueError, match="'echo' is echo's"):
        register_transport(Thief)
    assert parse_spec("echo/hi").transport_class is Again


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        ("local/smollm2", {"in_process", "free", "embedded", "decodes_schema"}),
        ("hf/some/folder", {"in_process", "free", "takes_max_length", "repeats_on_retry"}),
        ("openai/x", {"openai_api"}),
        ("anthropic/claude", set()),
    ],
)
def test_each_built_in_transport_states_its_facts(text: str, facts: set[str]) -> None:
    names = {"in_process", "free", "embedded", "decodes_schema", "takes_max_length"}
    names |= {"repeats_on_retry", "openai_api"}
    transport = ModelSpec(*text.split("/", 1)).transport_class
    assert {name for name in names if getattr(transport, name)} == facts


def test_no_caller_compares_a_transport_name() -> None:
    # callers ask the transport's class (`spec.transport_class.in_process`), never its name
    compare = re.compile(r"transport (==|!=|in )")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("core", "graphs", "agents", "training", "moot")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if compare.search(line)
    ]
    assert found == []
