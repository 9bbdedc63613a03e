"""`moot.core.yaml_aliases.load_yaml`: YAML as safe_load reads it, alias bombs refused at once."""

from __future__ import annotations

import time

import pytest
import yaml

from moot.core.yaml_aliases import ExpansionError, load_yaml


def laughs(levels: int, width: int = 10) -> str:
    """The billion laughs: each level's list holds `width` aliases of the level below."""
    lines = ['a0: &a0 "lol"']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_anchors_aliases_and_merge_keys_read_as_safe_load_reads_them():
    text = (
        "remote: &remote {api-base: http://gpu:8000/v1, max-retries: 0}\n"
        "stages:\n  a: {<<: *remote, command: debate}\n  b: {<<: *remote, command: judge}\n"
        f"{laughs(3)}"  # a thousand values: fine
    )
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml("") is None and load_yaml("# nothing\n") is None


def test_a_billion_laughs_is_refused_in_a_moment():
    started = time.perf_counter()
    with pytest.raises(ExpansionError, match="aliases expand it past"):
        load_yaml(laughs(9))
    assert time.perf_counter() - started < 1


def test_a_long_string_repeated_by_aliases_is_refused():
    text = f's: &s "{"x" * 100_000}"\nmany: [' + ", ".join(["*s"] * 20) + "]\n"
    with pytest.raises(ExpansionError):
        load_yaml(text)


def test_a_value_that_holds_itself_is_refused():
    with pytest.raises(ExpansionError, match="holds itself"):
        load_yaml("stages:\n  s: &s\n    command: debate\n    topics: *s\n")
