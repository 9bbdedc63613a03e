"""bm25s (moot's BM25) against rank_bm25 (the baseline): index and query time, same corpus.

Corpus: the 1000 DebateQA answers of ``../shared/data/debateqa/demo_answers.jsonl`` cut into
~2000-character chunks by `chunk_documents` (as `moot index` does), or, without ``../shared``, a
synthetic corpus of the same size drawn from a fixed vocabulary. Queries: the BERDS dev questions
(``dev_perspective_sets.jsonl``, up to ``--queries``), else synthetic ones. Both engines get the
same token lists (bm25s's tokenizer, English stopwords, no stemmer), so only BM25 itself is timed.
Index: bm25s ``BM25().index(tokens)`` vs rank_bm25 ``BM25Okapi(tokens)``. Query: bm25s one batched
``retrieve(k=10)`` vs rank_bm25 ``get_scores`` + top 10 per query. Median of ``--rounds`` runs
each, interleaved. bm25s scores with its default ``lucene`` variant, rank_bm25 with Okapi (k1 1.5,
b 0.75 both): the top-10 overlap is printed as a sanity check, not expected to be 100%.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

import _common
import numpy as np

SHARED = _common.ROOT.parent / "shared" / "data"
ANSWERS = SHARED / "debateqa" / "demo_answers.jsonl"
QUESTIONS = SHARED / "berds" / "dev_perspective_sets.jsonl"
K = 10


def corpus_texts() -> tuple[list[str], str]:
    """Chunk texts and where they came from."""
    from moot.core.data.corpus import Document, chunk_documents

    if ANSWERS.is_file():
        records = [json.loads(line) for line in ANSWERS.read_text(encoding="utf-8").splitlines()]
        docs = [Document(str(r["id"]), r["generation"]) for r in records]
        source = f"{ANSWERS.name} ({len(docs)} answers)"
    else:
        rng = random.Random(0)
        words = [f"w{i}" for i in range(20000)]
        docs = [Document(str(i), " ".join(rng.choices(words, k=330))) for i in range(1000)]
        source = "synthetic (1000 documents x 330 words, 20k-word vocabulary)"
    return [c.text for c in chunk_documents(docs)], source


def query_texts(count: int) -> list[str]:
    if QUESTIONS.is_file():
        lines = QUESTIONS.read_text(encoding="utf-8").splitlines()[:count]
        return [json.loads(line)["question"] for line in lines]
    rng = random.Random(1)
    return [" ".join(f"w{rng.randrange(20000)}" for _ in range(8)) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--queries", type=int, default=300, help="queries (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--quick", action="store_true", help="1 round, 50 queries")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.queries = 1, 50
    _common.offline_env()
    _common.guard_loopback()
    import bm25s
    from rank_bm25 import BM25Okapi

    texts, source = corpus_texts()
    queries = query_texts(args.queries)
    tokenize = dict(stopwords="en", return_ids=False, show_progress=False)
    doc_tokens = bm25s.tokenize(texts, **tokenize)
    query_tokens = bm25s.tokenize(queries, **tokenize)
    print("bench_bm25: bm25s vs rank_bm25, same tokens, same corpus and queries")
    print(f"machine: {_common.machine_note()}")
    print(f"corpus: {len(texts)} chunks from {source}; {len(queries)} queries, k={K}")

    times: dict[str, list[float]] = {name: [] for name in ("s_index", "r_index", "s_q", "r_q")}
    for _ in range(args.rounds):
        with _common.Stopwatch() as sw:
            fast = bm25s.BM25()
            fast.index(doc_tokens, show_progress=False)
        times["s_index"].append(sw.seconds)
        with _common.Stopwatch() as sw:
            slow = BM25Okapi(doc_tokens)
        times["r_index"].append(sw.seconds)
        with _common.Stopwatch() as sw:
            fast_ids, _ = fast.retrieve(query_tokens, k=K, show_progress=False, n_threads=1)
        times["s_q"].append(sw.seconds)
        with _common.Stopwatch() as sw:
            slow_ids = [np.argsort(-slow.get_scores(q), kind="stable")[:K] for q in query_tokens]
        times["r_q"].append(sw.seconds)

    overlap = np.mean(
        [
            len(set(a.tolist()) & set(b.tolist())) / K
            for a, b in zip(fast_ids, slow_ids, strict=True)
        ]
    )
    med = {name: _common.median(values) for name, values in times.items()}
    per_query = {name: med[name] / len(queries) * 1000 for name in ("s_q", "r_q")}
    print(f"{'':12}{'bm25s':>12}{'rank_bm25':>12}")
    print(f"{'index s':12}{med['s_index']:12.3f}{med['r_index']:12.3f}")
    print(f"{'query ms':12}{per_query['s_q']:12.3f}{per_query['r_q']:12.3f}")
    print(f"top-{K} overlap (lucene vs Okapi scoring): {overlap:.1%}")
    print(
        f"ratios (rank_bm25 / bm25s, median of {args.rounds}): index "
        f"{med['r_index'] / med['s_index']:.1f}x, query {med['r_q'] / med['s_q']:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
