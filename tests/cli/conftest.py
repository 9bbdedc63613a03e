"""Fixtures of the CLI tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.browser import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium per test module (`moot view`'s page tests)."""
    with chromium() as context:
        yield context
