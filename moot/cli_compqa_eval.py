"""`moot eval compqa`: judge comparative answers with CompQA's 15-criterion rubric."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from moot.cli import (
    DEFAULT_MODEL,
    _call_options,
    _client,
    _constrained,
    _constrained_option,
    _judge_exit,
    _note,
    _positive,
    _run_options,
    _single_role,
)


def register(commands: Any, evaluations: Any) -> None:
    """Add this module's commands to ``moot`` (`commands`) and ``moot eval`` (`evaluations`)."""
    del commands
    compqa = evaluations.add_parser(
        "compqa",
        help="CompQA 15-criterion rubric judge of comparative answers (total 0-19)",
        description="Score each comparative answer on CompQA's 15 criteria with the paper's "
        "judge prompt (Nikishina et al., 2025). A reply that breaks the rubric gets one repair "
        "round, then counts as invalid and is never summed. Writes judged/<input name> per "
        "input, summary.json and summary.md. Reruns judge only what is missing.",
    )
    compqa.set_defaults(command_fn=_cmd_compqa)
    compqa.add_argument(
        "--answers",
        type=Path,
        nargs="+",
        required=True,
        metavar="FILE",
        help="answer files (JSON list or JSONL of {object1, object2, aspect, comparison}), "
        "e.g. `moot compare` output or CompQA raw_summaries/*.json",
    )
    compqa.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    compqa.add_argument(
        "--judge",
        default=DEFAULT_MODEL,
        metavar="SPEC",
        help=f"judge model (default {DEFAULT_MODEL}; the paper used GPT-4)",
    )
    compqa.add_argument(
        "--shots",
        type=int,
        choices=(0, 1, 3),
        default=0,
        help="few-shot examples before the question: the paper's Example 1, or Examples 1-3 "
        "(default 0, as the released script)",
    )
    _call_options(compqa)
    compqa.add_argument("--concurrency", type=_positive, default=16, help="answers judged at once")
    _constrained_option(compqa, "JSON scores")
    _run_options(compqa, config=False)


def _cmd_compqa(args: argparse.Namespace) -> int:
    import asyncio

    from moot.graphs.compqa_eval import evaluate_compqa, load_answer_files

    files = load_answer_files(args.answers)  # bad input fails before the judge is contacted
    role = _single_role(args, args.judge, "compqa_judge")
    constrained = _constrained(args, role)
    client = _client(args, role.spec)
    result = asyncio.run(
        evaluate_compqa(
            files,
            args.out,
            role,
            client,
            shots=args.shots,
            concurrency=args.concurrency,
            seed=args.seed,
            constrained=constrained,
        )
    )
    overall = result.summary["overall"]
    if not args.quiet:
        print((args.out / "summary.md").read_text(encoding="utf-8"))
        print(f"judged    {args.out / 'judged'}")
        print(f"summary   {args.out / 'summary.json'}")
    if overall["invalid"]:
        _note(args, f"note: {overall['invalid']} invalid judgment(s): counted, not summed")
    nothing_read = overall["invalid"] > 0 and overall["n_valid"] == 0
    return _judge_exit(overall["errors"], nothing_read)
