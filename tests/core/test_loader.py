"""core/loader.py: a repeated key refused with its place, every JSON number form read."""

from __future__ import annotations

import time

import pytest
import yaml

from moot.core.loader import RepeatedKey, Unreadable, load_json, load_yaml


def test_yaml_reads_json_s_exponent_forms_as_numbers_and_quoted_ones_as_text():
    text = "a: 1e-05\nb: 2e-1\nc: 1.5E5\nd: .5e3\ne: -1E+2\nf: 10\ng: '1e-05'\nh: 1e5x\n"
    assert load_yaml(text) == {
        "a": 1e-05, "b": 0.2, "c": 150000.0, "d": 500.0, "e": -100.0, "f": 10,
        "g": "1e-05", "h": "1e5x",
    }  # fmt: skip


def test_a_yaml_merge_key_may_be_overridden():
    assert load_yaml("b: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n")["d"] == {"x": 3, "y": 2}


@pytest.mark.parametrize(
    ("load", "text", "place", "key"),
    [
        (load_yaml, "stages:\n  gen: {command: a}\n  gen: {command: b}\n", "line 3", "gen"),
        (load_yaml, "a: {x: 1, x: 2}\n", "line 1", "x"),
        (load_yaml, "- {k: 1}\n- k: 1\n  k: 2\n", "line 3", "k"),
        (load_json, '{"openai/x": {"input": 1}, "openai/x": {"input": 0}}', None, "openai/x"),
        (load_json, '[{"topic": "a"}, {"topic": "a", "topic": "b"}]', "index 1", "topic"),
        (load_json, '{"a": [1, {"b": {"c": 1, "c": 1}}]}', "a[1].b", "c"),
    ],
)
def test_a_repeated_key_is_refused_at_its_line_or_path(load, text, place, key):
    with pytest.raises(RepeatedKey) as caught:
        load(text)
    assert (caught.value.place, caught.value.problem) == (place, f"key {key!r} repeated")


def test_unreadable_text_is_one_line():
    for load, text in ((load_yaml, "a: [1\n"), (load_json, '{"a": 1,}'), (load_json, "[" * 10**5)):
        with pytest.raises(Unreadable) as caught:
            load(text)
        assert "\n" not in str(caught.value)
    assert load_json('{"a": 1e-05, "b": 2E+1}') == {"a": 1e-05, "b": 20.0}


# --- aliases (issue 29, item 15) ---


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
    with pytest.raises(Unreadable, match="aliases expand it past"):
        load_yaml(laughs(9))
    assert time.perf_counter() - started < 1


def test_a_long_string_repeated_by_aliases_is_refused():
    text = f's: &s "{"x" * 100_000}"\nmany: [' + ", ".join(["*s"] * 20) + "]\n"
    with pytest.raises(Unreadable):
        load_yaml(text)


def test_a_value_that_holds_itself_is_refused():
    with pytest.raises(Unreadable, match="holds itself"):
        load_yaml("stages:\n  s: &s\n    command: debate\n    topics: *s\n")
