"""`moot eval pd`: DebateQA Perspective Diversity with a local causal LM."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from moot.cli import _positive

VARIANTS = ("paper", "released")


def register(commands: Any, evaluations: Any) -> None:
    """Add this module's commands to ``moot`` (`commands`) and ``moot eval`` (`evaluations`)."""
    del commands
    pd = evaluations.add_parser(
        "pd",
        help="DebateQA Perspective Diversity: perplexity of partial answers given the answer",
        description="P.D. = sum over a question's partial answers of their perplexity under a "
        "local causal LM, conditioned on the answer + 'Please restate.' in the scorer's chat "
        "template (lower is better). --variant released reproduces DebateQA's released script "
        "(mean, no instruction, context in the denominator, answers over the window score 1.0). "
        "Reruns score only what is missing.",
    )
    pd.set_defaults(command_fn=_cmd_pd)
    pd.add_argument("--answers", type=Path, required=True, help="answers (id, answer|generation)")
    pd.add_argument(
        "--partial-answers",
        type=Path,
        required=True,
        help="questions with partial_answers [{POV, Explanation}] (by id)",
    )
    pd.add_argument(
        "--scorer",
        default="gpt2",
        metavar="HF_MODEL_OR_PATH",
        help="model folder, cached hub id or local/smollm2 (default gpt2, as the paper; "
        "nothing is downloaded)",
    )
    pd.add_argument("--variant", choices=VARIANTS, default="paper", help="default paper")
    pd.add_argument(
        "--batch-size", type=_positive, default=8, metavar="N", help="partial answers per pass"
    )
    pd.add_argument(
        "--max-length",
        type=_positive,
        metavar="TOKENS",
        help="scoring window (default: the scorer's context length)",
    )
    pd.add_argument(
        "--out",
        type=Path,
        help="output folder (default: ANSWERS_STEM.pd-VARIANT-SCORER next to the answers)",
    )
    pd.add_argument("--quiet", action="store_true", help="print nothing but errors")
    pd.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def _cmd_pd(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a scorer at run time
    from moot.core.data.questions import load_answers, load_partial_answers

    answers = load_answers(args.answers)
    partial_sets = load_partial_answers(args.partial_answers)
    from moot.core.metrics import perspective_diversity as pdm

    pairs, unused = pdm.match_answers(answers, partial_sets, args.answers, args.partial_answers)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(args.scorer).name or args.scorer)
    out = args.out or args.answers.with_name(f"{args.answers.stem}.pd-{args.variant}-{slug}")
    if unused and not args.quiet:
        print(
            f"note: {len(unused)} partial-answer sets have no answer (first: id {unused[0]})",
            file=sys.stderr,
        )
    claim = {
        "evaluation": "perspective_diversity",
        "scorer": pdm.scorer_identity(args.scorer),
        "variant": args.variant,
        "max_length": args.max_length,
    }
    window: list[int] = []

    def make_scorer() -> pdm.PerspectiveDiversityScorer:
        from transformers.utils import logging

        logging.disable_progress_bar()
        scorer = pdm.PerspectiveDiversityScorer(
            args.scorer, args.variant, batch_size=args.batch_size, max_length=args.max_length
        )
        window.append(scorer.window)
        return scorer

    bar = _Progress(args.quiet)
    records, scored = pdm.evaluate(pairs, out, make_scorer, claim, bar.update)
    bar.close()
    summary = pdm.summarize(
        records,
        variant=args.variant,
        scorer=args.scorer,
        scorer_identity=claim["scorer"],
        window=_window(out, window),
        partial_answer_sets_without_answer=len(unused),
        sources={"answers": str(args.answers), "partial_answers": str(args.partial_answers)},
        versions=_versions(),
    )
    pdm.write_report(summary, out)
    if not args.quiet:
        print((out / "summary.md").read_text(encoding="utf-8"))
        print(
            f"scores {out / 'scores.jsonl'}\nscored {scored} answers, {len(records) - scored} kept"
        )
    if summary["errors"]:
        print(
            f"moot: {summary['errors']} answers could not be scored (a partial answer longer "
            f"than the window); see 'error' in {out / 'scores.jsonl'}",
            file=sys.stderr,
        )
    return 1 if summary["errors"] else 0


def _window(out: Path, window: list[int]) -> int | None:
    """This run's window, else the one a previous run recorded (nothing was scored now)."""
    import json

    if window:
        return window[0]
    previous = out / "summary.json"
    if previous.exists():
        return json.loads(previous.read_text(encoding="utf-8")).get("window")
    return None


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("moot", "transformers", "torch")}


class _Progress:
    """A tqdm bar on stderr, created on first update (nothing shown for a finished run)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.bar = quiet, None

    def update(self, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="answer", file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
