"""Index building and loading, BM25 / dense / hybrid search, MMR, the trusted-domain filter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moot.core.data.corpus import Chunk
from moot.core.errors import ConfigError, InputError
from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER
from moot.core.retrieval.index import (
    FORMAT_VERSION,
    MMR_CANDIDATES,
    MMR_LAMBDAS,
    RRF_K,
    Hit,
    Index,
    LocalRetriever,
    bm25_tokens,
    build_index,
    corpus_chunks,
    corpus_sha256,
    is_trusted,
    longest_chunks,
    mmr,
)

DOCS = [
    {
        "id": "cats",
        "text": "Cats are small domesticated felines that purr.",
        "url": "https://a.edu/c",
    },
    {"id": "dogs", "text": "Dogs bark and guard the house.", "url": "https://b.com/d"},
    {"id": "rain", "text": "Rain falls from clouds in the sky.", "url": "https://c.gov/r"},
    {"id": "tax", "text": "A wealth tax targets the richest households.", "url": None},
    {"id": "ubi", "text": "Universal basic income pays every citizen.", "url": "https://d.org/u"},
]


def corpus(tmp_path: Path, docs: list[dict] = DOCS) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory) -> Index:
    """An index with the real bundled all-MiniLM-L6-v2 vectors (loaded once per module)."""
    tmp = tmp_path_factory.mktemp("dense")
    return build_index(corpus(tmp), tmp / "index", dense=DEFAULT_EMBEDDER)


@pytest.fixture(scope="module")
def dense_retriever(dense_index) -> LocalRetriever:
    return LocalRetriever(dense_index, retriever="dense")


def ids(hits: list[Hit]) -> list[str]:
    return [hit.chunk.id for hit in hits]


def test_build_writes_a_manifest_and_loads_back(tmp_path):
    source = corpus(tmp_path)
    index = build_index(source, tmp_path / "idx", chunk_chars=30)
    manifest = json.loads((tmp_path / "idx" / "index.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["documents"] == 5 and manifest["chunks"] == len(index) > 5
    assert manifest["source_sha256"] == corpus_sha256(source)
    assert manifest["embedder"] is None and manifest["chunk_chars"] == 30
    assert not (tmp_path / "idx" / "dense.npy").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp dir left
    again = Index.load(tmp_path / "idx")
    assert again.chunks == index.chunks
    assert ids(again.search("purr felines", 3)) == ids(index.search("purr felines", 3))


def test_bm25_tokens_are_the_ones_bm25s_indexes_with():
    import bm25s

    texts = [
        "",
        "The and of",  # stopwords only
        "Isn't it O'Brien's 2nd café? ÉTÉ naïve résumé, x y 42 a1 _under_score",
        "Ünïcödé ΑΘΗΝΑ straße İstanbul 東京 tokyo-3 e-mail co-op",
        *(d["text"] for d in DOCS),
    ]
    expected = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    assert bm25_tokens(texts) == expected


def test_bm25_scores_are_bm25s_and_ties_rank_in_index_order(tmp_path):
    docs = [
        {"id": "a", "text": "wealth tax on land"},
        {"id": "b", "text": "a tax on wealth, land and sea"},
        {"id": "c", "text": "wealth tax on land"},  # the same words as a: the same score
        {"id": "d", "text": "rain in the sky"},
        {"id": "e", "text": "wealth tax on land"},
        {"id": "f", "text": "tax tax tax"},
    ]
    index = build_index(corpus(tmp_path, docs), tmp_path / "idx")
    queries = ["wealth tax", "land", "tax", "purr", "the", "rain wealth rain"]
    for query, hits in zip(queries, index.search_many(queries, 4), strict=True):
        bm25 = index._bm25  # bm25s's own scoring, which its retrieve ranks
        reference = bm25.get_scores_from_ids(bm25.get_tokens_ids(bm25_tokens([query])[0]))
        ranked = sorted(
            (i for i in range(len(docs)) if reference[i] > 0), key=lambda i: (-reference[i], i)
        )[:4]
        assert ids(hits) == [f"{docs[i]['id']}#0" for i in ranked], query
        assert [h.score for h in hits] == [float(reference[i]) for i in ranked]  # bit for bit
        assert ids(index.search(query, 4)) == ids(hits)
    assert ids(index.search("wealth tax", 2)) == ["a#0", "c#0"]  # e ties them: index order
    assert index.search_many([], 3) == []


def test_bm25_ranks_matching_chunks_and_drops_zero_scores(tmp_path):
    index = build_index(corpus(tmp_path), tmp_path / "idx")
    hits = index.search("Do cats purr?", 10)
    assert ids(hits) == ["cats#0"]
    assert hits[0].score > 0 and hits[0].chunk.url == "https://a.edu/c"
    assert index.search("the of and", 10) == []  # stopwords only


def test_a_rebuild_replaces_the_index(tmp_path):
    build_index(corpus(tmp_path), tmp_path / "idx")
    index = build_index(corpus(tmp_path, DOCS[:2]), tmp_path / "idx")
    assert len(Index.load(tmp_path / "idx")) == len(index) == 2
    (tmp_path / "old").mkdir()  # an index of another format version is replaced too
    (tmp_path / "old" / "index.json").write_text('{"format_version": 0}')
    assert len(build_index(corpus(tmp_path), tmp_path / "old")) == 5


def test_a_build_never_replaces_the_corpus_or_other_files(tmp_path):
    source = corpus(tmp_path)
    with pytest.raises(ConfigError, match="must not be, hold or sit inside an input"):
        build_index(source, tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an earlier index output"):
        build_index(source, tmp_path / "notes")
    assert source.is_file() and (tmp_path / "notes" / "mine.txt").read_text() == "mine"


def test_a_corpus_of_stopwords_is_an_input_error(tmp_path):
    source = corpus(tmp_path, [{"id": "a", "text": "the and of"}, {"id": "b", "text": "a an"}])
    with pytest.raises(InputError, match="only stopwords"):
        build_index(source, tmp_path / "idx")
    assert not (tmp_path / "idx").exists()


def test_missing_and_damaged_indexes_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no index here"):
        Index.load(tmp_path / "nothing")
    build_index(corpus(tmp_path), tmp_path / "idx")
    with (tmp_path / "idx" / "chunks.jsonl").open("a") as f:
        f.write(json.dumps(Chunk("x#0", "x", "extra").to_json()) + "\n")
    with pytest.raises(InputError, match="index.json says 5"):
        Index.load(tmp_path / "idx")


def test_dense_search_on_a_bm25_index_asks_for_a_rebuild(tmp_path):
    index = build_index(corpus(tmp_path), tmp_path / "idx")
    with pytest.raises(ConfigError, match="rebuild it with moot index --dense"):
        LocalRetriever(index, retriever="dense")


def test_mmr_matches_hand_computed_values():
    chunks = [Chunk(f"c{i}#0", f"c{i}", f"text {i}") for i in range(3)]
    hits = [Hit(c, s) for c, s in zip(chunks, (10.0, 8.0, 6.0), strict=True)]  # / max: 1 .8 .6
    vectors = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])  # sims: 0-1 .6, 0-2 0, 1-2 .8
    # lam .9: c0 = .9; c1 = .72 - .1*.6 = .66 beats c2 = .54 - 0; then c2 = .54 - .1*.8 = .46
    result = mmr(hits, vectors, 0.9, 3)
    assert ids(result) == ["c0#0", "c1#0", "c2#0"]
    assert [h.score for h in result] == pytest.approx([0.9, 0.66, 0.46])
    # lam .7: c1 = .56 - .3*.6 = .38 loses to c2 = .42; then c1 = .56 - .3*.8 = .32
    result = mmr(hits, vectors, 0.7, 3)
    assert ids(result) == ["c0#0", "c2#0", "c1#0"]
    assert [h.score for h in result] == pytest.approx([0.7, 0.42, 0.32])
    # the dataset's maximum (20) instead of the question's: relevance .5 .4 .3
    # lam .7: c0 = .35; c1 = .28 - .18 = .10 loses to c2 = .21; then c1 = .28 - .24 = .04
    result = mmr(hits, vectors, 0.7, 3, max_score=20.0)
    assert ids(result) == ["c0#0", "c2#0", "c1#0"]
    assert [h.score for h in result] == pytest.approx([0.35, 0.21, 0.04])
    # lam .9: c1 = .36 - .06 = .30 beats c2 = .27; then c2 = .27 - .08 = .19
    assert [h.score for h in mmr(hits, vectors, 0.9, 3, 20.0)] == pytest.approx([0.45, 0.3, 0.19])
    # Sim2 is a cosine: vectors of any length give the same order
    assert ids(mmr(hits, 3 * vectors, 0.7, 3)) == ["c0#0", "c2#0", "c1#0"]
    assert ids(mmr(hits, vectors, 0.0, 1)) == ["c0#0"]  # nothing selected: no penalty
    assert ids(mmr(hits, vectors, 1.0, 3)) == ["c0#0", "c1#0", "c2#0"]  # pure relevance


def test_mmr_reranks_the_top_100_candidates(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": f"vote number {i} here"}) + "\n" for i in range(130)
        )  # fmt: skip
    )
    index = build_index(docs, tmp_path / "idx")
    assert MMR_CANDIDATES == 100 and MMR_LAMBDAS == (0.5, 0.75, 0.9, 0.95, 0.99)
    assert len(LocalRetriever(index).candidates("vote", 5)) == 5
    retriever = LocalRetriever(index, mmr=0.9)
    assert len(retriever.candidates("vote", 5)) == 100
    assert len(retriever.candidates("vote", 120)) == 120  # never fewer than k
    assert len(retriever.search("vote", 5)) == 5


def test_mmr_with_tied_scores_uses_similarity_only():
    chunks = [Chunk(f"c{i}#0", f"c{i}", "t") for i in range(3)]
    hits = [Hit(c, 2.0) for c in chunks]
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert ids(mmr(hits, vectors, 0.5, 2)) == ["c0#0", "c2#0"]


@pytest.mark.parametrize(
    ("url", "trusted"),
    [
        ("https://www.stanford.edu/page", True),
        ("http://example.org", True),
        ("https://data.gov/x?y=1", True),
        ("https://site.info", True),
        ("https://me.pro:8080/a", True),
        ("https://news.com/org", False),
        ("https://edu.example.com", False),
        ("https://EXAMPLE.ORG./", True),
        ("example.org/path", True),
        (None, False),
        ("", False),
    ],
)
def test_is_trusted(url, trusted):
    assert is_trusted(url) is trusted


def test_trusted_filter_drops_untrusted_and_urlless_chunks(tmp_path):
    index = build_index(corpus(tmp_path), tmp_path / "idx")
    query = "cats dogs rain tax income"
    assert set(ids(LocalRetriever(index).search(query, 10))) == {
        "cats#0",
        "dogs#0",
        "rain#0",
        "tax#0",
        "ubi#0",
    }
    trusted = LocalRetriever(index, trusted_domains=True).search(query, 10)
    assert set(ids(trusted)) == {"cats#0", "rain#0", "ubi#0"}


def test_bad_retriever_options(tmp_path):
    index = build_index(corpus(tmp_path), tmp_path / "idx")
    with pytest.raises(ConfigError, match="--mmr must be between 0 and 1"):
        LocalRetriever(index, mmr=1.5)
    with pytest.raises(ConfigError, match="unknown retriever"):
        LocalRetriever(index, retriever="sparse")  # type: ignore[arg-type]


def test_dense_finds_meaning_without_shared_words(dense_index, dense_retriever):
    assert dense_index.search("kitten", 5) == []  # no lexical overlap for BM25
    hits = dense_retriever.search("kitten", 2)
    assert ids(hits)[0] == "cats#0"
    assert dense_index.vectors.shape == (5, 384)
    assert np.allclose(np.linalg.norm(dense_index.vectors, axis=1), 1.0, atol=1e-5)


def test_hybrid_is_reciprocal_rank_fusion(dense_index, dense_retriever):
    embedder = dense_retriever.embedder
    query = "cats purr"
    bm25 = ids(dense_index.search(query, 5, "bm25"))
    dense = ids(dense_index.search(query, 5, "dense", embedder))
    expected: dict[str, float] = {}
    for ranking in (bm25, dense):
        for rank, cid in enumerate(ranking, start=1):
            expected[cid] = expected.get(cid, 0.0) + 1 / (RRF_K + rank)
    hybrid = dense_index.search(query, 5, "hybrid", embedder)
    assert {h.chunk.id: h.score for h in hybrid} == pytest.approx(expected)
    assert hybrid[0].chunk.id == "cats#0" and hybrid[0].score == pytest.approx(2 / (RRF_K + 1))


def test_an_index_built_with_another_embedder_is_refused(dense_index):
    with pytest.raises(ConfigError, match="built with the embedder 'all-MiniLM-L6-v2', not 'x'"):
        LocalRetriever(dense_index, retriever="dense", embedder="x")


def test_mmr_over_a_dense_index_uses_its_vectors(dense_index, dense_retriever):
    plain = dense_retriever.search("household income and taxes", 3)
    diverse = LocalRetriever(
        dense_index, retriever="dense", mmr=0.5, embedder=dense_retriever.embedder
    ).search("household income and taxes", 3)
    assert ids(diverse)[0] == ids(plain)[0]
    assert len(diverse) == 3 and len(set(ids(diverse))) == 3


def test_mmr_over_a_bm25_index_encodes_the_candidates(tmp_path, dense_retriever):
    del dense_retriever  # the bundled model, loaded once for the module
    index = build_index(corpus(tmp_path), tmp_path / "idx")
    hits = LocalRetriever(index, mmr=0.0).search("voting tax income cats", 3)
    assert ids(hits)[0] == ids(index.search("voting tax income cats", 1))[0]
    assert len(hits) == 3


def test_longest_chunks_count_the_title_and_come_longest_first():
    chunks = [
        Chunk("a#0", "a", "x" * 10),
        Chunk("b#0", "b", "x" * 8, title="y" * 5),  # 13 with its title
        Chunk("c#0", "c", "x" * 12),
    ]
    assert [c.id for c in longest_chunks(chunks, 2)] == ["b#0", "c#0"]
    assert len(longest_chunks(chunks, 10)) == 3


def test_corpus_chunks_are_the_index_s_and_write_nothing(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    chunks = corpus_chunks(docs, 40)
    assert list(tmp_path.iterdir()) == [docs]
    assert chunks == build_index(docs, tmp_path / "idx", chunk_chars=40).chunks
    stopwords = tmp_path / "stop.jsonl"
    stopwords.write_text('{"id": "s", "text": "the of and"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="no word to index"):
        corpus_chunks(stopwords)
