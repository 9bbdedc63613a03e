"""BERDS's commands: `moot eval berds` and `moot eval detector` (Chen et al., 2024)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any

from moot.cli import options as opt
from moot.cli.job import ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import Flag, flag
from moot.core.data.folders import EVAL_CLAIM, Output, claim_mark
from moot.result import Result

#: The BERDS Table 15 prompt a detector is asked with (both commands).
DetectorPrompt = Annotated[
    str,
    Flag(
        choices=("zero-shot", "one-shot", "one-shot-released"),
        help="BERDS Table 15 prompt: zero-shot (default), one-shot (the paper's GPT-4 one-shot), "
        "one-shot-released (the released file's system turn)",
    ),
]


class Detection(ModelJob):
    """A perspective detector asked of documents (`Berds`) or labelled pairs (`Detector`)."""

    @functools.cached_property
    def items(self) -> list[Any]:
        """What the detector is asked of (``--limit`` applied)."""
        raise NotImplementedError

    def specs(self) -> list[Any]:
        """The detector's, once the items are read and checked."""
        self.items  # noqa: B018 - read before the detector is contacted, or even made
        return [self.detector.spec]

    @functools.cached_property
    def detector(self) -> Any:
        """The detector's role."""
        return self.role("perspective_detector")

    def summary(self, done: Any) -> str:
        """The summary's text, ``summary.json`` written (`moot.graphs.judging.write_summary`)."""
        raise NotImplementedError

    def report(self, done: Any, client: Any, *extra: str) -> Result:
        """The summary, and where the judgments (and `extra` files) are."""
        out = self.settings.out
        names = ("judgments.jsonl", *extra, "summary.json")
        lines = [self.summary(done), *(f"{name:<16} {out / name}" for name in names)]
        return self.finish(
            done.tallies,
            client.ledger,
            nothing_read=done.nothing_read,
            lines=lines,
            outputs={name.partition(".")[0]: out / name for name in names},
        )


class Berds(Detection):
    """`moot eval berds`: MRecall@k and Precision@k of retrieved documents."""

    class Settings(
        opt.model_settings(
            flag="--detector",
            what="perspective detector",
            note="the paper used GPT-4 / Mistral-7B",
            concurrency=16,
            unit="questions",
        )
    ):
        """`moot eval berds`'s settings."""

        retrieved: Path = flag(
            parse=opt.input_file,
            help="`moot retrieve` output, or BERDS' released layout ({perspectives, ctxs}) "
            "(required)",
        )
        perspectives: Path | None = flag(
            None,
            parse=opt.input_file,
            help="questions with 'perspectives', joined by id (for records without their own)",
        )
        k: int = flag(parse=opt.positive, help="cutoff (the paper used 5 and 10; required)")
        detector_prompt: DetectorPrompt = "zero-shot"
        out: Path = opt.out_flag()

    settings: Settings

    @functools.cached_property
    def items(self) -> list[Any]:
        """The questions (``--limit`` applied), each with its documents and perspectives."""
        from moot.core.data.questions import load_questions
        from moot.graphs.berds_eval import join_perspectives, load_retrieved

        given = self.settings
        retrieved = self.limited(load_retrieved(given.retrieved))
        questions = load_questions(given.perspectives) if given.perspectives else None
        return join_perspectives(retrieved, given.retrieved, questions, given.perspectives, given.k)

    def calls(self, client: Any, progress: Any) -> Any:
        """Ask the detector of each question's top-k documents."""
        from moot.graphs.berds_eval import evaluate_berds

        given = self.settings
        judging = self.judging(self.detector, client, progress)
        return evaluate_berds(self.items, judging, k=given.k, prompt=given.detector_prompt)

    def summary(self, done: Any) -> str:
        """The scores' summary, with the files they come from."""
        from moot.graphs.judging import write_summary

        sources = {"retrieved": str(self.settings.retrieved)}
        if self.settings.perspectives:
            sources["perspectives"] = str(self.settings.perspectives)
        return write_summary(done, self.settings.out, sources)

    def report(self, done: Any, client: Any, *extra: str) -> Result:
        """The summary, and where the judgments and scores are."""
        return super().report(done, client, "scores.jsonl")


class Detector(Detection):
    """`moot eval detector`: accuracy and F1 of a perspective detector on labelled pairs."""

    class Settings(
        opt.model_settings(
            flag="--detector",
            what="the detector under test",
            default=None,
            concurrency=16,
            unit="pairs",
        )
    ):
        """`moot eval detector`'s settings."""

        pairs: Path = flag(parse=opt.input_file, help="BERDS pers_det TSV (required)")
        detector_prompt: DetectorPrompt = "zero-shot"
        out: Path = opt.out_flag()

    settings: Settings

    @functools.cached_property
    def items(self) -> list[Any]:
        """The labelled pairs (``--limit`` applied)."""
        from moot.graphs.berds_eval import load_pairs

        return self.limited(load_pairs(self.settings.pairs))

    def calls(self, client: Any, progress: Any) -> Any:
        """Ask the detector of each pair."""
        from moot.graphs.berds_eval import evaluate_detector

        judging = self.judging(self.detector, client, progress)
        return evaluate_detector(self.items, judging, prompt=self.settings.detector_prompt)

    def summary(self, done: Any) -> str:
        """The scores' summary, with the pairs' file."""
        from moot.graphs.judging import write_summary

        return write_summary(done, self.settings.out, {"pairs": str(self.settings.pairs)})


def register(commands: Commands) -> None:
    """Add BERDS's evaluations."""
    commands.add(
        "berds",
        Berds,
        "BERDS MRecall@k and Precision@k of retrieved documents",
        "Ask a detector whether each top-k document supports each gold perspective (the BERDS "
        "Yes/No prompt), then score MRecall@k and Precision@k per question.",
        group="eval",
        plan=True,
        output=Output("berds", (claim_mark(EVAL_CLAIM),)),
    )
    commands.add(
        "detector",
        Detector,
        "accuracy and F1 of a perspective detector on labelled BERDS pairs",
        "Score a detector on a TSV of (question, id, document, perspective, label).",
        group="eval",
        plan=True,
        output=Output("detector", (claim_mark(EVAL_CLAIM),)),
    )
