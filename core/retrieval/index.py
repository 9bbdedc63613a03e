"""Local retrieval: a persisted BM25 (bm25s) and dense index, hybrid fusion, MMR, trusted domains.

An index is a folder written atomically by `build_index`:

* ``index.json``: the manifest (format version, chunk size, counts, the corpus path and its
  SHA-256, the embedder or null, the bm25s version);
* ``chunks.jsonl``: the chunks in index order;
* ``bm25/``: the bm25s index (English stopwords, no stemmer);
* ``dense.npy``: one unit vector per chunk, when built with an embedder.

Hybrid retrieval is reciprocal-rank fusion of the BM25 and dense rankings, score
``sum 1 / (RRF_K + rank)`` with ranks from 1 and ``RRF_K = 60`` (Cormack et al., 2009).
MMR follows BERDS (Section 5, eq. 1, Appendix B.6): the top ``MMR_CANDIDATES`` (|R| = 100)
candidates are re-ranked with their retrieval scores divided by a maximum score (the whole
dataset's in `moot retrieve`, the paper's; the question's own, the released reranking.py's) and
the cosine similarity of their vectors. The trusted-domain filter is DebateQA's (Table 8).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import numpy as np

from moot.core.data.corpus import (
    DEFAULT_CHUNK_CHARS,
    FOLDER_SUFFIXES,
    Chunk,
    Document,
    chunk_documents,
    load_documents,
)
from moot.core.data.records import (
    atomic_replace_dir,
    check_out_dir,
    jsonl_lines,
    write_json,
    write_jsonl,
)
from moot.core.errors import ConfigError, InputError
from moot.core.retrieval.embeddings import unit_rows

FORMAT_VERSION = 1
RRF_K = 60
#: bm25s's default token pattern (scikit-learn's CountVectorizer's), which indexes are built with.
BM25_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
MMR_CANDIDATES = 100  # |R| of BERDS eq. 1: MMR re-ranks the top 100 candidates
#: The lambda values BERDS searched on its dev split (footnote 5, Appendix B.6).
MMR_LAMBDAS = (0.5, 0.75, 0.9, 0.95, 0.99)
TRUSTED_SUFFIXES = (".edu", ".org", ".gov", ".info", ".pro")
RetrieverName = Literal["bm25", "dense", "hybrid"]
RETRIEVERS: tuple[str, ...] = ("bm25", "dense", "hybrid")


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk and its score (higher is better; the scale depends on the retriever)."""

    chunk: Chunk
    score: float

    def to_json(self) -> dict[str, Any]:
        """The chunk's fields plus ``score``."""
        return {**self.chunk.to_json(), "score": self.score}


class Retriever(Protocol):
    """What answering graphs call: ``search(query, k)`` returns at most `k` hits, best first."""

    name: str

    def search(self, query: str, k: int) -> list[Hit]:
        """The best `k` hits for `query`."""
        ...


