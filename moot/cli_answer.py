"""`moot answer` (plain, RAG, ReAct RAG) and `moot curate` (DebateQA partial answers)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from moot.cli import DEFAULT_MODEL, _call_options, _client, _positive, _run_options, _single_role
from moot.cli_retrieval import retrieval_options, retriever_from_args

PROMPT_CHOICES = ("basic", "comprehensive", "detailed")


def register(commands: Any, evaluations: Any) -> None:
    """Add ``moot answer`` and ``moot curate`` (`evaluations` is not used)."""
    del evaluations
    answer = commands.add_parser(
        "answer",
        help="answer debatable questions: plain, vanilla RAG or ReAct RAG (DebateQA)",
        description="Answer each question with DebateQA's system prompts, alone (plain), with "
        "the top-k chunks of an index (rag), or as a ReAct agent that searches up to 3 times "
        "(react). One record per question in OUT/answers.jsonl; a rerun answers only what is "
        "missing.",
    )
    answer.set_defaults(command_fn=_cmd_answer)
    answer.add_argument("--questions", type=Path, required=True, help="questions file")
    answer.add_argument("--out", type=Path, required=True, help="output folder")
    answer.add_argument("--mode", choices=("plain", "rag", "react"), default="plain")
    answer.add_argument(
        "--prompt", choices=PROMPT_CHOICES, default="basic", help="system prompt (default basic)"
    )
    retrieval_options(answer)
    answer.add_argument("-k", type=_positive, default=10, help="chunks for --mode rag (10)")
    answer.add_argument("--search-k", type=_positive, default=3, help="chunks per ReAct search (3)")
    answer.add_argument(
        "--max-searches",
        type=_positive,
        default=3,
        help="ReAct searches, the first on the question (3)",
    )
    _model_flags(answer, concurrency=8)
    _run_options(answer)

    curate = commands.add_parser(
        "curate",
        help="curate partial answers (points of view + explanations) from documents (DebateQA)",
        description="DebateQA Algorithm 1: for each question, retrieve documents, extract the "
        "points of view they hold, explain each in at most 300 words from its documents, and drop "
        "near-duplicate POVs. Writes OUT/partial_answers.jsonl, the file `moot eval pd` reads.",
    )
    curate.set_defaults(command_fn=_cmd_curate)
    curate.add_argument("--questions", type=Path, required=True, help="questions file")
    curate.add_argument(
        "--docs",
        type=Path,
        required=True,
        help="a `moot index` folder, or a corpus (indexed into OUT/index with BM25)",
    )
    curate.add_argument("--out", type=Path, required=True, help="output folder")
    curate.add_argument(
        "--documents", type=_positive, default=10, help="documents retrieved per question (10)"
    )
    curate.add_argument(
        "--threshold",
        type=float,
        default=0.75,
        help="POVs more similar than this (cosine) are duplicates (0.75, the paper's)",
    )
    curate.add_argument(
        "--embedder", default=None, help="sentence embedder for duplicates (all-MiniLM-L6-v2)"
    )
    _model_flags(curate, concurrency=4)
    _run_options(curate)


def _model_flags(parser: argparse.ArgumentParser, concurrency: int) -> None:
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, metavar="SPEC", help=f"model (default {DEFAULT_MODEL})"
    )
    parser.add_argument("--max-tokens", type=_positive, default=1024, help="budget per call")
    parser.add_argument(
        "--concurrency", type=_positive, default=concurrency, help="questions in flight"
    )
    _call_options(parser)


def _cmd_answer(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.questions import load_questions
    from moot.core.errors import ConfigError
    from moot.graphs.debateqa_answer import AnswerContext, answer_questions

    questions = load_questions(args.questions)
    retriever = None
    if args.mode != "plain":
        if not (args.index or args.web):
            raise ConfigError(f"--mode {args.mode} needs --index DIR (or --web)")
        retriever = retriever_from_args(args)
    elif args.index or args.web:
        raise ConfigError("--mode plain retrieves nothing: drop --index/--web or use rag/react")
    role = _single_role(args, args.model, "answerer")
    client = _client(args, role.spec)
    ctx = AnswerContext(
        client=client,
        role=role,
        mode=args.mode,
        prompt=args.prompt,
        retriever=retriever,
        k=args.k,
        search_k=args.search_k,
        max_searches=args.max_searches,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    run = asyncio.run(answer_questions(questions, args.out, ctx, concurrency=args.concurrency))
    summary = run.summary
    if not args.quiet:
        print(
            f"{summary['answered']}/{summary['questions']} answered ({args.mode}, {args.prompt}); "
            f"mean {summary['mean_answer_words']} words"
        )
        print(f"answers {args.out / 'answers.jsonl'}\nsummary {args.out / 'summary.json'}")
    if run.errors:
        print(
            f"moot: {run.errors} questions failed; rerun the same command to retry them",
            file=sys.stderr,
        )
    return 1 if run.errors else 0


def _cmd_curate(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.questions import load_questions
    from moot.core.errors import ConfigError
    from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER, Embedder
    from moot.core.retrieval.index import Index, LocalRetriever, build_index
    from moot.graphs.debateqa_curate import CurateContext, curate

    if not 0 < args.threshold <= 1:
        raise ConfigError(f"--threshold must be in (0, 1], got {args.threshold:g}")
    questions = load_questions(args.questions)
    if (args.docs / "index.json").is_file():
        index = Index.load(args.docs)
    elif (args.out / "index" / "index.json").is_file():
        index = Index.load(args.out / "index")  # built by an earlier run of this command
    else:
        index = build_index(args.docs, args.out / "index")
    role = _single_role(args, args.model, "curator")
    client = _client(args, role.spec)
    ctx = CurateContext(
        client=client,
        role=role,
        retriever=LocalRetriever(index),
        embedder=Embedder(args.embedder or DEFAULT_EMBEDDER),
        documents=args.documents,
        threshold=args.threshold,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    run = asyncio.run(curate(questions, args.out, ctx, concurrency=args.concurrency))
    summary = run.summary
    if not args.quiet:
        print(
            f"{summary['curated']}/{summary['questions']} questions curated: "
            f"{summary['povs_extracted']} POVs, {summary['duplicates_removed']} duplicates removed"
        )
        print(f"partial answers {args.out / 'partial_answers.jsonl'}")
    if run.unparsed:
        print(
            f"moot: {run.unparsed} questions got no readable POV list (see curation.jsonl)",
            file=sys.stderr,
        )
    if run.errors:
        print(
            f"moot: {run.errors} questions failed; rerun the same command to retry them",
            file=sys.stderr,
        )
    return 1 if run.errors or run.unparsed else 0
