"""`moot index` and `moot retrieve`: corpora, BM25/dense/hybrid retrieval, MMR, query expansion."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from moot.cli import (
    DEFAULT_MODEL,
    _call_options,
    _client,
    _constrained,
    _constrained_option,
    _note,
    _run_options,
)

RETRIEVE_HELP = (
    "Retrieve chunks for each question from a local index (or the web with --web) and write one "
    "JSONL record per question. With --query-expansion an LLM lists perspectives (BERDS) and "
    "the per-perspective results merge round-robin; a question whose expansion fails is "
    "recorded as failed and the command exits 1."
)


def register(commands: Any, evaluations: Any) -> None:
    """Add this module's commands to ``moot`` (`commands`) and ``moot eval`` (`evaluations`)."""
    del evaluations
    index = commands.add_parser(
        "index",
        help="chunk a corpus and build a BM25 (and dense) index",
        description="Chunk documents (JSON/JSONL records or a folder of .txt/.md/.html files) "
        "into ~2000-character chunks and write a bm25s index, and dense vectors with --dense.",
    )
    index.set_defaults(command_fn=_cmd_index)
    index.add_argument(
        "--docs", type=Path, required=True, metavar="PATH", help="corpus file/folder"
    )
    index.add_argument("--out", type=Path, required=True, metavar="DIR", help="index folder")
    index.add_argument("--chunk-chars", type=int, default=2000, metavar="N", help="default 2000")
    index.add_argument(
        "--dense",
        nargs="?",
        const="",  # the default embedder, resolved in the command (moot --help stays light)
        metavar="MODEL",
        help="also store sentence embeddings (no value: the bundled all-MiniLM-L6-v2)",
    )
    index.add_argument("--quiet", action="store_true", help="no summary")
    index.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    retrieve = commands.add_parser(
        "retrieve", help="retrieve chunks for questions", description=RETRIEVE_HELP
    )
    retrieve.set_defaults(command_fn=_cmd_retrieve)
    retrieve.add_argument("--questions", type=Path, required=True, metavar="FILE")
    retrieve.add_argument("--out", type=Path, required=True, metavar="FILE", help="output JSONL")
    retrieve.add_argument("-k", type=int, default=10, help="chunks per question (default 10)")
    retrieval_options(retrieve)
    retrieve.add_argument(
        "--query-expansion", action="store_true", help="BERDS LLM query expansion"
    )
    retrieve.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="SPEC",
        help=f"query-expansion model (default {DEFAULT_MODEL}; BERDS used GPT-4)",
    )
    _call_options(retrieve)
    _constrained_option(retrieve, "JSON for the expansion")
    _run_options(retrieve, config=False)


def _cmd_index(args: argparse.Namespace) -> int:
    from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER
    from moot.core.retrieval.index import build_index

    dense = DEFAULT_EMBEDDER if args.dense == "" else args.dense
    index = build_index(args.docs, args.out, chunk_chars=args.chunk_chars, dense=dense)
    if not args.quiet:
        m = index.manifest
        dense = f", dense vectors ({m['embedder']})" if m["embedder"] else ""
        print(f"indexed {m['documents']} documents as {m['chunks']} chunks{dense}: {args.out}")
    return 0