class Index:
    """A loaded index folder (see the module docstring); use `build_index` or `Index.load`."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any],
        chunks: list[Chunk],
        bm25: Any,
        vectors: np.ndarray | None,
    ) -> None:
        self.path, self.manifest, self.chunks = path, manifest, chunks
        self._bm25, self.vectors = bm25, vectors
        self._positions = {chunk.id: i for i, chunk in enumerate(chunks)}

    @property
    def embedder(self) -> str | None:
        """The embedder the dense vectors were made with, or None (BM25 only)."""
        return self.manifest["embedder"]

    def __len__(self) -> int:
        return len(self.chunks)

    @classmethod
    def load(cls, path: Path) -> Index:
        """Open an index folder and check that its parts agree with its manifest.

        Raises:
            InputError: No index at `path`, or a damaged or incompatible one.
        """
        import bm25s

        path = Path(path)
        manifest_path = path / "index.json"
        if not manifest_path.is_file():
            raise InputError(
                path, "no index here (index.json not found); build one with moot index"
            )
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            chunks_text = (path / "chunks.jsonl").read_text(encoding="utf-8")
            lines = jsonl_lines(chunks_text)
            chunks = [Chunk.from_json(json.loads(line)) for line in lines if line]
        except (OSError, ValueError, TypeError, RecursionError) as exc:
            problem = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise InputError(path, f"damaged index: {problem}") from None
        if manifest.get("format_version") != FORMAT_VERSION:
            raise InputError(
                manifest_path,
                f"index format {manifest.get('format_version')!r}, expected "
                f"{FORMAT_VERSION}; rebuild it with moot index",
            )
        if manifest.get("chunks") != len(chunks):
            raise InputError(
                path,
                f"chunks.jsonl has {len(chunks)} chunks, index.json says {manifest.get('chunks')}",
            )
        bm25 = bm25s.BM25.load(str(path / "bm25"), show_progress=False)
        vectors = None
        if manifest.get("embedder"):
            try:
                vectors = np.load(path / "dense.npy")
            except (OSError, ValueError, EOFError) as exc:
                raise InputError(path / "dense.npy", f"unreadable: {exc}") from None
            if vectors.shape[0] != len(chunks):
                raise InputError(
                    path / "dense.npy",
                    f"{vectors.shape[0]} vectors for {len(chunks)} chunks; rebuild the index",
                )
        return cls(path, manifest, chunks, bm25, vectors)

    def search(
        self,
        query: str,
        k: int,
        retriever: RetrieverName = "bm25",
        embedder: Any | None = None,
    ) -> list[Hit]:
        """The best `k` chunks for `query`.

        BM25 drops chunks sharing no term with the query (score 0), so it may return fewer;
        equal scores rank in index order.

        Args:
            query: The search text.
            k: How many hits at most.
            retriever: ``bm25``, ``dense`` or ``hybrid`` (reciprocal-rank fusion, `RRF_K`).
            embedder: An `Embedder` with the index's embedder name (dense and hybrid only).

        Raises:
            ConfigError: Dense or hybrid on an index without vectors, without an embedder, or
                with an embedder other than the index's.
        """
        return self.search_many([query], k, retriever, embedder)[0]

    def search_many(
        self,
        queries: Sequence[str],
        k: int,
        retriever: RetrieverName = "bm25",
        embedder: Any | None = None,
    ) -> list[list[Hit]]:
        """`search` for each of `queries`, in order; BM25 tokenises them all in one call.

        Raises:
            ConfigError: As `search`.
        """
        k = min(k, len(self.chunks))
        if retriever == "bm25":
            return self._bm25_search(queries, k)
        self.check_embedder(embedder)
        if retriever == "dense":
            return [self._dense_search(query, k, embedder) for query in queries]
        if retriever != "hybrid":
            raise ConfigError(f"unknown retriever {retriever!r}; use one of {RETRIEVERS}")
        pool = min(len(self.chunks), max(4 * k, 100))
        return [
            self._fuse(ranking, self._dense_search(query, pool, embedder), k)
            for query, ranking in zip(queries, self._bm25_search(queries, pool), strict=True)
        ]

    def _fuse(self, bm25: list[Hit], dense: list[Hit], k: int) -> list[Hit]:
        fused: dict[str, float] = {}
        for ranking in (bm25, dense):
            for rank, hit in enumerate(ranking, start=1):
                fused[hit.chunk.id] = fused.get(hit.chunk.id, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused.items(), key=lambda item: (-item[1], self._positions[item[0]]))[:k]
        return [Hit(self.chunks[self._positions[cid]], score) for cid, score in best]

    def check_embedder(self, embedder: Any | None) -> None:
        """Refuse dense search on a BM25-only index or with another embedder than the index's.

        Args:
            embedder: An `Embedder`, or an embedder name.
        """
        if self.embedder is None:
            raise ConfigError(
                f"the index {self.path} has no dense vectors; rebuild it with moot index --dense"
            )
        if embedder is None:
            raise ConfigError("dense retrieval needs an embedder")
        name = embedder if isinstance(embedder, str) else embedder.name
        if name != self.embedder:
            raise ConfigError(
                f"the index {self.path} was built with the embedder {self.embedder!r}, "
                f"not {name!r}; query with the same embedder or rebuild the index"
            )

    def vectors_of(self, hits: Sequence[Hit]) -> np.ndarray | None:
        """The stored unit vectors of `hits`' chunks, or None for a BM25-only index."""
        if self.vectors is None:
            return None
        return self.vectors[[self._positions[hit.chunk.id] for hit in hits]]

    def _bm25_search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        found = []
        for words in bm25_tokens(queries):
            ids = self._bm25.get_tokens_ids(words)
            top, scores = bm25_top(self._bm25, ids, k) if ids and k > 0 else ([], [])
            found.append([Hit(self.chunks[i], s) for i, s in zip(top, scores, strict=True)])
        return found

    def _dense_search(self, query: str, k: int, embedder: Any) -> list[Hit]:
        assert self.vectors is not None
        scores = self.vectors @ embedder.encode_queries([query])[0]
        order = np.argsort(-scores, kind="stable")[:k]
        return [Hit(self.chunks[int(i)], float(scores[i])) for i in order]


