"""The `moot view` page: one self-contained HTML file, its data embedded once as JSON.

The page's HTML, CSS and JavaScript are package data beside this module (``view.html``,
``view.css``, ``view.js``); this module fills them in. Model text is data: the JSON is embedded in
a ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped, so no string
in it can close the element or open a comment, and the script draws every string with DOM text
nodes, never as markup. Every known secret (`moot.core.redaction.known_secrets`: the keys this
process sent, the environment's keys and tokens) is taken out before anything is written.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

#: What no embedded string may hold as is: ``</script>``, ``<!--`` and entities start with them.
_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"))


def embedded_json(data: Any, secrets: Sequence[str] = ()) -> str:
    """`data` as JSON safe inside a script element, with every secret replaced.

    Args:
        data: The page's data.
        secrets: Strings that must not reach the page (API keys); each becomes ``[redacted]``.
    """
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # NaN or infinity, which JSON.parse refuses: shown as words instead
        text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"))
    for secret in secrets:
        text = text.replace(json.dumps(secret, ensure_ascii=False)[1:-1], "[redacted]")
    for char, escape in _ESCAPES:  # str.replace: twice as fast as str.translate at 70 MB
        text = text.replace(char, escape)
    return text


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def render_view(payload: dict[str, Any], title: str, secrets: Sequence[str] = ()) -> str:
    """The page for `payload` (`moot.core.view.payload.view_payload`).

    Args:
        payload: The runs to show.
        title: The page's title.
        secrets: Strings that must not reach the page (`moot.core.redaction.known_secrets`).
    """
    assets = resources.files(__package__)
    parts = {
        "/*CSS*/": (assets / "view.css").read_text(encoding="utf-8"),
        "/*JS*/": (assets / "view.js").read_text(encoding="utf-8"),
        "/*DATA*/": embedded_json(payload, secrets),
        "<!--TITLE-->": html.escape(title),
        "<!--HEADING-->": html.escape(title),
    }
    # the template alone is split at its markers, so nothing in the data is ever taken for one
    pieces = _MARKERS.split((assets / "view.html").read_text(encoding="utf-8"))
    if sorted(pieces[1::2]) != sorted(parts):
        raise RuntimeError("view.html does not hold each marker once")  # a broken install
    return "".join(parts.get(piece, piece) if i % 2 else piece for i, piece in enumerate(pieces))


_MARKERS = re.compile(r"(/\*CSS\*/|/\*JS\*/|/\*DATA\*/|<!--TITLE-->|<!--HEADING-->)")


def write_view(folders: Sequence[Path], out: Path, debates: Path | None = None) -> dict[str, Any]:
    """Read `folders` (every one before anything is written) and write their page to `out`.

    Args:
        folders: Run folders (`moot.core.view.payload.read_runs`).
        out: The page, written atomically.
        debates: The debates a `moot judge` folder judged (its ``--debates``).

    Returns:
        The page's data (`moot.core.view.payload.view_payload`).

    Raises:
        InputError: A folder `moot view` cannot show, or a bad debates file.
    """
    from moot.core.data.records import atomic_write
    from moot.core.redaction import known_secrets
    from moot.core.view.payload import view_payload

    payload = view_payload(list(folders), debates)
    title = "moot view: " + ", ".join(run["name"] for run in payload["runs"])
    page = render_view(payload, title, known_secrets())
    atomic_write(out, lambda f: f.write(page))
    return payload
