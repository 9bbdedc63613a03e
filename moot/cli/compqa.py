"""CompQA's commands: `moot compare`, `eval compqa`, `report compqa`, `data distill-compqa`.

Nikishina et al., 2025 (arXiv:2502.14476).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.registry import Commands
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

_GENERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def register(commands: Commands) -> None:
    """Add CompQA's commands."""
    compare = commands.add(
        "compare",
        run_compare,
        "answer comparative questions in CompQA's four prompting scenarios",
        "Answer each comparative question (object1, object2, aspect; or free text, whose objects "
        "the model extracts) in one of CompQA's prompting scenarios, the paper's Figure 4 "
        "verbatim (objects and arguments filled; the figure has no aspect slot): 1 'Compare A "
        "and B', 2 a helpful assistant with an argument list, 3 an analyst's 300-word "
        "comparison with a one-word best option, 4 as 3 over the numbered arguments, cited in "
        "square brackets, 15 arguments, missing ones created and tagged [generated]. Writes "
        "OUT/<generator>_scenario_<N>.json (the file `moot eval compqa` reads); a rerun "
        "answers only what is missing.",
        plan=True,
        output=Output("compare", (claim_mark(EVAL_CLAIM),)),
    )
    compare.add_argument(
        "--questions",
        type=opt.input_file,
        metavar="FILE",
        help="JSON/JSONL of {object1, object2, aspect?} or of free-text questions, or .txt "
        "(required)",
    )
    opt.out_option(compare)
    compare.add_argument("--scenario", type=int, choices=(1, 2, 3, 4), help="(required)")
    opt.required(compare, "questions", "scenario")
    compare.add_argument(
        "--arguments",
        type=opt.input_file,
        metavar="FILE",
        help="per-object argument lists (scenarios 2, 4)",
    )
    compare.add_argument(
        "--generate-arguments",
        action="store_true",
        help="scenarios 2 and 4: ask the model for the arguments",
    )
    compare.add_argument(
        "--generator",
        metavar="NAME",
        help="the answers' generator and file name (default: the model's name)",
    )
    opt.model_options(
        compare,
        what="answering model",
        # CompQA Section 3: "We use the standard configuration and parameters for generation"
        # (no temperature or top-p is stated): none is sent, the model's own defaults apply
        temperature=None,
        max_tokens=1024,
        constrained="JSON for extraction and arguments",
        concurrency=8,
        unit="questions",
    )

    judge = commands.add(
        "compqa",
        run_eval_compqa,
        "CompQA 15-criterion rubric judge of comparative answers (total 0-19)",
        "Score each comparative answer on CompQA's 15 criteria with the paper's judge prompt "
        "(Nikishina et al., 2025). A reply that breaks the rubric gets one repair round, then "
        "counts as invalid and is never summed. Writes judged/<input name> per input, "
        "summary.json and summary.md. Reruns judge only what is missing.",
        group="eval",
        plan=True,
        output=Output("compqa", (claim_mark(EVAL_CLAIM),)),
    )
    judge.add_argument(
        "--answers",
        type=opt.input_file,
        nargs="+",
        metavar="FILE",
        help="answer files (JSON list or JSONL of {object1, object2, aspect, comparison}), e.g. "
        "`moot compare` output or CompQA raw_summaries/*.json (required)",
    )
    opt.out_option(judge)
    opt.required(judge, "answers")
    judge.add_argument(
        "--shots",
        type=int,
        choices=(0, 1, 3),
        default=0,
        help="few-shot examples before the question: the paper's Example 1, or Examples 1-3 "
        "(default 0, as the released script)",
    )
    opt.model_options(
        judge,
        flag="--judge",
        what="judge model",
        note="the paper used GPT-4",
        constrained="JSON scores",
        concurrency=16,
        unit="answers",
    )

    report = commands.add(
        "compqa",
        run_report,
        "CompQA: mean rubric scores by generator and scenario; agreement with humans",
        "Aggregate judged CompQA files (`moot eval compqa` output, or files judged elsewhere such "
        "as CompQA's evaluated_summaries) into mean total ± sample std by group, category and "
        "criterion means, and invalid-judgment counts; with --human, agreement (Pearson, "
        "Spearman, Krippendorff's alpha) with human annotation tables. Writes report.json, "
        "report.md, chart.png and heatmap.png into --out.",
        group="report",
        output=Output("report", (Mark("report.json", "generator_scenario"),)),
    )
    report.add_argument(
        "--judged", type=opt.input_file, nargs="+", metavar="FILE", help="judged files (required)"
    )
    opt.out_option(report)
    opt.required(report, "judged")
    report.add_argument(
        "--human",
        type=opt.input_file,
        action="append",
        default=[],
        metavar="FILE",
        help="human annotation table, TSV (repeatable; CompQA's evaluation_tables/*.tsv)",
    )
    report.add_argument(
        "--by",
        default="generator,scenario",
        metavar="KEYS",
        help="grouping keys, any of generator,scenario (default generator,scenario)",
    )
    out_of_range = report.add_mutually_exclusive_group()
    out_of_range.add_argument(
        "--drop-out-of-range",
        action="store_true",
        help="drop (and list) human criterion values outside their range instead of failing",
    )
    out_of_range.add_argument(
        "--keep-out-of-range",
        action="store_true",
        help="keep (and list) them in the row's total, as the paper's human columns count them",
    )
    opt.common_options(report)

    distill = commands.add(
        "distill-compqa",
        run_distill,
        "judged CompQA answers scoring at least 18 of 19 as SFT records",
        "Keep the judged comparative answers (CompQA's evaluated_summaries files) that scored at "
        "least --min-score of 19 and write them as chat SFT records. Exits 1 when none passed.",
        group="data",
        output=Output(marks=(Mark("manifest.json", "kind", "compqa-distill"),)),
    )
    distill.add_argument(
        "--judged",
        type=opt.input_file,
        nargs="+",
        metavar="FILE",
        help="judged answer files (<generator>_scenario_<N>.json, cam.json, ...) (required)",
    )
    opt.out_option(distill)
    opt.required(distill, "judged")
    distill.add_argument(
        "--min-score",
        type=float,
        default=18.0,
        metavar="S",
        help="lowest total score kept, 0-19 (default 18, the paper's threshold)",
    )
    opt.common_options(distill)
    opt.hub_options(distill, "dataset")