@functools.cache
def _bm25_tokenizer() -> tuple[Any, frozenset[str]]:
    from bm25s.stopwords import STOPWORDS_EN

    return re.compile(BM25_TOKEN_PATTERN).findall, frozenset(STOPWORDS_EN)


def bm25_tokens(texts: Sequence[str]) -> list[list[str]]:
    """The BM25 tokens of each text, as ``bm25s.tokenize`` makes them for the index.

    Lower case, bm25s's (scikit-learn's) token pattern, its English stopwords dropped, no
    stemmer. The same tokens as ``bm25s.tokenize(texts, stopwords="en", return_ids=False)``
    without its per-call progress bars and per-text stopword set, which cost more than
    scoring a query (``benchmarks/bench_bm25.py``).
    """
    split, stopwords = _bm25_tokenizer()
    return [[t for t in split(text.lower()) if t not in stopwords] for text in texts]


def bm25_top(bm25: Any, token_ids: Sequence[int], k: int) -> tuple[list[int], list[float]]:
    """The `k` best chunks of a bm25s index for one query's token ids, and their scores.

    The scores are bm25s's own (the same float32 sums, token by token, as its ``get_scores``),
    without its ``retrieve``: that one builds a thread pool and a progress bar per call, which
    cost more than the scoring itself (``benchmarks/bench_bm25.py``). Chunks scoring 0 (no
    query term) are left out; equal scores rank in index order, so the ranking is
    deterministic.

    Args:
        bm25: A loaded ``bm25s.BM25``.
        token_ids: The query's token ids in `bm25`'s vocabulary (``get_tokens_ids``).
        k: How many chunks at most.
    """
    matrix = bm25.scores
    data, indices, indptr = matrix["data"], matrix["indices"], matrix["indptr"]
    scores = np.zeros(matrix["num_docs"], dtype=bm25.dtype)
    for token in token_ids:  # a chunk holds a token once: no repeated index within a slice
        start, end = indptr[token], indptr[token + 1]
        scores[indices[start:end]] += data[start:end]
    if bm25.nonoccurrence_array is not None:  # BM25L and BM25+ only; moot builds lucene
        scores += bm25.nonoccurrence_array[np.asarray(token_ids)].sum()
    # the top k are among the chunks at or above any floor that at least k chunks reach: try
    # floors from half the best score down, so the sort sees tens of scores, not the corpus
    best = float(scores.max(initial=0))
    if best <= 0:
        return [], []
    for floor in (best / 2, best / 4, best / 8, best / 16):
        candidates = np.flatnonzero(scores >= floor)
        if len(candidates) >= k:
            break
    if len(candidates) < k:
        candidates = np.flatnonzero(scores > 0)
    order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
    return order.tolist(), scores[order].astype(float).tolist()


def build_index(
    docs: Path, out: Path, *, chunk_chars: int = DEFAULT_CHUNK_CHARS, dense: str | None = None
) -> Index:
    """Chunk a corpus and write an index folder at `out` (replaced atomically).

    Args:
        docs: A corpus file or folder (see `moot.core.data.corpus.load_documents`).
        out: The index folder: new, empty, or an earlier index (replaced).
        chunk_chars: The largest chunk, in characters (DebateQA: about 2000).
        dense: An embedder name (``all-MiniLM-L6-v2``, a local folder, a hub id) to also store
            dense vectors; None for BM25 only.

    Raises:
        InputError: Bad corpus, or one with no word but stopwords.
        ConfigError: A chunk size below 1, an embedder that cannot be loaded, or an `out` that
            is (or holds, or sits inside) the corpus or holds anything but an earlier index.
    """
    import bm25s

    if chunk_chars < 1:
        raise ConfigError(f"--chunk-chars must be a positive integer, got {chunk_chars}")
    check_out_dir(Path(out), "index", [docs], "index.json", _is_index_manifest)
    documents, chunks, tokens = _read_corpus(docs, chunk_chars)
    texts = [chunk.text for chunk in chunks]
    embedder = None
    if dense:
        from moot.core.retrieval.embeddings import Embedder

        embedder = Embedder(dense)  # fails before anything is written
    manifest = {
        "format_version": FORMAT_VERSION,
        "chunk_chars": chunk_chars,
        "documents": len(documents),
        "chunks": len(chunks),
        "source": str(docs),
        "source_sha256": corpus_sha256(Path(docs)),
        "embedder": dense or None,
        "bm25s": bm25s.__version__,
        "bm25_stopwords": "en",
    }

    def build(tmp: Path) -> None:
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        bm25.save(str(tmp / "bm25"), show_progress=False)
        write_jsonl(tmp / "chunks.jsonl", (chunk.to_json() for chunk in chunks))
        if embedder is not None:
            np.save(tmp / "dense.npy", embedder.encode(texts))
        write_json(tmp / "index.json", manifest)

    atomic_replace_dir(build, Path(out))
    return Index.load(Path(out))


