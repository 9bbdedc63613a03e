"""Debatrix's commands: `moot judge`, `moot eval panelbench` (Liang et al., ACL 2024)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.registry import Commands
from moot.core.data.folders import Mark, Output, claim_mark
from moot.result import Result

FRAMEWORK_NAMES = ("debatrix", "non-iterative", "chronological", "dimensional", "direct")
PAPER_WINDOW = 16385  # ChatGPT's, gpt-3.5-turbo-0125 (paper, Sec. 5.1)


def register(commands: Commands) -> None:
    """Add Debatrix's commands."""
    judge = commands.add(
        "judge",
        run_judge,
        "judge debates speech by speech (Debatrix) or with a baseline framework",
        "Judge each debate per dimension, speech by speech with memory (Debatrix), and combine "
        "the dimensions in a panel; or use one of the paper's baselines. Debates come from a "
        "JSON/JSONL file (moot's schema, PanelBench, or a `moot debate` run's debates.jsonl) or "
        "a DebateArt folder. Writes judgments.jsonl, summary.json and a report per judgment; "
        "reruns resume.",
        plan=True,
        output=Output("judge", (claim_mark("judge"),)),
    )
    judge.add_argument(
        "--debates",
        type=opt.input_path,
        help="debates: JSON/JSONL file or DebateArt folder (required)",
    )
    opt.out_option(judge)
    opt.required(judge, "debates")
    judge.add_argument("--framework", choices=FRAMEWORK_NAMES, default="debatrix")
    judge.add_argument(
        "--dimensions",
        type=opt.names,
        metavar="A,B,...",
        help="dimensions of split frameworks (default argument,source,language; "
        "BP: argument,support,clash,language)",
    )
    judge.add_argument(
        "--weights",
        type=opt.weights,
        metavar="A=W,...",
        help="panel weights (default: the paper's)",
    )
    judge.add_argument(
        "--scoring",
        choices=("paper", "released"),
        default="paper",
        help="a debater's comment, then a second call for its 1-10 integer score (paper, "
        "Sec. 5.1), or both in one call (the released code)",
    )
    judge.add_argument("--repeats", type=opt.positive, default=1, help="judgments per debate")
    judge.add_argument("--analysis-tokens", type=opt.positive, default=1024, metavar="N")
    judge.add_argument("--judgment-tokens", type=opt.positive, default=1536, metavar="N")
    judge.add_argument("--extraction-tokens", type=opt.positive, default=384, metavar="N")
    judge.add_argument("--report", choices=("md", "html"), default="md", help="report format")
    opt.model_options(
        judge,
        flag="--judge",
        what="judge model",
        note="the paper used ChatGPT and GPT-4",
        constrained="JSON scores and winners",
        concurrency=4,
        unit="debates",
    )
    window = next(a for a in judge._actions if a.dest == "context_window")
    window.help = (
        f"the judge's context window (default {PAPER_WINDOW}, ChatGPT's in the paper; "
        "local/*: its server's)"
    )

    panelbench = commands.add(
        "panelbench",
        run_panelbench,
        "score `moot judge` outputs against PanelBench gold (DebateArt RMSE, BP accuracy)",
        "RMSE x 100 of final and dimensional verdicts against DebateArt gold, from debater "
        "scores and from named winners; BP accuracy, completion and winners' positions. "
        "Unparsed, incomplete, failed and unjudged items are counted, never imputed.",
        group="eval",
        output=Output("panelbench", (Mark("summary.json", "evaluation", "panelbench"),)),
    )
    panelbench.add_argument(
        "--predictions",
        type=opt.input_folder,
        nargs="+",
        metavar="DIR",
        help="`moot judge` output folders, one per framework (required)",
    )
    panelbench.add_argument(
        "--gold",
        type=opt.input_path,
        help="debates with gold: JSON/JSONL or DebateArt folder (required)",
    )
    opt.required(panelbench, "predictions", "gold")
    opt.out_option(
        panelbench, default="DIR.panelbench beside the first DIR's run", resolve=_panelbench_out
    )
    panelbench.add_argument(
        "--tie-margin",
        type=float,
        default=3.0,
        metavar="POINTS",
        help="source and language scores within this are a tie (default 3, the paper's)",
    )
    opt.common_options(panelbench)