def _cmd_retrieve(args: argparse.Namespace) -> int:
    from moot.core.data.questions import load_questions
    from moot.core.data.records import check_out_file, write_jsonl
    from moot.core.errors import ConfigError

    if args.k < 1:
        raise ConfigError(f"-k must be a positive integer, got {args.k}")
    if args.mmr is not None and not 0 <= args.mmr <= 1:  # also rejects nan
        raise ConfigError(f"--mmr must be between 0 and 1, got {args.mmr:g}")
    inputs = [args.questions, args.index] if args.index else [args.questions]
    check_out_file(args.out, inputs)  # before query expansion pays for calls
    questions = load_questions(args.questions)
    retriever = retriever_from_args(args)
    perspectives: dict[str, Any] = {}
    if args.query_expansion:
        perspectives = _expand(args, questions)
    from moot.agents.berds_query_expansion import expanded_search

    records, failed, short = [], 0, 0
    for question in questions:
        record: dict[str, Any] = {
            "id": question.id,
            "question": question.text,
            "retriever": retriever.name,
            "k": args.k,
            "mmr": args.mmr,
            "query_expansion": args.query_expansion,
            "trusted_domains": args.trusted_domains,
        }
        if args.query_expansion:
            expansion = perspectives[question.id]
            if isinstance(expansion, Exception):
                failed += 1
                records.append({**record, "status": "error", "error": str(expansion), "chunks": []})
                continue
            if expansion.value is None:
                failed += 1
                failure = expansion.failure.to_json() if expansion.failure else expansion.raw
                records.append(
                    {**record, "status": "parse_failure", "failure": failure, "chunks": []}
                )
                continue
            names = expansion.value.perspectives
            hits = expanded_search(retriever, question.text, names, args.k)
            record["perspectives"] = names
        else:
            hits = retriever.search(question.text, args.k)
        short += len(hits) < args.k
        records.append({**record, "status": "ok", "chunks": [hit.to_json() for hit in hits]})
    write_jsonl(args.out, records)
    if short:
        print(
            f"warning: {short} of {len(questions)} question(s) got fewer than {args.k} chunks",
            file=sys.stderr,
        )
    if not args.quiet:
        print(
            f"retrieved up to {args.k} chunks for {len(questions) - failed}/{len(questions)} "
            f"questions with {retriever.name}: {args.out}"
        )
    if failed:
        print(
            f"moot: query expansion failed for {failed} question(s) (recorded with status "
            "parse_failure or error); rerun the same command to retry",
            file=sys.stderr,
        )
        return 1
    return 0


def retrieval_options(parser: argparse.ArgumentParser) -> None:
    """The flags that choose a search tool (`moot retrieve`, `moot answer`)."""
    group = parser.add_argument_group("retrieval")
    group.add_argument("--index", type=Path, metavar="DIR", help="index from moot index")
    group.add_argument("--retriever", choices=("bm25", "dense", "hybrid"), default="bm25")
    group.add_argument(
        "--embedder", metavar="MODEL", help="dense/hybrid query embedder (default: the index's)"
    )
    group.add_argument("--mmr", type=float, metavar="LAMBDA", help="MMR re-ranking, in [0, 1]")
    group.add_argument(
        "--trusted-domains", action="store_true", help="keep .edu .org .gov .info .pro URLs only"
    )
    group.add_argument("--web", action="store_true", help="Brave web search instead of --index")
    group.add_argument("--search-key-env", default="MOOT_SEARCH_API_KEY", metavar="VAR")
    group.add_argument("--search-api-base", metavar="URL", help="web search API root")


def retriever_from_args(args: argparse.Namespace) -> Any:
    """The search tool the `retrieval_options` name, checked before any model call.

    Raises:
        ConfigError: Neither or both of --index and --web, or flags that do not apply.
        InputError: A missing or damaged index.
    """
    from moot.core.errors import ConfigError

    if args.web == bool(args.index):
        raise ConfigError("give --index DIR or --web (one of them)")
    if args.web:
        if args.mmr is not None or args.embedder or args.retriever != "bm25":
            raise ConfigError("--web takes no --mmr, --embedder or --retriever")
        from moot.core.retrieval.websearch import BRAVE_API_BASE, WebSearchRetriever

        return WebSearchRetriever(
            api_key_env=args.search_key_env,
            api_base=args.search_api_base or BRAVE_API_BASE,
            trusted_domains=args.trusted_domains,
        )
    from moot.core.retrieval.index import Index, LocalRetriever

    index = Index.load(args.index)
    if args.embedder and args.retriever == "bm25":
        raise ConfigError("--embedder applies to --retriever dense or hybrid")
    return LocalRetriever(
        index,
        retriever=args.retriever,
        mmr=args.mmr,
        trusted_domains=args.trusted_domains,
        embedder=args.embedder,
    )


def _expand(args: argparse.Namespace, questions: list[Any]) -> dict[str, Any]:
    import asyncio

    from moot.agents.berds_query_expansion import expand_query
    from moot.cli import _single_role
    from moot.core.errors import ModelCallError

    role = _single_role(args, args.model, "query_expander")
    client = _client(args, role.spec)
    constrained = _constrained(args, role)

    async def one(text: str) -> Any:
        try:
            return await expand_query(client, role, text, seed=args.seed, constrained=constrained)
        except ModelCallError as exc:  # recorded for this question; the others go on
            return exc

    async def run() -> list[Any]:
        return await asyncio.gather(*(one(q.text) for q in questions))

    results = asyncio.run(run())
    total = client.ledger.total()
    _note(args, f"query expansion: {total.calls} calls ({total.cache_hits} cached)")
    return {q.id: result for q, result in zip(questions, results, strict=True)}