def corpus_chunks(docs: Path, chunk_chars: int = DEFAULT_CHUNK_CHARS) -> list[Chunk]:
    """The chunks `build_index` would index, read and checked as it does; nothing is written.

    Raises:
        InputError: Bad corpus, or one with no word but stopwords.
    """
    return _read_corpus(docs, chunk_chars)[1]


def _read_corpus(docs: Path, chunk_chars: int) -> tuple[list[Document], list[Chunk], Any]:
    """A corpus's documents, their chunks and the chunks' BM25 tokens."""
    import bm25s

    documents = load_documents(docs)
    chunks = chunk_documents(documents, chunk_chars)
    tokens = bm25s.tokenize([chunk.text for chunk in chunks], stopwords="en", show_progress=False)
    if not tokens.vocab:
        raise InputError(docs, "no word to index: every document holds only stopwords")
    return documents, chunks, tokens


def longest_chunks(chunks: Sequence[Chunk], n: int) -> list[Chunk]:
    """The `n` chunks with the most characters (title and text), longest first.

    What a search could return at its longest: a dry run's stand-in for hits it cannot know
    without searching.
    """
    return heapq.nlargest(n, chunks, key=lambda c: len(c.text) + len(c.title or ""))


def _is_index_manifest(data: Any) -> bool:
    """An ``index.json`` of any format version: a folder `moot index` may replace."""
    return isinstance(data, dict) and "format_version" in data


def corpus_sha256(path: Path) -> str:
    """SHA-256 of a corpus file, or of a folder's corpus files (relative paths and contents)."""
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
        return digest.hexdigest()
    for file in sorted(p for p in path.rglob("*") if p.suffix.lower() in FOLDER_SUFFIXES):
        if file.is_file():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def mmr(
    hits: Sequence[Hit],
    chunk_vecs: np.ndarray,
    lam: float,
    k: int,
    max_score: float | None = None,
) -> list[Hit]:
    """Maximal marginal relevance re-ranking, BERDS eq. 1.

    Repeatedly adds the candidate maximising ``lam * score / max_score - (1 - lam) * max
    cosine similarity to those already selected`` (nothing selected: no penalty, so the top hit
    comes first). Each returned hit carries its MMR value.

    Args:
        hits: The candidates R, best first (BERDS: the top `MMR_CANDIDATES`).
        chunk_vecs: Their vectors, row i for ``hits[i]`` (normalised here: cosine similarity).
        lam: Weight of relevance against diversity, in [0, 1].
        k: How many to return.
        max_score: The score that normalises Sim1 to at most 1: the dataset's maximum (the
            paper) or None for the candidates' own maximum (the released reranking.py). A
            maximum of 0 or less leaves the scores as they are.
    """
    if not hits or k < 1:
        return []
    scores = np.array([hit.score for hit in hits], dtype=np.float64)
    top = float(scores.max()) if max_score is None else max_score
    relevance = scores / top if top > 0 else scores
    vecs = unit_rows(chunk_vecs)
    sims = vecs @ vecs.T
    chosen: list[int] = []
    values: list[float] = []
    max_sim = np.zeros(len(hits))
    remaining = list(range(len(hits)))
    while remaining and len(chosen) < k:
        mmr_scores = [lam * relevance[i] - (1 - lam) * max_sim[i] for i in remaining]
        best = int(np.argmax(mmr_scores))  # ties: the better-ranked candidate
        index = remaining.pop(best)
        chosen.append(index)
        values.append(float(mmr_scores[best]))
        max_sim = sims[index] if len(chosen) == 1 else np.maximum(max_sim, sims[index])
    return [Hit(hits[i].chunk, v) for i, v in zip(chosen, values, strict=True)]


