"""`moot eval da`, `moot eval berds` and `moot eval detector`: LLM-judged DebateQA/BERDS metrics."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from moot.cli import (
    DEFAULT_MODEL,
    _call_options,
    _client,
    _judge_exit,
    _positive,
    _run_options,
    _single_role,
)


def register(commands: Any, evaluations: Any) -> None:
    """Add this module's commands to ``moot`` (`commands`) and ``moot eval`` (`evaluations`)."""
    del commands
    da = evaluations.add_parser(
        "da",
        help="DebateQA Dispute Awareness: share of answers that say the question is debated",
        description="Judge each answer with DebateQA's few-shot 0/1 prompt, reading only the "
        "judge's reply. Reruns judge only what is missing.",
    )
    da.set_defaults(command_fn=_cmd_da)
    da.add_argument("--answers", type=Path, required=True, help="answers (id, answer|generation)")
    da.add_argument(
        "--questions",
        type=Path,
        help="questions joined by id, for answers without a 'question' field",
    )
    _judge_options(da, "--judge", DEFAULT_MODEL, "the paper used MiniCPM-2B / Phi-3 mini")

    berds = evaluations.add_parser(
        "berds",
        help="BERDS MRecall@k and Precision@k of retrieved documents",
        description="Ask a detector whether each top-k document supports each gold perspective "
        "(the BERDS Yes/No prompt), then score MRecall@k and Precision@k per question.",
    )
    berds.set_defaults(command_fn=_cmd_berds)
    berds.add_argument("--retrieved", type=Path, required=True, help="`moot retrieve` output")
    berds.add_argument(
        "--perspectives", type=Path, required=True, help="questions with 'perspectives' (by id)"
    )
    berds.add_argument("-k", type=_positive, required=True, help="cutoff (the paper used 5 and 10)")
    _judge_options(berds, "--detector", DEFAULT_MODEL, "the paper used GPT-4 / Mistral-7B")

    detector = evaluations.add_parser(
        "detector",
        help="accuracy and F1 of a perspective detector on labelled BERDS pairs",
        description="Score a detector on a TSV of (question, id, document, perspective, label).",
    )
    detector.set_defaults(command_fn=_cmd_detector)
    detector.add_argument("--pairs", type=Path, required=True, help="BERDS pers_det TSV")
    _judge_options(detector, "--detector", None, "required")


def _judge_options(
    parser: argparse.ArgumentParser, flag: str, default: str | None, note: str
) -> None:
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument(
        flag,
        default=default,
        required=default is None,
        metavar="SPEC",
        dest="judge",
        help=f"model spec ({f'default {default}; ' if default else ''}{note})",
    )
    _call_options(parser)
    parser.add_argument("--concurrency", type=_positive, default=16, help="calls in flight")
    _run_options(parser, config=False)


def _cmd_da(args: argparse.Namespace) -> int:
    from moot.core.data.questions import load_answers, load_questions
    from moot.graphs.debateqa_eval import evaluate_dispute_awareness, with_questions

    questions = load_questions(args.questions) if args.questions else []
    answers = with_questions(load_answers(args.answers), args.answers, questions, args.questions)
    sources = {"answers": str(args.answers)}
    if args.questions:
        sources["questions"] = str(args.questions)
    role = _single_role(args, args.judge, "da_judge")
    run = evaluate_dispute_awareness(
        answers,
        args.out,
        role,
        _client(args, role.spec),
        concurrency=args.concurrency,
        seed=args.seed,
    )
    return _finish(args, run, sources)


def _cmd_berds(args: argparse.Namespace) -> int:
    from moot.core.data.questions import load_questions
    from moot.graphs.debateqa_eval import evaluate_berds, join_perspectives, load_retrieved

    retrieved = load_retrieved(args.retrieved)
    questions = load_questions(args.perspectives)
    instances = join_perspectives(retrieved, args.retrieved, questions, args.perspectives, args.k)
    sources = {"retrieved": str(args.retrieved), "perspectives": str(args.perspectives)}
    role = _single_role(args, args.judge, "perspective_detector")
    run = evaluate_berds(
        instances,
        args.out,
        role,
        _client(args, role.spec),
        k=args.k,
        concurrency=args.concurrency,
        seed=args.seed,
    )
    return _finish(args, run, sources, "scores.jsonl")


def _cmd_detector(args: argparse.Namespace) -> int:
    from moot.graphs.debateqa_eval import evaluate_detector, load_pairs

    pairs = load_pairs(args.pairs)
    role = _single_role(args, args.judge, "perspective_detector")
    run = evaluate_detector(
        pairs,
        args.out,
        role,
        _client(args, role.spec),
        concurrency=args.concurrency,
        seed=args.seed,
    )
    return _finish(args, run, {"pairs": str(args.pairs)})


def _finish(args: argparse.Namespace, run: Any, sources: dict[str, str], *extra: str) -> int:
    import asyncio

    from moot.graphs.debateqa_eval import write_summary

    result = asyncio.run(run)
    text = write_summary(result, args.out, sources)
    if not args.quiet:
        print(text)
        for name in ("judgments.jsonl", *extra, "summary.json"):
            print(f"{name:<16} {args.out / name}")
    return _judge_exit(result.errors, result.nothing_read)
