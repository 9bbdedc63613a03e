"""core/loader.py: a repeated key refused with its place, every JSON number form read."""

from __future__ import annotations

import pytest

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