def is_trusted(url: str | None) -> bool:
    """Whether `url`'s host ends with .edu, .org, .gov, .info or .pro (DebateQA Table 8).

    A document without a URL is not trusted (the filter drops it).
    """
    if not url:
        return False
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").rstrip(".").lower()
    return host.endswith(TRUSTED_SUFFIXES)


class LocalRetriever:
    """The `Retriever` over a local `Index`, with optional MMR and trusted-domain filter.

    Args:
        index: The loaded index.
        retriever: ``bm25``, ``dense`` or ``hybrid``.
        mmr: The MMR lambda in [0, 1], or None for no re-ranking (BERDS Table 8 lists the
            values it tuned: 0.75 to 0.99). MMR re-ranks the top `MMR_CANDIDATES` with the
            index's dense vectors, or encodes them with the default embedder on a BM25-only
            index; `search` normalises by the question's maximum score, `rerank` by any.
        trusted_domains: Keep only chunks whose URL is trusted (`is_trusted`).
        embedder: The `Embedder` (or embedder name) for dense and hybrid queries; it must be
            the index's (default: load the index's).
        mmr_embedder: The `Embedder` (or name) whose cosines are MMR's Sim2, encoding each
            candidate's text then title (BERDS: ``cls:WhereIsAI/UAE-Large-V1``, App. B.6);
            default: the index's vectors, else the default embedder.

    Example:
        >>> retriever = LocalRetriever(Index.load(Path("idx")), retriever="bm25")  # doctest: +SKIP
        >>> hits = retriever.search("Should voting be compulsory?", 3)  # doctest: +SKIP
    """

    def __init__(
        self,
        index: Index,
        retriever: RetrieverName = "bm25",
        mmr: float | None = None,
        trusted_domains: bool = False,
        embedder: Any | None = None,
        mmr_embedder: Any | None = None,
    ) -> None:
        if retriever not in RETRIEVERS:
            raise ConfigError(f"unknown retriever {retriever!r}; use one of {RETRIEVERS}")
        if mmr is not None and not 0 <= mmr <= 1:
            raise ConfigError(f"--mmr must be between 0 and 1, got {mmr:g}")
        self.index, self.retriever, self.lam = index, retriever, mmr
        self.trusted_domains = trusted_domains
        self.name = retriever
        if retriever != "bm25":
            if embedder is None or isinstance(embedder, str):
                index.check_embedder(embedder or index.embedder)  # before loading a model
                from moot.core.retrieval.embeddings import Embedder

                embedder = Embedder(embedder or index.embedder)
            index.check_embedder(embedder)
        self.embedder = embedder
        if isinstance(mmr_embedder, str):
            from moot.core.retrieval.embeddings import Embedder

            mmr_embedder = Embedder(mmr_embedder)
        self.mmr_embedder = mmr_embedder

    def search(self, query: str, k: int) -> list[Hit]:
        """The best `k` chunks for `query` (fewer when filters or the index leave fewer)."""
        return self.rerank(self.candidates(query, k), k)

    def candidates(self, query: str, k: int) -> list[Hit]:
        """What `search` ranks: the top `k`, or the top `MMR_CANDIDATES` (at least k) for MMR."""
        pool = k if self.lam is None else max(k, MMR_CANDIDATES)
        if self.trusted_domains:  # filter the whole ranking, then keep the best
            hits = self.index.search(query, len(self.index), self.retriever, self.embedder)
            hits = [hit for hit in hits if is_trusted(hit.chunk.url)]
        else:
            hits = self.index.search(query, pool, self.retriever, self.embedder)
        return hits[:pool]

    def rerank(self, hits: list[Hit], k: int, max_score: float | None = None) -> list[Hit]:
        """The best `k` of `candidates`' hits: MMR (`mmr`, normalised by `max_score`) or as is."""
        if self.lam is None:
            return hits[:k]
        if self.mmr_embedder is not None:  # as gen_doc_similarity.py: text, a space, title
            texts = [" ".join(filter(None, (h.chunk.text, h.chunk.title))) for h in hits]
            vectors = self.mmr_embedder.encode(texts)
        else:
            vectors = self.index.vectors_of(hits)
        if vectors is None:
            vectors = _default_embedder().encode([hit.chunk.text for hit in hits])
        return mmr(hits, vectors, self.lam, k, max_score)


def _default_embedder() -> Any:
    from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER, Embedder

    return Embedder(DEFAULT_EMBEDDER)
