"""Corpus loading (JSONL, JSON, folders, HTML) and chunking."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from moot.core.data.corpus import (
    Chunk,
    Document,
    chunk_documents,
    html_to_text,
    load_documents,
    split_text,
)
from moot.core.errors import InputError


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_jsonl_records_with_and_without_ids(tmp_path):
    path = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": "a", "text": " Alpha text. ", "title": "A", "url": "https://x.org/a"},
            {"contents": "Pyserini-style contents."},
        ],
    )
    docs = load_documents(path)
    assert docs == [
        Document("a", "Alpha text.", "A", "https://x.org/a"),
        Document("1", "Pyserini-style contents."),
    ]
    assert Document.from_json(docs[0].to_json()) == docs[0]


def test_json_list(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps([{"id": 7, "text": "Seven."}]), encoding="utf-8")
    assert load_documents(path) == [Document("7", "Seven.")]


@pytest.mark.parametrize(
    ("records", "needle"),
    [
        ([{"id": "a"}], "line 1: missing or empty 'text'"),
        ([{"id": "a", "text": "ok"}, {"id": "b", "text": "  "}], "line 2: missing or empty 'text'"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "id a: repeated document id"),
        (["just a string"], "line 1: expected an object"),
        ([{"text": "x", "url": 3}], "'url' must be a string"),
    ],
)
def test_bad_records_name_file_and_record(tmp_path, records, needle):
    path = write_jsonl(tmp_path / "bad.jsonl", records)
    with pytest.raises(InputError, match=re.escape(needle)) as info:
        load_documents(path)
    assert str(path) in str(info.value)


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_documents(tmp_path / "nope.jsonl")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.pdf").write_bytes(b"%PDF")
    with pytest.raises(InputError, match="no .txt, .md, .html, .htm files"):
        load_documents(tmp_path / "empty")


def test_folder_of_text_markdown_and_html(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("Plain text.", encoding="utf-8")
    (tmp_path / "sub" / "b.md").write_text("# Heading\n\nMarkdown.", encoding="utf-8")
    (tmp_path / "sub" / "c.html").write_text(
        '<html><head><title> The  Page </title><link rel="canonical" href="https://w.gov/c">'
        "</head><body><p>Hello</p></body></html>",
        encoding="utf-8",
    )
    (tmp_path / "skip.json").write_text("{}", encoding="utf-8")
    docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["a.txt", "sub/b.md", "sub/c.html"]
    assert docs[2] == Document("sub/c.html", "Hello", "The Page", "https://w.gov/c")


def test_folder_with_an_empty_document_is_refused(tmp_path):
    (tmp_path / "a.html").write_text("<script>var x = 1;</script>", encoding="utf-8")
    with pytest.raises(InputError, match=r"a\.html: no text"):
        load_documents(tmp_path)


def test_html_to_text_drops_scripts_and_breaks_blocks():
    text, title, url = html_to_text(
        "<html><head><title>T</title><style>p {color: red}</style></head><body>"
        "<h1>Head</h1><p>One   <b>bold</b>\n word.</p><script>alert(1)</script>"
        "<ul><li>x</li><li>y</li></ul>a<br>b &amp; c</body></html>"
    )
    assert title == "T" and url is None
    assert "alert" not in text and "color" not in text
    lines = [line for line in text.splitlines() if line]
    assert lines == ["Head", "One bold word.", "x", "y", "a", "b & c"]


def test_chunks_respect_the_size_and_word_boundaries():
    words = " ".join(f"word{i}" for i in range(2000))
    pieces = split_text(words, 100)
    assert all(len(p) <= 100 for p in pieces)
    assert " ".join(pieces) == words  # cut only at spaces: no word split, nothing lost


def test_chunks_prefer_paragraphs_then_sentences():
    para = "A" * 60 + ". " + "B" * 30 + "."
    assert split_text(f"{para}\n\n{para}", 120) == [para, para]
    sentences = "First sentence here. Second sentence is here. Third one."
    assert split_text(sentences, 50) == [
        "First sentence here. Second sentence is here.",
        "Third one.",
    ]


def test_a_word_longer_than_a_chunk_is_cut():
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_chunk_ids_are_stable_and_carry_document_fields():
    docs = [Document("d", "one two three four", "T", "https://a.edu"), Document("e", "short")]
    chunks = chunk_documents(docs, chunk_chars=10)
    assert [c.id for c in chunks] == ["d#0", "d#1", "e#0"]
    assert chunks[0] == Chunk("d#0", "d", "one two", "T", "https://a.edu")
    assert Chunk.from_json(chunks[0].to_json()) == chunks[0]
    assert chunk_documents(docs, chunk_chars=10) == chunks
