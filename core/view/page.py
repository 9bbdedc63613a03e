"""The `moot view` page: one self-contained HTML file, its data embedded once as JSON.

The page's HTML, CSS and JavaScript are package data beside this module (``view.html``,
``view.css``, ``view.js``); this module fills them in. Model text is data: the JSON is embedded in
a ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped, so no string
in it can close the element or open a comment, and the script draws every string with DOM text
nodes, never as markup. Values of the environment's keys are taken out before anything is written.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

#: What no embedded string may hold as is: ``</script>``, ``<!--`` and entities start with them.
_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def embedded_json(data: Any, secrets: list[str] = ()) -> str:  # type: ignore[assignment]
    """`data` as JSON safe inside a script element, with every secret replaced.

    Args:
        data: The page's data.
        secrets: Strings that must not reach the page (API keys); each becomes ``[redacted]``.
    """
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for secret in secrets:
        text = text.replace(json.dumps(secret, ensure_ascii=False)[1:-1], "[redacted]")
    return text.translate(_ESCAPES)


def render_view(payload: dict[str, Any], title: str, secrets: list[str] = ()) -> str:  # type: ignore[assignment]
    """The page for `payload` (`moot.core.view.payload.view_payload`).

    Args:
        payload: The runs to show.
        title: The page's title.
        secrets: Strings that must not reach the page (`secrets_in_environment`).
    """
    assets = resources.files(__package__)
    page = (assets / "view.html").read_text(encoding="utf-8")
    parts = {
        "/*CSS*/": (assets / "view.css").read_text(encoding="utf-8"),
        "/*JS*/": (assets / "view.js").read_text(encoding="utf-8"),
        "/*DATA*/": embedded_json(payload, secrets),
        "<!--TITLE-->": html.escape(title),
        "<!--HEADING-->": html.escape(title),
    }
    for marker, text in parts.items():
        head, found, tail = page.partition(marker)
        if not found:
            raise RuntimeError(f"view.html lacks {marker}")  # a broken install, not user input
        page = head + text + tail  # partition: a marker inside the data is never replaced
    return page
