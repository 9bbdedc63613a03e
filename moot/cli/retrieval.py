"""Retrieval commands shared by DebateQA and BERDS: `moot index` and `moot retrieve`."""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import Settings, flag
from moot.core.data.folders import Mark, Output
from moot.result import Result


class Index(Job):
    """`moot index`: a corpus chunked into a BM25 (and dense) index."""

    class Settings(opt.CommonSettings):
        """`moot index`'s settings."""

        docs: Path = flag(
            parse=opt.input_path, metavar="PATH", help="corpus file/folder (required)"
        )
        out: Path = opt.out_flag("index folder")
        chunk_chars: int = flag(2000, parse=int, metavar="N", help="default 2000")
        dense: str | None = flag(
            None,
            nargs="?",
            const="",  # the default embedder, resolved in the command (moot --help stays light)
            metavar="MODEL",
            help="also store embeddings (no value: the bundled all-MiniLM-L6-v2; a sentence-"
            "transformers model, or dpr:PASSAGE,QUESTION, contriever:M, cls:M, mean:M for any "
            "Hugging Face encoder)",
        )

    settings: Settings

    def run(self) -> Result:
        """Build the index."""
        from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER
        from moot.core.retrieval.index import build_index

        given = self.settings
        dense = DEFAULT_EMBEDDER if given.dense == "" else given.dense
        index = build_index(given.docs, given.out, chunk_chars=given.chunk_chars, dense=dense)
        m = index.manifest
        dense = f", dense vectors ({m['embedder']})" if m["embedder"] else ""
        line = f"indexed {m['documents']} documents as {m['chunks']} chunks{dense}: {given.out}"
        return self.finish(lines=[line], outputs={"index": given.out})


class _Questions(Settings):
    """`moot retrieve`'s questions, output and cutoff (its flags before the search tool's)."""

    questions: Path = flag(parse=opt.input_file, metavar="FILE", help="questions (required)")
    out: Path = opt.out_flag("output JSONL", "FILE", progress=True)
    k: int = flag(10, parse=int, help="chunks per question (10)")


class _Reranking(Settings):
    """`moot retrieve`'s MMR document model and norm, and its query expansion."""

    mmr_embedder: str | None = flag(
        None,
        metavar="MODEL",
        help="MMR's document similarity model (BERDS: cls:WhereIsAI/UAE-Large-V1; default: "
        "the index's vectors, else all-MiniLM-L6-v2)",
    )
    mmr_norm: str | None = flag(
        None,
        choices=("dataset", "question"),
        help="MMR divides scores by the maximum over all questions (dataset, the default: BERDS "
        "App. B.6) or per question (question: the released reranking.py)",
    )
    query_expansion: bool = flag(False, action="store_true", help="BERDS LLM query expansion")
    expansion_prompt: str | None = flag(
        None,
        choices=("paper", "list"),
        help="the expansion's prompt: paper (the default: BERDS Table 13, a JSON object with one "
        'field per perspective) or list (moot\'s earlier one, {"perspectives": [...]})',
    )


class Retrieve(Job):
    """`moot retrieve`: chunks for each question, from a local index or the web."""

    class Settings(
        _Questions,
        opt.RetrievalSettings,
        _Reranking,
        opt.model_settings(
            what="query-expansion model",
            note="BERDS used GPT-4",
            constrained="JSON for the expansion",
            concurrency=8,
            unit="questions",
        ),
    ):
        """`moot retrieve`'s settings."""

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[list[Any], Any]:
        """The questions (``--limit`` applied) and the expansion model, if any."""
        from moot.core.data.questions import load_questions
        from moot.core.data.records import check_out_file
        from moot.core.errors import ConfigError

        given = self.settings
        if given.k < 1:
            raise ConfigError(f"-k must be a positive integer, got {given.k}")
        if given.mmr is not None and not 0 <= given.mmr <= 1:  # also rejects nan
            raise ConfigError(f"--mmr must be between 0 and 1, got {given.mmr:g}")
        reranking = (("--mmr-embedder", given.mmr_embedder), ("--mmr-norm", given.mmr_norm))
        for option, value in reranking:
            if value and given.mmr is None:
                raise ConfigError(f"{option} applies to --mmr")
        if given.expansion_prompt and not given.query_expansion:
            raise ConfigError("--expansion-prompt applies to --query-expansion")
        check_out_file(given.out)  # before query expansion pays for calls
        questions = self.limited(load_questions(given.questions))
        role = self.role("query_expander") if given.query_expansion else None
        return questions, role

    def run(self) -> Result:
        """Retrieve, expanding each question first with ``--query-expansion``."""
        from moot.graphs.berds_retrieve import QueryExpansion, retrieve_questions

        given = self.settings
        questions, role = self.inputs
        retriever = retriever_from_args(self.args)  # a dry run's (`args.planning`) too
        expansion, client = None, None
        if role is not None:
            client = runtime.client_for(self.args, role.spec)
            constrained = runtime.constrained(given, role)
            prompt = given.expansion_prompt or "paper"
            expansion = QueryExpansion(role, constrained, given.seed, prompt, client=client)
        run = runtime.run(
            retrieve_questions(
                questions,
                retriever,
                given.out,
                k=given.k,
                query_expansion=expansion,
                mmr_norm=given.mmr_norm or "dataset",
                concurrency=given.concurrency,
                progress=runtime.progress_for(self.args, client),
            )
        )
        if run.short:
            self.note(
                f"warning: {run.short} of {len(questions)} question(s) got fewer than "
                f"{given.k} chunks"
            )
        line = f"retrieved up to {given.k} chunks per question with {retriever.name}: {given.out}"
        result = self.finish(
            run.tallies,
            client.ledger if client else None,
            lines=[line],
            outputs={"retrieved": given.out},
        )
        if not run.tallies:  # no expansion: its questions are its items (its plan's), no summary
            from moot.core.runs import Tally

            result.tallies = [Tally("questions", len(questions), done=len(questions))]
        return result


