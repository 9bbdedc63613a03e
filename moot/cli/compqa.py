"""CompQA's commands: `moot compare`, `eval compqa`, `report compqa`, `data distill-compqa`.

Nikishina et al., 2025 (arXiv:2502.14476).
"""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job, ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import Settings, flag
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

_GENERATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class Compare(ModelJob):
    """`moot compare`: comparative questions answered in one of CompQA's four scenarios."""

    class Settings(
        opt.model_settings(
            what="answering model",
            # CompQA Section 3: "We use the standard configuration and parameters for generation"
            # (no temperature or top-p is stated): none is sent, the model's own defaults apply
            temperature=None,
            max_tokens=1024,
            constrained="JSON for extraction and arguments",
            concurrency=8,
            unit="questions",
        )
    ):
        """`moot compare`'s settings."""

        questions: Path = flag(
            parse=opt.input_file,
            metavar="FILE",
            help="JSON/JSONL of {object1, object2, aspect?} or of free-text questions, or .txt "
            "(required)",
        )
        out: Path = opt.out_flag()
        scenario: int = flag(parse=int, choices=(1, 2, 3, 4), help="(required)")
        arguments: Path | None = flag(
            None,
            parse=opt.input_file,
            metavar="FILE",
            help="per-object argument lists (scenarios 2, 4)",
        )
        generate_arguments: bool = flag(
            False,
            action="store_true",
            help="scenarios 2 and 4: ask the model for the arguments",
        )
        generator: str | None = flag(
            None,
            metavar="NAME",
            help="the answers' generator and file name (default: the model's name)",
        )

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[list[Any], dict[str, Any]]:
        """The questions (``--limit`` applied) and the answering context but its client."""
        from moot.core.data.compqa_inputs import ArgumentFile, load_compqa_questions
        from moot.core.data.records import name_problem
        from moot.core.errors import ConfigError
        from moot.graphs.compqa_compare import generator_name

        given = self.settings
        wants = given.scenario in (2, 4)
        if not wants and (given.arguments or given.generate_arguments):
            raise ConfigError(
                f"scenario {given.scenario} uses no arguments: drop "
                "--arguments/--generate-arguments"
            )
        if wants and bool(given.arguments) == given.generate_arguments:
            raise ConfigError(
                f"scenario {given.scenario} needs --arguments FILE or --generate-arguments "
                "(one of them)"
            )
        if given.generator is not None and not _GENERATOR.fullmatch(given.generator):
            raise ConfigError(
                "--generator must be a file-safe name (letters, digits, . _ -), got "
                f"{given.generator!r}"
            )
        questions = self.limited(load_compqa_questions(given.questions))
        arguments = ArgumentFile(given.arguments) if given.arguments else None
        role = self.role("comparer")
        generator = given.generator or generator_name(role.spec.name)
        problem = name_problem(f"{generator}_scenario_{given.scenario}.json")  # the answer file's
        if problem:
            raise ConfigError(
                f"{'--generator' if given.generator else '--model'} {generator}: {problem}"
            )
        return questions, {
            "role": role,
            "scenario": given.scenario,
            "arguments": arguments,
            "generate_arguments": given.generate_arguments,
            "constrained": runtime.constrained(given, role),
            "max_tokens": given.max_tokens,
            "seed": given.seed,
        }

    def specs(self) -> list[Any]:
        """The answering model's, once the questions are read and checked."""
        return [self.inputs[1]["role"].spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Answer the questions."""
        from moot.graphs.compqa_compare import CompareContext, compare_questions

        questions, context = self.inputs
        return compare_questions(
            questions,
            self.settings.out,
            CompareContext(client=client, **context),
            generator=self.settings.generator,
            concurrency=self.settings.concurrency,
            progress=progress,
        )

    def report(self, done: Any, client: Any) -> Result:
        """What was answered, where it is, what was not."""
        summary, out = done.summary, self.settings.out
        outputs = {"answers": done.path} if done.path else {}
        outputs |= {"log": out / "answers.jsonl", "summary": out / "summary.json"}
        lines = [
            f"{summary['answered']}/{summary['questions']} answered (scenario "
            f"{self.settings.scenario}, {summary['generator']}); {summary['no_arguments']} "
            f"without arguments, {summary['parse_failures']} unparsed, {summary['errors']} "
            f"failed; mean {summary['mean_answer_words']} words",
            *([f"answers {done.path}"] if done.path else []),
            f"log     {outputs['log']}\nsummary {outputs['summary']}",
        ]
        unanswered = done.count("no_arguments") + done.count("parse_failure")
        return self.finish(
            done.tallies,
            client.ledger,
            failed=bool(unanswered),
            lines=lines,
            messages=[m for record in done.records if (m := _problem(record))],
            outputs=outputs,
        )


def _problem(record: dict[str, Any]) -> str:
    """Why question `record` has no answer, as a message ("" when it has one)."""
    name = _describe(record)
    if record["status"] == "no_arguments":
        return f"moot: no arguments for question {name}"
    if "parse_failure" in record:
        failure = record["parse_failure"]
        return (
            f"moot: question {name}: could not read the model's {failure['stage']} reply: "
            f"{failure['error']}"
        )
    if record["status"] == "error":
        return f"moot: question {name} failed: {record['error']}"
    return ""


def _describe(record: dict[str, Any]) -> str:
    """``<id> (A vs B, aspect)``, or the free text when the objects are unknown."""
    found = record.get("extracted") or record
    if found.get("object1"):
        aspect = f", {found['aspect']}" if found.get("aspect") else ""
        return f"{record['question_id']} ({found['object1']} vs {found['object2']}{aspect})"
    return f"{record['question_id']} ({record['question']!r})"


class EvalCompqa(ModelJob):
    """`moot eval compqa`: comparative answers scored on CompQA's 15-criterion rubric."""

    class Settings(
        opt.model_settings(
            flag="--judge",
            what="judge model",
            note="the paper used GPT-4",
            constrained="JSON scores",
            concurrency=16,
            unit="answers",
        )
    ):
        """`moot eval compqa`'s settings."""

        answers: list[Path] = flag(
            parse=opt.input_file,
            nargs="+",
            metavar="FILE",
            help="answer files (JSON list or JSONL of {object1, object2, aspect, comparison}), "
            "e.g. `moot compare` output or CompQA raw_summaries/*.json (required)",
        )
        out: Path = opt.out_flag()
        shots: int = flag(
            0,
            parse=int,
            choices=(0, 1, 3),
            help="few-shot examples before the question: the paper's Example 1, or Examples 1-3 "
            "(default 0, as the released script)",
        )

    settings: Settings

    @functools.cached_property
    def files(self) -> list[Any]:
        """The answer files, cut to their first ``--limit`` answers in all."""
        from moot.graphs.compqa_eval import load_answer_files

        files = load_answer_files(self.settings.answers)
        return _first_answers(files, self.settings.limit) if self.settings.limit else files

    @functools.cached_property
    def judge(self) -> Any:
        """The judge's role."""
        return self.role("compqa_judge")

    def specs(self) -> list[Any]:
        """The judge's, once the answer files are read (bad input fails before it is made)."""
        self.files  # noqa: B018 - read before the judge is contacted, or even made
        return [self.judge.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Judge each answer."""
        from moot.graphs.compqa_eval import evaluate_compqa

        given, judging = self.settings, self.judging(self.judge, client, progress)
        constrained = runtime.constrained(given, self.judge)
        return evaluate_compqa(self.files, judging, shots=given.shots, constrained=constrained)

    def report(self, done: Any, client: Any) -> Result:
        """The scores' summary, where the judgments are, how many were invalid."""
        overall, out = done.summary["overall"], self.settings.out
        outputs = {
            "judgments": out / "judgments.jsonl",
            "judged": out / "judged",
            "summary": out / "summary.json",
        }
        lines = [
            (out / "summary.md").read_text(encoding="utf-8"),
            f"judged    {outputs['judged']}",
            f"summary   {outputs['summary']}",
        ]
        if overall["invalid"]:
            self.note(f"note: {overall['invalid']} invalid judgment(s): counted, not summed")
        nothing_read = overall["invalid"] > 0 and overall["n_valid"] == 0
        return self.finish(
            done.tallies, client.ledger, nothing_read=nothing_read, lines=lines, outputs=outputs
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


class _Judged(Settings):
    """`moot report compqa`'s inputs, output and grouping (its flags before the pair's)."""

    judged: list[Path] = flag(
        parse=opt.input_file, nargs="+", metavar="FILE", help="judged files (required)"
    )
    out: Path = opt.out_flag()
    human: list[Path] = flag(
        [],
        parse=opt.input_file,
        action="append",
        metavar="FILE",
        help="human annotation table, TSV (repeatable; CompQA's evaluation_tables/*.tsv)",
    )
    by: str = flag(
        "generator,scenario",
        metavar="KEYS",
        help="grouping keys, any of generator,scenario (default generator,scenario)",
    )


class _OutOfRange(Settings):
    """What `moot report compqa` does with human criterion values out of range: one or neither."""

    drop_out_of_range: bool = flag(
        False,
        action="store_true",
        help="drop (and list) human criterion values outside their range instead of failing",
    )
    keep_out_of_range: bool = flag(
        False,
        action="store_true",
        help="keep (and list) them in the row's total, as the paper's human columns count them",
    )


class Report(Job):
    """`moot report compqa`: mean rubric scores by group; agreement with human tables."""

    class Settings(_Judged, _OutOfRange, opt.CommonSettings):
        """`moot report compqa`'s settings."""

        @classmethod
        def add_to(cls, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
            """The flags, the out-of-range pair's mutually exclusive (argparse refuses both)."""
            _Judged.add_to(parser)
            _OutOfRange.add_to(parser.add_mutually_exclusive_group())  # type: ignore[arg-type]
            return opt.CommonSettings.add_to(parser)

    settings: Settings

    def run(self) -> Result:
        """Aggregate the judged files (and human tables) into the report."""
        from moot.core.errors import ConfigError
        from moot.core.metrics.compqa_report import check_by, report_markdown
        from moot.graphs.compqa_report import FILES, write_report

        given = self.settings
        by = check_by(given.by.split(","))
        for option, paths in (("--judged", given.judged), ("--human", given.human)):
            resolved = [p.resolve() for p in paths]
            twice = {str(p) for p, r in zip(paths, resolved, strict=True) if resolved.count(r) > 1}
            if twice:
                raise ConfigError(f"{option}: {', '.join(sorted(twice))} given twice")
        report = write_report(
            given.judged,
            given.human,
            by,
            given.out,
            given.drop_out_of_range,
            given.keep_out_of_range,
        )
        lines = [
            report_markdown(report, full=False).removesuffix("\n"),
            f"wrote report.json, report.md, chart.png and heatmap.png to {given.out}",
        ]
        empty = report["overall"]["n_total"] == 0
        return self.finish(
            lines=lines,
            messages=["moot: no judgment has a total; see report.md for why"] if empty else [],
            failed=empty,
            outputs={name: given.out / file for name, file in FILES.items()},
        )


class DistillCompqa(Job):
    """`moot data distill-compqa`: judged answers scoring high enough, as chat SFT records."""

    class Settings(opt.CommonSettings, opt.hub_settings("dataset")):
        """`moot data distill-compqa`'s settings."""

        judged: list[Path] = flag(
            parse=opt.input_file,
            nargs="+",
            metavar="FILE",
            help="judged answer files (<generator>_scenario_<N>.json, cam.json, ...) (required)",
        )
        out: Path = opt.out_flag()
        min_score: float = flag(
            18.0,
            parse=float,
            metavar="S",
            help="lowest total score kept, 0-19 (default 18, the paper's threshold)",
        )

    settings: Settings

    def run(self) -> Result:
        """Keep the answers that scored at least ``--min-score``; write and push them."""
        from moot.training.compqa_data import distill_compqa

        given = self.settings
        summary = distill_compqa(given.judged, given.out, min_score=given.min_score)
        if not summary.kept:
            return self.finish(
                lines=[summary.table()],
                messages=[f"moot: no answer scored >= {given.min_score:g}; nothing written"],
                failed=True,
            )
        line = (
            f"wrote {summary.kept} records to {given.out} (dataset.jsonl, dataset/, "
            f"manifest.json, README.md); {summary.duplicates} duplicate(s) dropped"
        )
        if summary.invalid_judgments:
            self.note(f"note: {summary.invalid_judgments} invalid or failed judgment(s) skipped")
        if summary.unchecked_scores:
            self.note(f"note: {summary.unchecked_scores} score(s) kept unchecked: no score_dict")
        outputs = {"dataset": given.out / "dataset.jsonl", "manifest": given.out / "manifest.json"}
        result = self.finish(lines=[summary.table(), line], outputs=outputs)
        return self.push(given.out, "dataset", result)


def register(commands: Commands) -> None:
    """Add CompQA's commands."""
    commands.add(
        "compare",
        Compare,
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
    commands.add(
        "compqa",
        EvalCompqa,
        "CompQA 15-criterion rubric judge of comparative answers (total 0-19)",
        "Score each comparative answer on CompQA's 15 criteria with the paper's judge prompt "
        "(Nikishina et al., 2025). A reply that breaks the rubric gets one repair round, then "
        "counts as invalid and is never summed. Writes judged/<input name> per input, "
        "summary.json and summary.md. Reruns judge only what is missing.",
        group="eval",
        plan=True,
        output=Output("compqa", (claim_mark(EVAL_CLAIM),)),
    )
    commands.add(
        "compqa",
        Report,
        "CompQA: mean rubric scores by generator and scenario; agreement with humans",
        "Aggregate judged CompQA files (`moot eval compqa` output, or files judged elsewhere such "
        "as CompQA's evaluated_summaries) into mean total ± sample std by group, category and "
        "criterion means, and invalid-judgment counts; with --human, agreement (Pearson, "
        "Spearman, Krippendorff's alpha) with human annotation tables. Writes report.json, "
        "report.md, chart.png and heatmap.png into --out.",
        group="report",
        output=Output("report", (Mark("report.json", "generator_scenario"),)),
    )
    commands.add(
        "distill-compqa",
        DistillCompqa,
        "judged CompQA answers scoring at least 18 of 19 as SFT records",
        "Keep the judged comparative answers (CompQA's evaluated_summaries files) that scored at "
        "least --min-score of 19 and write them as chat SFT records. Exits 1 when none passed.",
        group="data",
        output=Output(marks=(Mark("manifest.json", "kind", "compqa-distill"),)),
    )
