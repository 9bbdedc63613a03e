"""DebateQA's commands: `moot answer`, `curate`, `eval pd`, `eval da` (Xu et al., 2024)."""

from __future__ import annotations

import argparse
import functools
import os
import re
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job, ModelJob
from moot.cli.registry import Commands
from moot.cli.retrieval import retriever_from_args
from moot.cli.settings import Settings, flag
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

PROMPT_CHOICES = ("basic", "comprehensive", "detailed")
PD_VARIANTS = ("mean", "sum", "released")


class _Search(Settings):
    """`moot answer`'s chunks and searches (its flags after the search tool's)."""

    k: int = flag(10, parse=opt.positive, help="chunks for --mode rag (10)")
    search_k: int = flag(3, parse=opt.positive, help="chunks per ReAct search (3)")
    max_searches: int = flag(
        3, parse=opt.positive, help="ReAct searches, the first on the question (3)"
    )


class Answer(ModelJob):
    """`moot answer`: each question answered alone, with retrieved chunks, or by a ReAct agent."""

    class Settings(
        opt.RetrievalSettings,
        _Search,
        opt.model_settings(
            what="answering model", max_tokens=1024, concurrency=8, unit="questions"
        ),
        opt.agent_settings(" of --mode react (the paper used Claude 3.5 Sonnet)"),
    ):
        """`moot answer`'s settings."""

        questions: Path = flag(parse=opt.input_file, help="questions file (required)")
        out: Path = opt.out_flag()
        mode: str = flag("plain", choices=("plain", "rag", "react", "react-single"))
        prompt: str = flag("basic", choices=PROMPT_CHOICES, help="system prompt (default basic)")

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[list[Any], Any, Any]:
        """The questions (``--limit`` applied), the answerer's role and the ReAct agent's."""
        from moot.core.data.questions import load_questions
        from moot.core.errors import ConfigError

        given = self.settings
        questions = self.limited(load_questions(given.questions))
        if given.mode != "plain" and not (given.index or given.web):
            raise ConfigError(f"--mode {given.mode} needs --index DIR (or --web)")
        if given.mode == "plain" and (given.index or given.web):
            raise ConfigError("--mode plain retrieves nothing: drop --index/--web or use rag/react")
        agent_flags = ("model_agent", "api_base_agent", "temperature_agent")
        named = [name for name in agent_flags if getattr(given, name) is not None]
        if named and given.mode != "react":
            option = given.option(named[0])
            raise ConfigError(f"{option} is for --mode react (its separate search agent)")
        role = self.role("answerer")
        agent = (
            runtime.debater_role(given, "agent", "react_agent") if given.mode == "react" else None
        )
        return questions, role, agent

    @functools.cached_property
    def retriever(self) -> Any:
        """The search tool (None: ``--mode plain``); a dry run's (`args.planning`) too."""
        return retriever_from_args(self.args) if self.settings.mode != "plain" else None

    def specs(self) -> list[Any]:
        """The answerer's, and the agent's with ``--mode react``, once the search tool is made."""
        _, role, agent = self.inputs
        self.retriever  # noqa: B018 - a missing index is refused before any model is contacted
        return [role.spec, *([agent.spec] if agent else [])]

    def calls(self, client: Any, progress: Any) -> Any:
        """Answer the questions."""
        from moot.graphs.debateqa_answer import AnswerContext, answer_questions

        given = self.settings
        questions, role, agent = self.inputs
        ctx = AnswerContext(
            client=client,
            retriever=self.retriever,
            role=role,
            mode=given.mode,
            prompt=given.prompt,
            k=given.k,
            search_k=given.search_k,
            max_searches=given.max_searches,
            max_tokens=given.max_tokens,
            seed=given.seed,
            agent=agent,
        )
        return answer_questions(
            questions, given.out, ctx, concurrency=given.concurrency, progress=progress
        )

    def report(self, done: Any, client: Any) -> Result:
        """How many were answered, and where the answers are."""
        given, summary = self.settings, done.summary
        outputs = {"answers": given.out / "answers.jsonl", "summary": given.out / "summary.json"}
        lines = [
            f"{summary['answered']}/{summary['questions']} answered ({given.mode}, "
            f"{given.prompt}); mean {summary['mean_answer_words']} words",
            f"answers {outputs['answers']}\nsummary {outputs['summary']}",
        ]
        return self.finish(done.tallies, client.ledger, lines=lines, outputs=outputs)


