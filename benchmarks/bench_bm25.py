"""moot's BM25 index against rank_bm25 at 1k, 10k and 100k chunks: query, build, size on disk.

Corpus: real texts of ``../shared/data`` (DebateQA demo answers, DEBATunE model outputs,
PanelBench DebateArt speeches, CompQA answers, BERDS detector documents and query-expansion
texts) cut into ~2000-character chunks by `chunk_documents`, as `moot index` does. Where a size
needs more chunks than the real ones, copies follow, each a real chunk with one word in five
replaced by a word drawn from the real corpus's own word frequencies (seeded): new documents
with the corpus's vocabulary and term statistics, not exact duplicates (which would tie). Without
``../shared`` every chunk is synthetic (words of a Zipf-like 20k-word vocabulary).

moot: the chunks are written as a JSONL corpus (one chunk a record, so chunking leaves them as
they are) and indexed by `build_index` (read, chunk, tokenise, bm25s index, write the folder,
load it back); each query goes through `Index.search(query, 10)`, the call `moot retrieve` and
the RAG answerers make, so tokenising the query and building the hits count. Also timed:
`Index.search_many` (every query in one call; no command uses it yet).
rank_bm25: ``BM25Okapi`` over the same tokens (bm25s's tokenizer, English stopwords), the query
tokenised the same way, ``get_scores`` and the top 10 by ``argsort``; its "size on disk" is its
pickle, the way rank_bm25 indexes are kept. rank_bm25 scores every document in Python per query
token, so it is timed on the first ``--slow-queries`` queries (fewer at 100k: see the output).
Queries: the BERDS dev questions (``--queries``). Per-query times are the median over
``--rounds`` rounds of the mean over the queries. Ratios: rank_bm25 / moot per query.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import sys
from pathlib import Path

import _common
import numpy as np

SHARED = _common.ROOT.parent / "shared" / "data"
QUESTIONS = SHARED / "berds" / "dev_perspective_sets.jsonl"
SIZES = (1_000, 10_000, 100_000)
K = 10


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def real_texts() -> list[str]:
    """Every real text of ``../shared/data`` this benchmark uses (empty without it)."""
    texts: list[str] = []
    if (SHARED / "debateqa" / "demo_answers.jsonl").is_file():
        texts += [r["generation"] for r in _jsonl(SHARED / "debateqa" / "demo_answers.jsonl")]
    for path in sorted((SHARED / "debatune" / "model_outputs").glob("*/*.json")):
        texts += [r["response"] for r in json.loads(path.read_text(encoding="utf-8"))]
    if (SHARED / "panelbench" / "debateart.jsonl").is_file():
        for debate in _jsonl(SHARED / "panelbench" / "debateart.jsonl"):
            texts += [s["content"] for s in debate["speeches"]]
    for path in sorted((SHARED / "compqa" / "raw_summaries").glob("*.json")):
        texts += [r["comparison"] for r in json.loads(path.read_text(encoding="utf-8"))]
    if (SHARED / "berds" / "pers_det.test.tsv").is_file():
        lines = (SHARED / "berds" / "pers_det.test.tsv").read_text(encoding="utf-8").splitlines()
        texts += sorted({line.split("\t")[2] for line in lines[1:] if line.count("\t") >= 4})
    if QUESTIONS.is_file():
        for record in _jsonl(QUESTIONS):
            texts += [e["text"] for e in record.get("gpt4_expansions", [])]
    return [t for t in texts if isinstance(t, str) and t.strip()]


def corpus_chunks(size: int) -> tuple[list[str], str]:
    """`size` chunk texts and a note on where they came from."""
    from moot.core.data.corpus import Document, chunk_documents

    texts = real_texts()
    rng = random.Random(0)
    if texts:
        docs = [Document(str(i), t) for i, t in enumerate(texts)]
        real = [c.text for c in chunk_documents(docs)]
        source = f"{len(real)} real chunks of {len(texts)} texts"
    else:
        vocab = [f"w{i}" for i in range(20_000)]
        weights = [1 / (rank + 1) for rank in range(len(vocab))]
        real = [" ".join(rng.choices(vocab, weights, k=330)) for _ in range(1_000)]
        source = "synthetic (../shared absent)"
    if size <= len(real):
        return real[:size], source
    # vectorised: 90k copies of ~300 words each would take minutes one word at a time in Python
    split = [text.split() for text in real]
    ids_of: dict[str, int] = {}
    flat = np.array([ids_of.setdefault(w, len(ids_of)) for ws in split for w in ws])
    words = np.array(list(ids_of), dtype=object)
    freq = np.bincount(flat, minlength=len(words)) / len(flat)
    ends = np.cumsum([len(ws) for ws in split])[:-1]
    draw = np.random.default_rng(0)
    chunks = list(real)
    while len(chunks) < size:
        ids = flat.copy()
        redraw = draw.random(len(ids)) < 0.2
        ids[redraw] = draw.choice(len(words), size=int(redraw.sum()), p=freq)
        for piece in np.split(words[ids], ends)[: size - len(chunks)]:
            chunks.append(" ".join(piece.tolist()))
    # a copy with longer words may pass the chunk size: cut again, as `moot index` would
    chunks = [c.text for c in chunk_documents([Document(str(i), t) for i, t in enumerate(chunks)])]
    chunks = chunks[:size]
    return chunks, f"{source} + {size - len(real)} perturbed copies (1 word in 5 redrawn)"


def query_texts(count: int) -> list[str]:
    if QUESTIONS.is_file():
        return [r["question"] for r in _jsonl(QUESTIONS)[:count]]
    rng = random.Random(1)
    return [" ".join(f"w{rng.randrange(2_000)}" for _ in range(8)) for _ in range(count)]


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=300, help="moot's queries (default 300)")
    parser.add_argument(
        "--slow-queries",
        type=int,
        default=100,
        help="rank_bm25's queries (default 100; 30 at 100k)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default 3)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chunk counts")
    parser.add_argument("--quick", action="store_true", help="1k and 10k chunks, 1 round")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes, args.rounds = [s for s in sizes if s <= 10_000], 1
    _common.offline_env()
    _common.guard_loopback()
    import bm25s
    from rank_bm25 import BM25Okapi

    from moot.core.retrieval.index import build_index

    queries = query_texts(args.queries)
    tokenize = dict(stopwords="en", return_ids=False, show_progress=False)
    print("bench_bm25: moot's BM25 index (bm25s) vs rank_bm25, same corpus, queries and tokens")
    print(f"machine: {_common.machine_note()}")
    print(f"queries: {len(queries)} BERDS dev questions, k={K}; rounds {args.rounds}")
    rows = []
    for size in sizes:
        chunks, source = corpus_chunks(size)
        slow_count = min(args.slow_queries, 30 if size >= 100_000 else args.slow_queries)
        slow_queries = queries[:slow_count]
        print(f"\n{size} chunks: {source}")
        with _common.temp_dir("moot-bench-bm25-") as folder:
            corpus = folder / "corpus.jsonl"
            corpus.write_text(
                "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(chunks)),
                encoding="utf-8",
            )
            with _common.Stopwatch() as sw:
                index = build_index(corpus, folder / "index")
            moot_build = sw.seconds
            assert len(index) == size, (len(index), size)
            moot_bytes = folder_bytes(folder / "index")
            bm25_bytes = folder_bytes(folder / "index" / "bm25")
            with _common.Stopwatch() as sw:  # the texts moot indexed, so positions match
                slow = BM25Okapi(bm25s.tokenize([c.text for c in index.chunks], **tokenize))
            slow_build = sw.seconds
            slow_bytes = len(pickle.dumps(slow, protocol=pickle.HIGHEST_PROTOCOL))

            def rank_bm25_top(query: str, slow: BM25Okapi = slow) -> list[int]:
                scores = slow.get_scores(bm25s.tokenize([query], **tokenize)[0])
                return np.argsort(-scores, kind="stable")[:K].tolist()

            times: dict[str, list[float]] = {"moot": [], "batch": [], "rank": []}
            for _ in range(args.rounds):
                with _common.Stopwatch() as sw:
                    moot_hits = [index.search(q, K) for q in queries]
                times["moot"].append(sw.seconds / len(queries))
                with _common.Stopwatch() as sw:
                    batch_hits = index.search_many(queries, K)
                times["batch"].append(sw.seconds / len(queries))
                with _common.Stopwatch() as sw:
                    slow_top = [rank_bm25_top(q) for q in slow_queries]
                times["rank"].append(sw.seconds / len(slow_queries))
            assert [[h.chunk.id for h in a] for a in moot_hits] == [
                [h.chunk.id for h in b] for b in batch_hits
            ], "search_many differs from search"
            positions = {chunk.id: i for i, chunk in enumerate(index.chunks)}
            overlap = np.mean(
                [
                    len({positions[h.chunk.id] for h in hits} & set(top)) / K
                    for hits, top in zip(moot_hits, slow_top, strict=False)
                ]
            )
        med = {name: _common.median(values) * 1000 for name, values in times.items()}
        rows.append((size, med, moot_build, slow_build, moot_bytes, bm25_bytes, slow_bytes))
        print(
            f"  query ms: moot search {med['moot']:.3f}, moot search_many {med['batch']:.3f}, "
            f"rank_bm25 {med['rank']:.2f} ({slow_count} queries)"
        )
        print(
            f"  build s: moot {moot_build:.2f} (whole folder), rank_bm25 {slow_build:.2f}; "
            f"size MB: moot {moot_bytes / 1e6:.1f} (bm25/ {bm25_bytes / 1e6:.1f}), "
            f"rank_bm25 pickle {slow_bytes / 1e6:.1f}"
        )
        print(f"  top-{K} overlap (bm25s lucene vs Okapi scoring): {overlap:.1%}")
    print("\nratios, rank_bm25 / moot per query (same run):")
    for size, med, *_ in rows:
        print(
            f"  {size:>7} chunks: search {med['rank'] / med['moot']:7.1f}x, "
            f"search_many {med['rank'] / med['batch']:7.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
