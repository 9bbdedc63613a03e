from __future__ import annotations

import json

from moot.core.view.page import embedded_json, render_view


def test_embedded_json_can_close_no_element_and_reads_back():
    data = {"text": "</script><!-- <img onerror=x> & done", "n": 1}
    text = embedded_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == data


def test_secrets_are_redacted_even_inside_longer_text():
    text = embedded_json({"a": 'key "sk-abc12345" leaked', "b": ["sk-abc12345"]}, ["sk-abc12345"])
    assert "sk-abc12345" not in text
    assert json.loads(text) == {"a": 'key "[redacted]" leaked', "b": ["[redacted]"]}


def test_the_page_fills_every_marker_once_and_escapes_the_title():
    payload = {"format": 1, "runs": [{"name": "/*JS*/ <!--TITLE-->", "items": []}]}
    page = render_view(payload, "runs/<b>", [])
    assert page.startswith("<!doctype html>")
    assert page.count("<title>runs/&lt;b&gt;</title>") == 1 and "<h1>runs/&lt;b&gt;</h1>" in page
    assert "/*CSS*/" not in page and "<!--HEADING-->" not in page
    assert page.count('id="moot-data"') == 1 and "\\u003c!--TITLE--\\u003e" in page


def test_a_number_json_cannot_hold_is_shown_as_a_word():
    assert json.loads(embedded_json({"pd": float("nan"), "x": [float("inf")]})) == {
        "pd": "nan",
        "x": ["inf"],
    }