def _compare_inputs(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """`moot compare`'s questions (``--limit`` applied) and its context but the client."""
    from moot.core.data.compqa_inputs import ArgumentFile, load_compqa_questions
    from moot.core.data.records import name_problem
    from moot.core.errors import ConfigError
    from moot.graphs.compqa_compare import generator_name

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
    questions = runtime.limited(load_compqa_questions(args.questions), args)
    arguments = ArgumentFile(args.arguments) if args.arguments else None
    role = runtime.role_from(args, "comparer")
    generator = args.generator or generator_name(role.spec.name)
    problem = name_problem(f"{generator}_scenario_{args.scenario}.json")  # the answer file's
    if problem:
        raise ConfigError(
            f"{'--generator' if args.generator else '--model'} {generator}: {problem}"
        )
    return questions, {
        "role": role,
        "scenario": args.scenario,
        "arguments": arguments,
        "generate_arguments": args.generate_arguments,
        "constrained": runtime.constrained(args, role),
        "max_tokens": args.max_tokens,
        "seed": args.seed,
    }


def run_compare(args: argparse.Namespace) -> Result:
    """`moot compare`."""
    from moot.graphs.compqa_compare import CompareContext, compare_questions

    questions, settings = _compare_inputs(args)
    client = runtime.client_for(args, settings["role"].spec)
    ctx = CompareContext(client=client, **settings)
    run = runtime.run(
        compare_questions(
            questions,
            args.out,
            ctx,
            generator=args.generator,
            concurrency=args.concurrency,
            progress=runtime.progress_for(args, client),
        )
    )
    summary = run.summary
    outputs = {"answers": run.path} if run.path else {}
    outputs |= {"log": args.out / "answers.jsonl", "summary": args.out / "summary.json"}
    lines = [
        f"{summary['answered']}/{summary['questions']} answered (scenario {args.scenario}, "
        f"{summary['generator']}); {summary['no_arguments']} without arguments, "
        f"{summary['parse_failures']} unparsed, {summary['errors']} failed; "
        f"mean {summary['mean_answer_words']} words",
        *([f"answers {run.path}"] if run.path else []),
        f"log     {outputs['log']}\nsummary {outputs['summary']}",
    ]
    messages = []
    for record in run.records:
        name = _describe(record)
        if record["status"] == "no_arguments":
            messages.append(f"moot: no arguments for question {name}")
        elif "parse_failure" in record:
            failure = record["parse_failure"]
            messages.append(
                f"moot: question {name}: could not read the model's {failure['stage']} reply: "
                f"{failure['error']}"
            )
        elif record["status"] == "error":
            messages.append(f"moot: question {name} failed: {record['error']}")
    unanswered = run.count("no_arguments") + run.count("parse_failure")
    return runtime.finish(
        args,
        run.tallies,
        client.ledger,
        failed=bool(unanswered),
        lines=lines,
        messages=messages,
        outputs=outputs,
    )


def _describe(record: dict[str, Any]) -> str:
    """``<id> (A vs B, aspect)``, or the free text when the objects are unknown."""
    found = record.get("extracted") or record
    if found.get("object1"):
        aspect = f", {found['aspect']}" if found.get("aspect") else ""
        return f"{record['question_id']} ({found['object1']} vs {found['object2']}{aspect})"
    return f"{record['question_id']} ({record['question']!r})"


def _eval_compqa_inputs(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """`moot eval compqa`'s answer files (``--limit`` applied) and its judge."""
    from moot.graphs.compqa_eval import load_answer_files

    files = load_answer_files(args.answers)  # bad input fails before the judge is contacted
    if args.limit:
        files = _first_answers(files, args.limit)
    return files, runtime.role_from(args, "compqa_judge")


def run_eval_compqa(args: argparse.Namespace) -> Result:
    """`moot eval compqa`."""
    from moot.graphs.compqa_eval import evaluate_compqa

    files, role = _eval_compqa_inputs(args)
    judging = runtime.judging(args, role)
    constrained = runtime.constrained(args, role)
    result = runtime.run(evaluate_compqa(files, judging, shots=args.shots, constrained=constrained))
    overall = result.summary["overall"]
    outputs = {
        "judgments": args.out / "judgments.jsonl",
        "judged": args.out / "judged",
        "summary": args.out / "summary.json",
    }
    lines = [
        (args.out / "summary.md").read_text(encoding="utf-8"),
        f"judged    {outputs['judged']}",
        f"summary   {outputs['summary']}",
    ]
    if overall["invalid"]:
        runtime.note(args, f"note: {overall['invalid']} invalid judgment(s): counted, not summed")
    nothing_read = overall["invalid"] > 0 and overall["n_valid"] == 0
    return runtime.finish(
        args,
        result.tallies,
        judging.client.ledger,
        nothing_read=nothing_read,
        lines=lines,
        outputs=outputs,
    )


def _first_answers(files: list[Any], limit: int) -> list[Any]:
    """The answer files cut to their first `limit` answers in all (files left empty dropped)."""
    from dataclasses import replace

    kept = []
    for file in files:
        answers = file.answers[:limit]
        limit -= len(answers)
        if answers:
            kept.append(replace(file, answers=answers))
    return kept


def run_report(args: argparse.Namespace) -> Result:
    """`moot report compqa`."""
    from moot.core.errors import ConfigError
    from moot.core.metrics.compqa_report import check_by, report_markdown
    from moot.graphs.compqa_report import FILES, write_report

    by = check_by(args.by.split(","))
    for flag, paths in (("--judged", args.judged), ("--human", args.human)):
        resolved = [p.resolve() for p in paths]
        twice = {str(p) for p, r in zip(paths, resolved, strict=True) if resolved.count(r) > 1}
        if twice:
            raise ConfigError(f"{flag}: {', '.join(sorted(twice))} given twice")
    report = write_report(
        args.judged, args.human, by, args.out, args.drop_out_of_range, args.keep_out_of_range
    )
    lines = [
        report_markdown(report, full=False).removesuffix("\n"),
        f"wrote report.json, report.md, chart.png and heatmap.png to {args.out}",
    ]
    empty = report["overall"]["n_total"] == 0
    return runtime.finish(
        args,
        lines=lines,
        messages=["moot: no judgment has a total; see report.md for why"] if empty else [],
        failed=empty,
        outputs={name: args.out / file for name, file in FILES.items()},
    )


def run_distill(args: argparse.Namespace) -> Result:
    """`moot data distill-compqa`."""
    from moot.training.compqa_data import distill_compqa

    summary = distill_compqa(args.judged, args.out, min_score=args.min_score)
    if not summary.kept:
        return runtime.finish(
            args,
            lines=[summary.table()],
            messages=[f"moot: no answer scored >= {args.min_score:g}; nothing written"],
            failed=True,
        )
    line = (
        f"wrote {summary.kept} records to {args.out} (dataset.jsonl, dataset/, "
        f"manifest.json, README.md); {summary.duplicates} duplicate(s) dropped"
    )
    if summary.invalid_judgments:
        runtime.note(
            args, f"note: {summary.invalid_judgments} invalid or failed judgment(s) skipped"
        )
    if summary.unchecked_scores:
        runtime.note(
            args, f"note: {summary.unchecked_scores} score(s) kept unchecked: no score_dict"
        )
    outputs = {"dataset": args.out / "dataset.jsonl", "manifest": args.out / "manifest.json"}
    result = runtime.finish(args, lines=[summary.table(), line], outputs=outputs)
    return runtime.push(args, args.out, "dataset", result)
