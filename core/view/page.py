"""The `moot view` page: one HTML file, its data embedded once as JSON.

The page's HTML, CSS and JavaScript are package data beside this module (``view.html``,
``view.css``, ``view.js``); this module fills them in. Model text is data: the JSON is embedded in
a ``<script type="application/json">`` element with ``<``, ``>`` and ``&`` escaped, so no string
in it can close the element or open a comment, and the script draws every string with DOM text
nodes, never as markup. Every known secret (`moot.core.redaction.known_secrets`: the keys this
process sent, the environment's keys and tokens) is taken out before anything is written.

Past `INLINE_ITEMS` items the page holds only what its list, filters and summary read of each
item (`LISTED`); the rest (the record, a judged debate) is in script files of `CHUNK` items in a
folder beside it (``view.html`` → ``view.data/``), each loaded when one of its items is opened.
A page of 100,000 debates is then ~20 MB, not ~150 MB, and opens in seconds.
"""

from __future__ import annotations

import hashlib
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


#: A page holds its items whole up to this many (over all its runs), else their `LISTED` fields.
INLINE_ITEMS = 1000
#: Items per data file of a larger page: one file is read when one of its items is opened.
CHUNK = 250
#: What the page reads of every item at once: the list, the filters, the summary's counts.
LISTED = ("id", "status", "failed", "error", "title", "model", "score", "label", "key", "judged")


def data_folder(page: Path) -> Path:
    """Where a large page's data files go: beside it, ``view.html`` → ``view.data``."""
    return page.with_name(page.stem + ".data")


def split_items(
    payload: dict[str, Any], folder: str, secrets: Sequence[str] = ()
) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The page's data with each item's `LISTED` fields only, and the data files of the rest.

    Each file is a script, ``mootChunk(RUN, CHUNK, [...])``: the items' other fields as
    `embedded_json`, for the page to load with a ``<script>`` element (a ``file://`` page may not
    ``fetch``). Its name starts with a digest of every file, so a page and its files always
    match: a page being rewritten never reads the next page's files.

    Args:
        payload: The page's data (`moot.core.view.payload.view_payload`).
        folder: The files' folder, by its name beside the page.
        secrets: Strings that must not reach the files (`embedded_json`).

    Returns:
        The page's data (``chunks``: the files' folder, name prefix and items per file) and each
        file's name and text.
    """
    runs, files, digest = [], [], hashlib.blake2b(digest_size=6)
    aligned = len(payload["runs"]) > 1  # the key aligns items side by side
    for r, run in enumerate(payload["runs"]):
        items = run["items"]
        for c in range(0, len(items), CHUNK):
            rest = [{k: v for k, v in i.items() if k not in LISTED} for i in items[c : c + CHUNK]]
            text = f"mootChunk({r},{c // CHUNK},{embedded_json(rest, secrets)});\n".encode()
            digest.update(text)
            files.append((f"{r}-{c // CHUNK}.js", text))
        runs.append({**run, "items": [_listed(item, aligned) for item in items]})
    prefix = digest.hexdigest()
    chunks = {"folder": folder, "prefix": prefix, "size": CHUNK}
    return {**payload, "runs": runs, "chunks": chunks}, {f"{prefix}-{n}": t for n, t in files}


def _listed(item: dict[str, Any], aligned: bool) -> dict[str, Any]:
    """An item's `LISTED` fields, less those null or false (the page reads a missing one so).

    Its alignment key becomes a digest, or goes when there is nothing to align it with: a large
    page's list costs ~150 bytes an item.
    """
    found = {k: item[k] for k in LISTED if item[k] is not None and item[k] is not False}
    if aligned:
        found["key"] = hashlib.blake2b(item["key"].encode(), digest_size=8).hexdigest()
    else:
        del found["key"]
    return found


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
    secrets, folder = known_secrets(), data_folder(out)
    data, files = payload, {}
    if sum(len(run["items"]) for run in payload["runs"]) > INLINE_ITEMS:
        data, files = split_items(payload, folder.name, secrets)
    for name, text in files.items():  # the new files first: the page being replaced reads others
        atomic_write(folder / name, lambda f, text=text: f.write(text), binary=True)
    page = render_view(data, title, secrets)
    atomic_write(out, lambda f: f.write(page))
    _remove_stale(folder, set(files))
    return payload


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """The data files of earlier pages (a data folder that ends up empty goes too)."""
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name not in keep and _DATA_FILE.fullmatch(path.name):
            path.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()


_DATA_FILE = re.compile(r"[0-9a-f]{12}-\d+-\d+\.js")
