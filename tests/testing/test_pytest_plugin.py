"""The `scripted_server` fixture, in a pytest of its own, as a user's suite meets it.

A subprocess: an in-process run would drop the modules it imported when it ends, and the
classes of this process's later tests would no longer be the ones their libraries raise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"

LIFETIME = """
import urllib.error
import urllib.request

import pytest

pytest_plugins = ["moot.testing.pytest_plugin"]
SEEN = []


def health(url):
    with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=5) as reply:
        return reply.status


def test_serves_on_loopback(scripted_server):
    SEEN.append(scripted_server.url)
    assert scripted_server.url.startswith("http://127.0.0.1:")
    assert health(scripted_server.url) == 200


def test_stopped_after_its_test():
    with pytest.raises(urllib.error.URLError):
        health(SEEN[0])
"""


def test_the_docs_example_passes_and_the_server_stops_after_its_test(
    pytester: pytest.Pytester,
) -> None:
    [example] = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text("utf-8"), re.M | re.S)
    pytester.makepyfile(test_headlines=example, test_lifetime=LIFETIME)

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")

    result.assert_outcomes(passed=example.count("\ndef test_") + 2)