class Curate(ModelJob):
    """`moot curate`: partial answers (points of view and explanations) from documents."""

    class Settings(
        opt.model_settings(what="curating model", max_tokens=1024, concurrency=4, unit="questions")
    ):
        """`moot curate`'s settings."""

        questions: Path = flag(parse=opt.input_file, help="questions file (required)")
        docs: Path = flag(
            parse=opt.input_path,
            help="a `moot index` folder, or a corpus (indexed into OUT/index with BM25) (required)",
        )
        out: Path = opt.out_flag()
        documents: int = flag(10, parse=opt.positive, help="documents retrieved per question (10)")
        threshold: float = flag(
            0.75,
            parse=float,
            help="POVs more similar than this (cosine) are duplicates (0.75, the paper's)",
        )
        embedder: str | None = flag(
            None, help="sentence embedder for duplicates (all-MiniLM-L6-v2)"
        )

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[list[Any], Path | None]:
        """The questions (``--limit`` applied) and the index they are searched in.

        The index is ``--docs`` when it is one, else ``OUT/index`` from an earlier run; None
        when ``--docs`` is a corpus still to index (into ``OUT/index``).
        """
        from moot.core.data.questions import load_questions
        from moot.core.errors import ConfigError

        given = self.settings
        if not 0 < given.threshold <= 1:
            raise ConfigError(f"--threshold must be in (0, 1], got {given.threshold:g}")
        questions = self.limited(load_questions(given.questions))
        for index in (given.docs, given.out / "index"):
            if (index / "index.json").is_file():
                return questions, index
        return questions, None

    @functools.cached_property
    def tools(self) -> tuple[Any, Any]:
        """The retriever and embedder, or a dry run's stand-ins (`args.planning` set).

        A dry run never searches (the longest chunks stand in for each search), never indexes
        a corpus (it is read in memory) and loads no embedder.
        """
        from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER, Embedder
        from moot.core.retrieval.index import Index, LocalRetriever, build_index

        given, (_, path) = self.settings, self.inputs
        embedder = given.embedder or DEFAULT_EMBEDDER
        if getattr(self.args, "planning", None) is None:
            index = Index.load(path) if path else build_index(given.docs, given.out / "index")
            return LocalRetriever(index), Embedder(embedder)
        from moot.core.data.corpus import DEFAULT_CHUNK_CHARS
        from moot.core.retrieval.index import corpus_chunks, corpus_sha256
        from moot.core.retrieval.stand_in import StandInRetriever
        from moot.graphs.debateqa_answer import search_identity
        from moot.graphs.debateqa_curate import StandInEmbedder

        if path is not None:
            index = Index.load(path)
            chunks, manifest = index.chunks, index.manifest
        else:  # what build_index would record of it
            chunks = corpus_chunks(given.docs)
            manifest = {
                "source_sha256": corpus_sha256(given.docs),
                "chunk_chars": DEFAULT_CHUNK_CHARS,
            }
        retriever = StandInRetriever("bm25", chunks, search_identity("bm25", manifest=manifest))
        return retriever, StandInEmbedder(embedder)

    @functools.cached_property
    def curator(self) -> Any:
        """The curating model's role."""
        return self.role("curator")

    def specs(self) -> list[Any]:
        """The curator's, once the questions are read and the documents' index is ready."""
        self.tools  # noqa: B018 - a corpus is indexed (and the index checked) first
        return [self.curator.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Curate each question's partial answers."""
        from moot.graphs.debateqa_curate import CurateContext, curate

        given = self.settings
        retriever, embedder = self.tools
        ctx = CurateContext(
            client=client,
            role=self.curator,
            retriever=retriever,
            embedder=embedder,
            documents=given.documents,
            threshold=given.threshold,
            max_tokens=given.max_tokens,
            seed=given.seed,
        )
        questions = self.inputs[0]
        return curate(questions, given.out, ctx, concurrency=given.concurrency, progress=progress)

    def report(self, done: Any, client: Any) -> Result:
        """How many were curated, where the partial answers are, what went unread."""
        out, summary = self.settings.out, done.summary
        outputs = {
            "partial_answers": out / "partial_answers.jsonl",
            "curation": out / "curation.jsonl",
        }
        lines = [
            f"{summary['curated']}/{summary['questions']} questions curated: "
            f"{summary['povs_extracted']} POVs, {summary['duplicates_removed']} duplicates removed",
            f"partial answers {outputs['partial_answers']}",
        ]
        unread = f"moot: {done.unparsed} questions got no readable POV list (see curation.jsonl)"
        return self.finish(
            done.tallies,
            client.ledger,
            failed=bool(done.unparsed),
            lines=lines,
            messages=[unread] if done.unparsed else [],
            outputs=outputs,
        )


def _pd_out(args: argparse.Namespace) -> Path:
    """`moot eval pd`'s default folder: ``STEM.pd-VARIANT-SCORER`` beside the answers file.

    Outside every run folder: beside the run that holds the answers, named after it
    (`moot.core.data.folders.beside_runs`: ``runs/answer.pd-...`` for
    ``runs/answer/answers.jsonl``).
    """
    from moot.core.data.folders import beside_runs

    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(args.scorer).name or args.scorer)
    return beside_runs(args.answers, f".pd-{args.variant}-{slug}")


