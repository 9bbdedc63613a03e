"""BERDS's commands: `moot eval berds` and `moot eval detector` (Chen et al., 2024)."""

from __future__ import annotations

import argparse
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.registry import Commands
from moot.core.data.folders import EVAL_CLAIM, Output, claim_mark
from moot.result import Result


def register(commands: Commands) -> None:
    """Add BERDS's evaluations."""
    berds = commands.add(
        "berds",
        run_berds,
        "BERDS MRecall@k and Precision@k of retrieved documents",
        "Ask a detector whether each top-k document supports each gold perspective (the BERDS "
        "Yes/No prompt), then score MRecall@k and Precision@k per question.",
        group="eval",
        plan=True,
        output=Output("berds", (claim_mark(EVAL_CLAIM),)),
    )
    berds.add_argument(
        "--retrieved",
        type=opt.input_file,
        help="`moot retrieve` output, or BERDS' released layout ({perspectives, ctxs}) (required)",
    )
    berds.add_argument(
        "--perspectives",
        type=opt.input_file,
        help="questions with 'perspectives', joined by id (for records without their own)",
    )
    berds.add_argument("-k", type=opt.positive, help="cutoff (the paper used 5 and 10; required)")
    _prompt_option(berds)
    opt.out_option(berds)
    opt.required(berds, "retrieved", "k")
    opt.model_options(
        berds,
        flag="--detector",
        what="perspective detector",
        note="the paper used GPT-4 / Mistral-7B",
        concurrency=16,
        unit="questions",
    )

    detector = commands.add(
        "detector",
        run_detector,
        "accuracy and F1 of a perspective detector on labelled BERDS pairs",
        "Score a detector on a TSV of (question, id, document, perspective, label).",
        group="eval",
        plan=True,
        output=Output("detector", (claim_mark(EVAL_CLAIM),)),
    )
    detector.add_argument("--pairs", type=opt.input_file, help="BERDS pers_det TSV (required)")
    _prompt_option(detector)
    opt.out_option(detector)
    opt.required(detector, "pairs")
    opt.model_options(
        detector,
        flag="--detector",
        what="the detector under test",
        default=None,
        concurrency=16,
        unit="pairs",
    )


def _prompt_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--detector-prompt",
        choices=("zero-shot", "one-shot", "one-shot-released"),
        default="zero-shot",
        help="BERDS Table 15 prompt: zero-shot (default), one-shot (the paper's GPT-4 one-shot), "
        "one-shot-released (the released file's system turn)",
    )


def _berds_inputs(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """`moot eval berds`'s instances (``--limit`` applied) and the detector."""
    from moot.core.data.questions import load_questions
    from moot.graphs.berds_eval import join_perspectives, load_retrieved

    retrieved = runtime.limited(load_retrieved(args.retrieved), args)
    questions = load_questions(args.perspectives) if args.perspectives else None
    instances = join_perspectives(retrieved, args.retrieved, questions, args.perspectives, args.k)
    return instances, runtime.role_from(args, "perspective_detector")


def run_berds(args: argparse.Namespace) -> Result:
    """`moot eval berds`."""
    from moot.graphs.berds_eval import evaluate_berds
    from moot.graphs.judging import write_summary

    instances, role = _berds_inputs(args)
    judging = runtime.judging(args, role)
    result = runtime.run(evaluate_berds(instances, judging, k=args.k, prompt=args.detector_prompt))
    sources = {"retrieved": str(args.retrieved)}
    if args.perspectives:
        sources["perspectives"] = str(args.perspectives)
    return _report(
        args, result, write_summary(result, args.out, sources), judging.client, "scores.jsonl"
    )


def run_detector(args: argparse.Namespace) -> Result:
    """`moot eval detector`."""
    from moot.graphs.berds_eval import evaluate_detector, load_pairs
    from moot.graphs.judging import write_summary

    pairs = runtime.limited(load_pairs(args.pairs), args)
    role = runtime.role_from(args, "perspective_detector")
    judging = runtime.judging(args, role)
    result = runtime.run(evaluate_detector(pairs, judging, prompt=args.detector_prompt))
    return _report(
        args, result, write_summary(result, args.out, {"pairs": str(args.pairs)}), judging.client
    )


def _report(args: argparse.Namespace, result: Any, text: str, client: Any, *extra: str) -> Result:
    names = ("judgments.jsonl", *extra, "summary.json")
    lines = [text, *(f"{name:<16} {args.out / name}" for name in names)]
    return runtime.finish(
        args,
        result.tallies,
        client.ledger,
        nothing_read=result.nothing_read,
        lines=lines,
        outputs={name.partition(".")[0]: args.out / name for name in names},
    )
