"""Debian's chromium, headless, driven by playwright: for the tests of `moot view`'s page."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
#: Headless, offline, and nothing of a user's profile: no sync, updates or background requests.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium context with a new empty profile; skips without chromium."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"no browser: {CHROMIUM} is missing (`apt-get install chromium`, as .ci/run does)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no browser driver: playwright is missing (pip install -e '.[dev]')")
    profile = tempfile.mkdtemp(prefix="moot-chromium-")
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                profile,
                executable_path=str(CHROMIUM),
                args=ARGS,
                headless=True,
                viewport={"width": 1280, "height": 900},
                offline=True,
            )
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def open_page(context: Any, path: Path | str) -> Any:
    """`path` opened from disk (file://), or a URL, once its script has drawn it; errors are
    collected."""
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on("requestfailed", lambda req: page.errors.append(f"request: {req.url}"))
    page.goto(path if isinstance(path, str) else path.resolve().as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=20_000)
    return page


def items_tab(context: Any, page_path: Path, run: str) -> Any:
    """The page at ``page_path``, on the items tab of the run named ``run``."""
    page = open_page(context, page_path)
    page.click(f"[data-tab='Items: {run}']")
    return page
