"""`moot compare`: comparative answers in CompQA's four prompting scenarios."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from moot.cli import (
    DEFAULT_MODEL,
    _call_options,
    _client,
    _constrained,
    _constrained_option,
    _positive,
    _run_options,
    _single_role,
)

_GENERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def register(commands: Any, evaluations: Any) -> None:
    """Add ``moot compare`` (`evaluations` is not used)."""
    del evaluations
    compare = commands.add_parser(
        "compare",
        help="answer comparative questions in CompQA's four prompting scenarios",
        description="Answer each comparative question (object1, object2, aspect; or free text, "
        "whose objects the model extracts) in one of CompQA's prompting scenarios: 1 'Compare A "
        "and B', 2 with an argument list, 3 an analyst's 300-word structured comparison with a "
        "one-word best option, 4 as 3 with numbered arguments cited [n]. Writes "
        "OUT/<generator>_scenario_<N>.json (the file `moot eval compqa` reads); a rerun answers "
        "only what is missing.",
    )
    compare.set_defaults(command_fn=_cmd_compare)
    compare.add_argument(
        "--questions",
        type=Path,
        required=True,
        metavar="FILE",
        help="JSON/JSONL of {object1, object2, aspect?} or of free-text questions, or .txt",
    )
    compare.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    compare.add_argument("--scenario", type=int, choices=(1, 2, 3, 4), required=True)
    compare.add_argument(
        "--arguments",
        type=Path,
        metavar="FILE",
        help="per-object argument lists for scenarios 2 and 4",
    )
    compare.add_argument(
        "--generate-arguments",
        action="store_true",
        help="scenarios 2 and 4: ask the model for the arguments",
    )
    compare.add_argument(
        "--model", default=DEFAULT_MODEL, metavar="SPEC", help=f"model (default {DEFAULT_MODEL})"
    )
    compare.add_argument(
        "--generator",
        metavar="NAME",
        help="the answers' generator and file name (default: the model's name)",
    )
    compare.add_argument("--max-tokens", type=_positive, default=1024, help="budget per call")
    compare.add_argument(
        "--concurrency", type=_positive, default=8, metavar="N", help="questions in flight"
    )
    _constrained_option(compare, "JSON for extraction and arguments")
    _call_options(compare)
    _run_options(compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.compqa_inputs import ArgumentFile, load_compqa_questions
    from moot.core.errors import ConfigError
    from moot.graphs.compqa_compare import CompareContext, compare_questions

    wants = args.scenario in (2, 4)
    if not wants and (args.arguments or args.generate_arguments):
        raise ConfigError(
            f"scenario {args.scenario} uses no arguments: drop --arguments/--generate-arguments"
        )
    if wants and bool(args.arguments) == args.generate_arguments:
        raise ConfigError(
            f"scenario {args.scenario} needs --arguments FILE or --generate-arguments (one of them)"
        )
    if args.generator is not None and not _GENERATOR.fullmatch(args.generator):
        raise ConfigError(
            f"--generator must be a file-safe name (letters, digits, . _ -), got {args.generator!r}"
        )
    questions = load_compqa_questions(args.questions)
    arguments = ArgumentFile(args.arguments) if args.arguments else None
    role = _single_role(args, args.model, "comparer")
    client = _client(args, role.spec)
    ctx = CompareContext(
        client=client,
        role=role,
        scenario=args.scenario,
        arguments=arguments,
        generate_arguments=args.generate_arguments,
        constrained=_constrained(args, role),
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    run = asyncio.run(
        compare_questions(
            questions, args.out, ctx, generator=args.generator, concurrency=args.concurrency
        )
    )
    summary = run.summary
    if not args.quiet:
        total = client.ledger.total()
        print(
            f"{summary['answered']}/{summary['questions']} answered (scenario {args.scenario}, "
            f"{summary['generator']}); {summary['no_arguments']} without arguments, "
            f"{summary['parse_failures']} unparsed, {summary['errors']} failed; "
            f"mean {summary['mean_answer_words']} words"
        )
        print(f"calls {total.calls} ({total.cache_hits} cached)")
        if run.path:
            print(f"answers {run.path}")
        print(f"log     {args.out / 'answers.jsonl'}\nsummary {args.out / 'summary.json'}")
    for record in run.records:
        name = _describe(record)
        if record["status"] == "no_arguments":
            print(f"moot: no arguments for question {name}", file=sys.stderr)
        elif "parse_failure" in record:
            failure = record["parse_failure"]
            print(
                f"moot: question {name}: could not read the model's {failure['stage']} reply: "
                f"{failure['error']}",
                file=sys.stderr,
            )
        elif record["status"] == "error":
            print(f"moot: question {name} failed: {record['error']}", file=sys.stderr)
    if run.count("error"):
        print(
            f"moot: {run.count('error')} questions failed; rerun the same command to retry them",
            file=sys.stderr,
        )
    failed = run.count("error") + run.count("no_arguments") + run.count("parse_failure")
    return 1 if failed else 0


def _describe(record: dict[str, Any]) -> str:
    """``<id> (A vs B, aspect)``, or the free text when the objects are unknown."""
    found = record.get("extracted") or record
    if found.get("object1"):
        aspect = f", {found['aspect']}" if found.get("aspect") else ""
        return f"{record['question_id']} ({found['object1']} vs {found['object2']}{aspect})"
    return f"{record['question_id']} ({record['question']!r})"
