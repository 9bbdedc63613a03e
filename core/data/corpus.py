"""Documents and chunks for retrieval: loading a corpus and cutting it into ~2000-character chunks.

A corpus is a JSON list or JSONL file of records (``text`` required, or ``contents`` as in
Pyserini corpora; optional ``id``, ``title``, ``url``; a record without an id gets its 0-based
position), or a folder of ``.txt``, ``.md``, ``.html`` and ``.htm`` files (the id is the path
relative to the folder; HTML becomes text with the standard library's parser, its ``<title>``
the title and its canonical link the URL). Chunks are about 2000 characters, as in DebateQA,
cut at paragraph, sentence or word boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from moot.core.data.records import read_input_text, read_records, refuse_repeated_ids
from moot.core.errors import InputError

DEFAULT_CHUNK_CHARS = 2000
FOLDER_SUFFIXES = (".txt", ".md", ".html", ".htm")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s")


@dataclass(frozen=True)
class Document:
    """One document of a corpus."""

    id: str
    text: str
    title: str | None = None
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Document:
        """Inverse of `to_json`."""
        return cls(**data)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document, the unit that is indexed and retrieved; id ``<doc_id>#<n>``."""

    id: str
    doc_id: str
    text: str
    title: str | None = None
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-safe form."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Chunk:
        """Inverse of `to_json`."""
        return cls(**data)


def load_documents(path: Path) -> list[Document]:
    """Read a corpus file (JSON list / JSONL) or folder (see the module docstring).

    Raises:
        InputError: A missing path, a record without text, an empty file, repeated document
            ids, or a folder without any readable document.
    """
    path = Path(path)
    if path.is_dir():
        docs = _folder_documents(path)
    elif path.exists():
        records = enumerate(read_records(path))
        docs = [_record_document(path, where, n, item) for n, (where, item) in records]
    else:
        raise InputError(path, "not found")
    refuse_repeated_ids(path, (doc.id for doc in docs), "repeated document id")
    return docs


def chunk_documents(
    docs: Iterable[Document], chunk_chars: int = DEFAULT_CHUNK_CHARS
) -> list[Chunk]:
    """Cut documents into chunks of at most `chunk_chars` characters.

    Each cut falls at the last paragraph break, else line break, else sentence end in the second
    half of the window, else at the last whitespace; a word longer than a chunk is cut.
    """
    if chunk_chars < 1:
        raise ValueError("chunk_chars must be positive")
    chunks = []
    for doc in docs:
        for n, text in enumerate(split_text(doc.text, chunk_chars)):
            chunks.append(Chunk(f"{doc.id}#{n}", doc.id, text, doc.title, doc.url))
    return chunks


def split_text(text: str, chunk_chars: int) -> list[str]:
    """The pieces `chunk_documents` makes of one text (stripped, none empty)."""
    pieces = []
    rest = text.strip()
    while len(rest) > chunk_chars:
        cut = _cut(rest, chunk_chars)
        pieces.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    if rest:
        pieces.append(rest)
    return [p for p in pieces if p]


def _cut(text: str, limit: int) -> int:
    window = text[: limit + 1]  # a boundary right after the limit still yields a full chunk
    half = limit // 2
    for separator in ("\n\n", "\n"):
        at = window.rfind(separator, half)
        if at > 0:
            return at
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if half <= m.end() <= limit]
    if ends:
        return ends[-1]
    spaces = [m.start() for m in re.finditer(r"\s", window)]
    return spaces[-1] if spaces and spaces[-1] > 0 else limit


def _record_document(path: Path, where: str, number: int, item: Any) -> Document:
    if not isinstance(item, dict):
        raise InputError(path, "expected an object with 'text'", where)
    text = item.get("text", item.get("contents"))
    if not isinstance(text, str) or not text.strip():
        raise InputError(path, "missing or empty 'text'", where)
    doc_id = item.get("id")
    title, url = item.get("title"), item.get("url")
    for name, value in (("title", title), ("url", url)):
        if value is not None and not isinstance(value, str):
            raise InputError(path, f"'{name}' must be a string", where)
    return Document(str(number if doc_id in (None, "") else doc_id), text.strip(), title, url)


def _folder_documents(folder: Path) -> list[Document]:
    files = sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in FOLDER_SUFFIXES
    )
    if not files:
        raise InputError(folder, f"no {', '.join(FOLDER_SUFFIXES)} files in this folder")
    docs = []
    for file in files:
        raw = read_input_text(file)  # InputError for non-UTF-8 or whitespace-only files
        title = url = None
        if file.suffix.lower() in (".html", ".htm"):
            raw, title, url = html_to_text(raw)
        if not raw.strip():
            raise InputError(file, "no text in this document")
        docs.append(Document(file.relative_to(folder).as_posix(), raw.strip(), title, url))
    return docs


_BLOCKS = frozenset(
    ("address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption")
    + ("figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li")
    + ("main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul")
)
_SKIPPED = frozenset({"script", "style", "noscript", "template"})


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.url: str | None = None
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in _SKIPPED:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCKS:
            self.parts.append("\n")
        elif tag == "link" and (values.get("rel") or "").lower() == "canonical":
            self.url = self.url or values.get("href")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:  # source line breaks are plain whitespace in HTML
            (self.title_parts if self._in_title else self.parts).append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str | None, str | None]:
    """Text, title and canonical URL of an HTML page; scripts and styles dropped.

    Block elements end lines; runs of spaces collapse; blank lines collapse into one.
    """
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    title = " ".join("".join(parser.title_parts).split()) or None
    return text, title, parser.url