class _Scoring(Settings):
    """`moot eval pd`'s window, output and limit (its flags after the scorer's device)."""

    max_length: int | None = flag(
        None,
        parse=opt.positive,
        metavar="TOKENS",
        help="scoring window (default: the scorer's context length)",
    )
    out: Path = opt.out_flag(
        default="ANSWERS_STEM.pd-VARIANT-SCORER beside the answers, or beside the run holding them",
        resolve=_pd_out,
    )
    limit: int | None = opt.limit_flag("answers")


class PerspectiveDiversity(Job):
    """`moot eval pd`: P.D. of answers, the perplexity of partial answers given each answer."""

    class Settings(
        opt.batch_settings(8, "partial answers"),
        opt.local_settings("float32", "scorer device"),
        _Scoring,
        opt.PromptSettings,
        opt.CommonSettings,
    ):
        """`moot eval pd`'s settings."""

        answers: Path = flag(
            parse=opt.input_file, help="answers (id, answer|generation) (required)"
        )
        partial_answers: Path = flag(
            parse=opt.input_file,
            help="questions with partial_answers [{POV, Explanation}] (by id) (required)",
        )
        scorer: str = flag(
            "gpt2",
            parse=opt.input_source,
            metavar="HF_MODEL_OR_PATH",
            help="model folder, cached hub id or local/smollm2 (default gpt2, as the paper; "
            "nothing is downloaded)",
        )
        variant: str = flag(
            "mean",
            choices=PD_VARIANTS,
            help="mean (default: the paper's tables), sum (Equation 1 as printed) or released",
        )

    settings: Settings

    def run(self) -> Result:
        """Score the answers not yet scored, write the summary."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a scorer at run time
        from moot.core.data.questions import load_answers, load_partial_answers
        from moot.core.data.records import package_versions
        from moot.graphs.debateqa_pd import (
            match_answers,
            pd_claim,
            score_answers,
            summarize,
            write_report,
        )

        given = self.settings
        answers = self.limited(load_answers(given.answers))
        partial_sets = load_partial_answers(given.partial_answers)
        pairs, unused = match_answers(answers, partial_sets, given.answers, given.partial_answers)
        out = given.out
        if unused and not given.limit:
            self.note(
                f"note: {len(unused)} partial-answer sets have no answer (first: id {unused[0]})"
            )
        claim = pd_claim(given.scorer, given.variant, given.max_length, given.dtype, given.backend)
        run = runtime.run(
            score_answers(pairs, out, self.scorer, claim, progress=runtime.progress_for(self.args))
        )
        summary = summarize(
            run.records,
            variant=given.variant,
            scorer=given.scorer,
            scorer_identity=claim["scorer"],
            window=run.window or _previous_window(out),
            dtype=given.dtype or "auto",
            backend=given.backend,
            partial_answer_sets_without_answer=len(unused),
            sources={"answers": str(given.answers), "partial_answers": str(given.partial_answers)},
            versions=package_versions("moot", "transformers", "torch"),
        )
        write_report(summary, out)
        outputs = {"scores": out / "scores.jsonl", "summary": out / "summary.json"}
        unscored = (
            f"moot: {summary['errors']} answers could not be scored (a partial answer longer "
            f"than the window); see 'error' in {outputs['scores']}"
        )
        return self.finish(
            run.tallies,
            failed=bool(summary["errors"]),
            lines=[(out / "summary.md").read_text(encoding="utf-8"), f"scores {outputs['scores']}"],
            messages=[unscored] if summary["errors"] else [],
            outputs=outputs,
        )

    def scorer(self) -> Any:
        """The P.D. scorer (made only when something is left to score)."""
        from transformers.utils import logging

        from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer

        logging.disable_progress_bar()
        given = self.settings
        return PerspectiveDiversityScorer(
            given.scorer,
            given.variant,
            batch_size=given.batch_size,
            max_length=given.max_length,
            device=given.device,
            dtype=given.dtype,
            backend=given.backend,
        )


def _previous_window(out: Path) -> int | None:
    """The window an earlier run recorded (this run scored nothing, so built no scorer)."""
    import json

    previous = out / "summary.json"
    if previous.exists():
        return json.loads(previous.read_text(encoding="utf-8")).get("window")
    return None


class DisputeAwareness(ModelJob):
    """`moot eval da`: whether each answer says its question is debated, by a judge."""

    class Settings(
        opt.model_settings(
            flag="--judge",
            what="judge model",
            note="the paper used Phi-3 medium 128k and Qwen2 1.5B",
            concurrency=16,
            unit="answers",
        )
    ):
        """`moot eval da`'s settings."""

        answers: Path = flag(
            parse=opt.input_file, help="answers (id, answer|generation) (required)"
        )
        questions: Path | None = flag(
            None,
            parse=opt.input_file,
            help="questions joined by id, for answers without 'question'",
        )
        out: Path = opt.out_flag()

    settings: Settings

    @functools.cached_property
    def answers(self) -> list[Any]:
        """The answers (``--limit`` applied), each with its question."""
        from moot.core.data.questions import load_answers, load_questions
        from moot.graphs.debateqa_eval import with_questions

        given = self.settings
        questions = load_questions(given.questions) if given.questions else []
        answers = with_questions(
            load_answers(given.answers), given.answers, questions, given.questions
        )
        return self.limited(answers)

    @functools.cached_property
    def judge(self) -> Any:
        """The judge's role."""
        return self.role("da_judge")

    def specs(self) -> list[Any]:
        """The judge's, once the answers are read and checked."""
        self.answers  # noqa: B018 - read before the judge is contacted, or even made
        return [self.judge.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Judge each answer."""
        from moot.graphs.debateqa_eval import evaluate_dispute_awareness

        return evaluate_dispute_awareness(self.answers, self.judging(self.judge, client, progress))

    def report(self, done: Any, client: Any) -> Result:
        """The summary, and where the judgments are."""
        from moot.graphs.judging import write_summary

        given = self.settings
        sources = {"answers": str(given.answers)}
        if given.questions:
            sources["questions"] = str(given.questions)
        text = write_summary(done, given.out, sources)
        names = ("judgments.jsonl", "summary.json")
        return self.finish(
            done.tallies,
            client.ledger,
            nothing_read=done.nothing_read,
            lines=[text, *(f"{name:<16} {given.out / name}" for name in names)],
            outputs={name.partition(".")[0]: given.out / name for name in names},
        )


def _weights(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated weights k in [0, 1]."""
    try:
        found = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers K,K,..., got {text!r}") from None
    if not all(0 <= k <= 1 for k in found):
        raise argparse.ArgumentTypeError(f"each k must be in [0, 1], got {text!r}")
    return found


class Report(Job):
    """`moot report debateqa`: several models' P.D. and D.A., and their combined score."""

    class Settings(opt.CommonSettings):
        """`moot report debateqa`'s settings."""

        pd: list[Path] = flag(
            parse=opt.input_folder, nargs="+", metavar="DIR", help="eval pd folders"
        )
        da: list[Path] = flag(
            parse=opt.input_folder,
            nargs="+",
            metavar="DIR",
            help="eval da folders, in --pd's order",
        )
        out: Path = opt.out_flag()
        names: tuple[str, ...] | None = flag(
            None, parse=opt.names, metavar="A,B", help="model names (default: the --pd folders')"
        )
        k: tuple[float, ...] = flag(
            (0.0, 0.25, 0.5, 0.75, 1.0),
            flags=("--k",),
            parse=_weights,
            metavar="K,K",
            help="weights of 1/P.D., each in [0, 1] (default Figure 3's 0,0.25,0.5,0.75,1)",
        )
        min_povs: int | None = flag(
            None,
            parse=opt.positive,
            metavar="N",
            help="only questions with at least N partial answers in --partial-answers (paper: 3)",
        )
        partial_answers: Path | None = flag(
            None,
            parse=opt.input_file,
            metavar="FILE",
            help="the partial answers, for --min-povs",
        )

    settings: Settings

    def run(self) -> Result:
        """Check the folders pair up, write the report."""
        from moot.core.errors import ConfigError
        from moot.graphs.debateqa_report import write_report

        given = self.settings
        if len(given.pd) != len(given.da):
            raise ConfigError(f"{len(given.pd)} --pd folders but {len(given.da)} --da folders")
        names = given.names or tuple(folder.name for folder in given.pd)
        if len(names) != len(given.pd) or len(set(names)) != len(names):
            raise ConfigError(f"--names needs {len(given.pd)} different names, one per --pd folder")
        if (given.min_povs is None) != (given.partial_answers is None):
            raise ConfigError("--min-povs and --partial-answers go together")
        text = write_report(
            given.pd, given.da, names, given.k, given.out, given.min_povs, given.partial_answers
        )
        return self.finish(
            lines=[text.removesuffix("\n"), f"wrote report.json and report.md to {given.out}"],
            outputs={"report": given.out / "report.json", "markdown": given.out / "report.md"},
        )


def register(commands: Commands) -> None:
    """Add DebateQA's commands."""
    commands.add(
        "answer",
        Answer,
        "answer debatable questions: plain, vanilla RAG or ReAct RAG (DebateQA)",
        "Answer each question with DebateQA's system prompts, alone (plain), with the top-k "
        "chunks of an index (rag), or after a ReAct agent (--agent-model) searched up to 3 times "
        "and picked at most 9 chunks, which the answering model is given as in rag (react, the "
        "paper's); react-single is one model that searches and answers itself. One record per "
        "question in OUT/answers.jsonl; a rerun answers only what is missing.",
        plan=True,
        output=Output("answer", (claim_mark(EVAL_CLAIM),)),
    )
    commands.add(
        "curate",
        Curate,
        "curate partial answers (points of view + explanations) from documents (DebateQA)",
        "DebateQA Algorithm 1: for each question, retrieve documents, extract the points of view "
        "they hold, explain each in at most 300 words from its documents, and drop near-duplicate "
        "POVs. Writes OUT/partial_answers.jsonl, the file `moot eval pd` reads.",
        plan=True,
        output=Output("curate", (claim_mark(EVAL_CLAIM),)),
    )
    commands.add(
        "pd",
        PerspectiveDiversity,
        "DebateQA Perspective Diversity: perplexity of partial answers given the answer",
        "P.D. = the mean over a question's partial answers of their perplexity under a local "
        "causal LM, conditioned on the answer + 'Please restate.' in the scorer's chat template "
        "(lower is better; the scale of the paper's tables). --variant sum is Equation 1 "
        "literally (the sum); --variant released reproduces DebateQA's released script (mean, no "
        "instruction, context in the denominator, answers over the window score 1.0). Reruns "
        "score only what is missing.",
        group="eval",
        output=Output("pd", (claim_mark("pd"),)),
    )
    commands.add(
        "da",
        DisputeAwareness,
        "DebateQA Dispute Awareness: share of answers that say the question is debated",
        "Judge each answer with DebateQA's few-shot 0/1 prompt, reading only the judge's reply. "
        "Reruns judge only what is missing.",
        group="eval",
        plan=True,
        output=Output("da", (claim_mark(EVAL_CLAIM),)),
    )
    commands.add(
        "debateqa",
        Report,
        "DebateQA: P.D. and D.A. of several models and their combined score (Equation 4)",
        "One row per model: its mean P.D. (a `moot eval pd` folder) and D.A. (a `moot eval da` "
        "folder), and mu_w = k Z(1/P.D.) + (1-k) Z(D.A.), z-normalised across the models, with "
        "its rank, for each k (default Figure 3's). --min-povs keeps only questions with at "
        "least N partial answers (the paper's filter, 3). Writes report.json and report.md.",
        group="report",
        output=Output("report", (Mark("report.json", "report", "debateqa"),)),
    )