def register(commands: Commands) -> None:
    """Add `moot index` and `moot retrieve`."""
    commands.add(
        "index",
        Index,
        "chunk a corpus and build a BM25 (and dense) index",
        "Chunk documents (JSON/JSONL records or a folder of .txt/.md/.html files) into "
        "~2000-character chunks and write a bm25s index, and dense vectors with --dense.",
        output=Output(marks=(Mark("index.json"),)),
    )
    commands.add(
        "retrieve",
        Retrieve,
        "retrieve chunks for questions",
        "Retrieve chunks for each question from a local index (or the web with --web) and write "
        "one JSONL record per question. With --query-expansion an LLM lists perspectives "
        "(BERDS) and the per-perspective results merge round-robin; a question whose expansion "
        "fails is recorded as failed and the command exits 1.",
        plan=True,
    )


def retriever_from_args(args: argparse.Namespace) -> Any:
    """The search tool the `RetrievalSettings` name, checked before any model call.

    A dry run's (``args.planning``) is a `StandInRetriever`: it searches nothing, loads no model
    and reads no key (the plan says which key web search needs).

    Raises:
        ConfigError: Neither or both of --index and --web, or flags that do not apply.
        InputError: A missing or damaged index.
    """
    index = search_source(args)
    if getattr(args, "planning", None) is not None:  # a dry run: nothing is searched
        return planned_retriever(args, index)
    if index is None:
        from moot.core.retrieval.websearch import BRAVE_API_BASE, WebSearchRetriever

        deadline = getattr(args, "timeout", None)  # --timeout bounds each search request too
        return WebSearchRetriever(
            api_key_env=args.search_key_env,
            api_base=args.search_api_base or BRAVE_API_BASE,
            trusted_domains=args.trusted_domains,
            **({"timeout": deadline} if deadline else {}),
        )
    from moot.core.retrieval.index import LocalRetriever

    return LocalRetriever(
        index,
        retriever=args.retriever,
        mmr=args.mmr,
        trusted_domains=args.trusted_domains,
        embedder=args.embedder,
        mmr_embedder=getattr(args, "mmr_embedder", None),
    )


def search_source(args: argparse.Namespace) -> Any:
    """The `moot.core.retrieval.index.Index` the `RetrievalSettings` name, checked (None: --web).

    Everything `retriever_from_args` checks, without loading an embedder or reading a key: a
    dry run's plan asks here.

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
        return None
    from moot.core.retrieval.index import Index

    index = Index.load(args.index)
    if args.embedder and args.retriever == "bm25":
        raise ConfigError("--embedder applies to --retriever dense or hybrid")
    if args.mmr is not None and not 0 <= args.mmr <= 1:  # also rejects nan
        raise ConfigError(f"--mmr must be between 0 and 1, got {args.mmr:g}")
    if args.retriever != "bm25":
        index.check_embedder(args.embedder or index.embedder)
    return index


def web_key(args: argparse.Namespace) -> tuple[str, str]:
    """What web search needs from the environment, as a plan's key line (never its value)."""
    from moot.core.retrieval.websearch import WebSearchRetriever

    given = "set" if os.environ.get(args.search_key_env) else "not set"
    return WebSearchRetriever.name, f"{args.search_key_env} ({given})"


def planned_retriever(args: argparse.Namespace, index: Any) -> Any:
    """A dry run's search tool (`args.planning` set): it never searches.

    No embedder is loaded and no key read (the plan says which key web search would need).

    Args:
        args: The parsed command line.
        index: `search_source`'s index (None: --web).
    """
    from moot.core.retrieval.stand_in import StandInRetriever
    from moot.graphs.debateqa_answer import search_identity

    trusted = getattr(args, "trusted_domains", False)
    lam = getattr(args, "mmr", None)
    if index is None:
        from moot.core.retrieval.websearch import WebSearchRetriever

        args.planning.keys.append(web_key(args))
        name = WebSearchRetriever.name
        return StandInRetriever(name, None, search_identity(name, trusted), trusted_domains=trusted)
    identity = search_identity(args.retriever, trusted, lam, index.manifest)
    return StandInRetriever(
        args.retriever, index.chunks, identity, lam=lam, trusted_domains=trusted
    )
