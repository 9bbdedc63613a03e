"""Judged text is data: the ``fence`` filter every judge and answerer template puts it in.

See `fence` for why a fenced text can neither close its fence nor open a structure of the prompt;
docs/architecture.md ("Judged text is data") for where it is used.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata

# What judged text may not contain as such: a run of the fence's brackets ("<<", ">>"), the
# papers' header lines (Debatrix's "# New Speech by", "# Analysis of Speech 2 by", DebateQA's
# "## Document:"; other markdown headers stay as written) and DEBATunE's bracketed markers
# ("[System]", "[The End of ...]"). Matched on the text after NFKC normalisation and case
# folding, with any run of whitespace allowed, so "［Ｓｙｓｔｅｍ］", "[ system ]", "＜＜＜" and
# "# NEW  SPEECH BY" match too.
_MARKERS = re.compile(
    r"(?<=<)<|(?<=>)>"
    r"|\[\s*(?:system|question|topic|the\s+(?:start|end)\s+of)\b"
    r"|^[^\S\n]*#+[^\S\n]*(?:new\s+speech|speech\s+\d|analysis\s+of|summary\s+of|info\s+slide"
    r"|document|question)\b",
    re.MULTILINE,
)
# what every match of `_MARKERS` holds: a text without any of them has nothing to escape
_SIGNS = ("<<", ">>", "[", "#")
_DIGEST_CHARS = 16
# a run of ASCII characters, or one other character
_RUNS = re.compile(r"[\x00-\x7f]+|[^\x00-\x7f]")


def fence(text: object, label: str) -> str:
    """Judged or retrieved `text` between markers it cannot forge (the Jinja filter ``fence``).

    ``{{ speech | fence("speech") }}`` gives::

        <<<speech 3f2a9c0b1d4e6f70>>>
        the speech, its markers escaped
        <<<end speech 3f2a9c0b1d4e6f70>>>

    Why the text cannot close its fence or open a structure of the prompt: (1) the marker carries
    a digest of the text itself, and a text cannot contain its own digest (in the rare case its
    normalised form does, the digest is taken again with a counter until it does not, so this
    holds without exception); a copy of another text's fence names another digest. (2) Anything
    in the text that reads as a fence bracket or a paper's marker once NFKC-normalised,
    case-folded and with its whitespace collapsed gets a backslash before it, so even the lines a
    model might take for structure are visibly escaped. Deterministic: the same text gives the
    same prompt, so request-cache keys and run ids stay stable.

    Args:
        text: The judged text (a speech, an answer, a retrieved chunk).
        label: What it is, shown in the marker (``speech``, ``answer``, ``document``).
    """
    raw = str(text)
    escaped = _escape_markers(raw)
    folded = _normalise(escaped)[0]
    attempt = 0
    while True:
        seed = f"{attempt}:{label}:{raw}" if attempt else f"{label}:{raw}"
        digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
        if digest not in folded:
            break
        attempt += 1
    return f"<<<{label} {digest}>>>\n{escaped}\n<<<end {label} {digest}>>>"


def _normalise(text: str) -> tuple[str, list[int] | None]:
    """`text` NFKC-normalised and case-folded character by character, and where each starts.

    The starts are None when each character starts at its own index (nothing grew). ASCII is
    its own NFKC form and its case folding is ``lower()``, so ASCII runs are folded whole; only
    the other characters take the per-character path. A judge's prompt fences the same long
    speeches and analyses over and over, and folding every character alone cost ~1 ms per 1,000
    characters: most of a Debatrix judgment's client CPU.
    """
    if text.isascii():
        return text.lower(), None
    parts: list[str] = []
    starts: list[int] = []
    length = 0
    for run in _RUNS.finditer(text):
        piece = run.group()
        if piece.isascii():
            part = piece.lower()
            starts.extend(range(length, length + len(part)))
        else:
            part = unicodedata.normalize("NFKC", piece).casefold()
            starts.append(length)
        parts.append(part)
        length += len(part)
    return "".join(parts), starts


def _escape_markers(text: str) -> str:
    """`text` with a backslash before each fence bracket or paper marker, lookalikes included."""
    folded, starts = _normalise(text)
    if not any(sign in folded for sign in _SIGNS):  # most texts: no scan by the slower regex
        return text
    found = (m.start() for m in _MARKERS.finditer(folded))
    if starts is None:
        cuts = sorted(set(found))
    else:
        cuts = sorted({bisect.bisect_right(starts, start) - 1 for start in found})
    if not cuts:
        return text
    pieces = []
    previous = 0
    for cut in cuts:
        while cut < len(text) and text[cut] in " \t":  # escape the marker, not its indent
            cut += 1
        pieces += [text[previous:cut], "\\"]
        previous = cut
    return "".join(pieces + [text[previous:]])