def _judge_inputs(args: argparse.Namespace) -> tuple[Any, int, Any]:
    """`moot judge`'s debates (``--limit`` applied), how many were skipped, its settings."""
    from moot.agents.debatrix_judges import FRAMEWORKS
    from moot.core.data.debates import load_debates
    from moot.graphs.debatrix_run import JudgeSettings

    if args.context_window is None and not args.model.startswith("local/"):
        args.context_window = PAPER_WINDOW  # the window Debatrix is built for (Sec. 5.1)
    debates = load_debates(args.debates)
    skipped = debates.skipped  # `moot debate` records that did not finish
    debates = runtime.limited(debates, args)
    role = runtime.role_from(args, "judge")
    settings = JudgeSettings(
        role=role,
        framework=FRAMEWORKS[args.framework],
        dimensions=args.dimensions,
        weights=args.weights or {},
        seed=args.seed,
        constrained=runtime.constrained(args, role),
        analysis_tokens=args.analysis_tokens,
        judgment_tokens=args.judgment_tokens,
        extraction_tokens=args.extraction_tokens,
        scoring=args.scoring,
    )
    settings.plan(debates)  # bad dimensions fail before the judge is contacted
    return debates, skipped, settings


def run_judge(args: argparse.Namespace) -> Result:
    """`moot judge`."""
    from moot.graphs.debatrix_run import judge_debates

    debates, skipped, settings = _judge_inputs(args)
    role = settings.role
    client = runtime.client_for(args, role.spec)
    if skipped:
        runtime.note(args, f"note: {skipped} debate(s) not judged: their status is not ok")
    summary = runtime.run(
        judge_debates(
            debates,
            args.out,
            settings,
            client,
            repeats=args.repeats,
            concurrency=args.concurrency,
            report_format=args.report,
            progress=runtime.progress_for(args, client),
        )
    )
    if getattr(args, "planning", None) is not None:  # a dry run: what its stand-ins could not fit
        for _ in range(summary.count("incomplete")):
            args.planning.noted(
                "{calls} judgments are left incomplete: a prompt of theirs does not fit the "
                f"judge's {role.spec.context_window}-token window with every earlier reply at "
                "its full budget (their later calls are not counted)"
            )
    out = args.out
    outputs = {
        "judgments": out / "judgments.jsonl",
        "summary": out / "summary.json",
        "reports": out / "reports",
    }
    lines = [
        f"judged {len(summary.records)}: {summary.count('complete')} complete, "
        f"{summary.count('incomplete')} incomplete (prompt over the context window), "
        f"{summary.count('error')} failed; {summary.parse_failures} unparsed scores or winners",
        f"judgments {outputs['judgments']}\nsummary   {outputs['summary']}",
        f"reports   {outputs['reports']}",
    ]
    failures = [
        f"moot: failed {record['debate']}: {record['reason']}"
        for record in summary.records
        if record["status"] == "error"
    ]
    return runtime.finish(
        args,
        summary.tallies,
        client.ledger,
        nothing_read=summary.nothing_read,
        lines=lines,
        messages=failures,
        outputs=outputs,
    )


def run_panelbench(args: argparse.Namespace) -> Result:
    """`moot eval panelbench`."""
    from moot.core.errors import ConfigError
    from moot.core.metrics.panelbench import (
        TIE_MARGINS,
        evaluate_panelbench,
        write_panelbench_report,
    )

    if not args.tie_margin >= 0:  # also rejects nan
        raise ConfigError(f"--tie-margin must be 0 or more, got {args.tie_margin:g}")
    margins = {name: args.tie_margin for name in TIE_MARGINS}
    summary = evaluate_panelbench(args.predictions, args.gold, margins=margins)
    out = args.out
    write_panelbench_report(summary, out)
    outputs = {"summary": out / "summary.json", "chart": out / "chart.png"}
    lines = [
        (out / "summary.md").read_text(encoding="utf-8"),
        f"summary {outputs['summary']}\nchart   {outputs['chart']}",
    ]
    return runtime.finish(args, lines=lines, outputs=outputs)


def _panelbench_out(args: argparse.Namespace) -> Path:
    """`moot eval panelbench`'s default folder: ``DIR.panelbench`` beside the first DIR's run.

    Outside every run folder: the judge's, or the `moot run` folder holding it
    (`moot.core.data.folders.beside_runs`).
    """
    from moot.core.data.folders import beside_runs

    return beside_runs(args.predictions[0], ".panelbench")
