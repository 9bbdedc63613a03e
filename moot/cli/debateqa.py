"""DebateQA's commands: `moot answer`, `curate`, `eval pd`, `eval da` (Xu et al., 2024)."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.registry import Commands
from moot.cli.retrieval import retriever_from_args
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

PROMPT_CHOICES = ("basic", "comprehensive", "detailed")
PD_VARIANTS = ("mean", "sum", "released")


def register(commands: Commands) -> None:
    """Add DebateQA's commands."""
    answer = commands.add(
        "answer",
        run_answer,
        "answer debatable questions: plain, vanilla RAG or ReAct RAG (DebateQA)",
        "Answer each question with DebateQA's system prompts, alone (plain), with the top-k "
        "chunks of an index (rag), or after a ReAct agent (--agent-model) searched up to 3 times "
        "and picked at most 9 chunks, which the answering model is given as in rag (react, the "
        "paper's); react-single is one model that searches and answers itself. One record per "
        "question in OUT/answers.jsonl; a rerun answers only what is missing.",
        plan=True,
        output=Output("answer", (claim_mark(EVAL_CLAIM),)),
    )
    answer.add_argument("--questions", type=opt.input_file, help="questions file (required)")
    opt.out_option(answer)
    opt.required(answer, "questions")
    answer.add_argument(
        "--mode", choices=("plain", "rag", "react", "react-single"), default="plain"
    )
    answer.add_argument(
        "--prompt", choices=PROMPT_CHOICES, default="basic", help="system prompt (default basic)"
    )
    opt.retrieval_options(answer)
    answer.add_argument("-k", type=opt.positive, default=10, help="chunks for --mode rag (10)")
    answer.add_argument(
        "--search-k", type=opt.positive, default=3, help="chunks per ReAct search (3)"
    )
    answer.add_argument(
        "--max-searches",
        type=opt.positive,
        default=3,
        help="ReAct searches, the first on the question (3)",
    )
    opt.model_options(
        answer, what="answering model", max_tokens=1024, concurrency=8, unit="questions"
    )
    opt.agent_options(answer, note=" of --mode react (the paper used Claude 3.5 Sonnet)")

    curate = commands.add(
        "curate",
        run_curate,
        "curate partial answers (points of view + explanations) from documents (DebateQA)",
        "DebateQA Algorithm 1: for each question, retrieve documents, extract the points of view "
        "they hold, explain each in at most 300 words from its documents, and drop near-duplicate "
        "POVs. Writes OUT/partial_answers.jsonl, the file `moot eval pd` reads.",
        plan=True,
        output=Output("curate", (claim_mark(EVAL_CLAIM),)),
    )
    curate.add_argument("--questions", type=opt.input_file, help="questions file (required)")
    curate.add_argument(
        "--docs",
        type=opt.input_path,
        help="a `moot index` folder, or a corpus (indexed into OUT/index with BM25) (required)",
    )
    opt.out_option(curate)
    opt.required(curate, "questions", "docs")
    curate.add_argument(
        "--documents", type=opt.positive, default=10, help="documents retrieved per question (10)"
    )
    curate.add_argument(
        "--threshold",
        type=float,
        default=0.75,
        help="POVs more similar than this (cosine) are duplicates (0.75, the paper's)",
    )
    curate.add_argument(
        "--embedder", default=None, help="sentence embedder for duplicates (all-MiniLM-L6-v2)"
    )
    opt.model_options(
        curate, what="curating model", max_tokens=1024, concurrency=4, unit="questions"
    )

    pd = commands.add(
        "pd",
        run_pd,
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
    pd.add_argument(
        "--answers", type=opt.input_file, help="answers (id, answer|generation) (required)"
    )
    pd.add_argument(
        "--partial-answers",
        type=opt.input_file,
        help="questions with partial_answers [{POV, Explanation}] (by id) (required)",
    )
    opt.required(pd, "answers", "partial_answers")
    pd.add_argument(
        "--scorer",
        type=opt.input_source,
        default="gpt2",
        metavar="HF_MODEL_OR_PATH",
        help="model folder, cached hub id or local/smollm2 (default gpt2, as the paper; "
        "nothing is downloaded)",
    )
    pd.add_argument(
        "--variant",
        choices=PD_VARIANTS,
        default="mean",
        help="mean (default: the paper's tables), sum (Equation 1 as printed) or released",
    )
    opt.batch_options(pd, 8, "partial answers")
    opt.local_options(pd.add_argument_group("scorer device"), dtype="float32")
    pd.add_argument(
        "--max-length",
        type=opt.positive,
        metavar="TOKENS",
        help="scoring window (default: the scorer's context length)",
    )
    opt.out_option(
        pd,
        default="ANSWERS_STEM.pd-VARIANT-SCORER beside the answers, or beside the run holding them",
        resolve=_pd_out,
    )
    opt.limit_option(pd, "answers")
    opt.common_options(pd)

    da = commands.add(
        "da",
        run_da,
        "DebateQA Dispute Awareness: share of answers that say the question is debated",
        "Judge each answer with DebateQA's few-shot 0/1 prompt, reading only the judge's reply. "
        "Reruns judge only what is missing.",
        group="eval",
        plan=True,
        output=Output("da", (claim_mark(EVAL_CLAIM),)),
    )
    da.add_argument(
        "--answers", type=opt.input_file, help="answers (id, answer|generation) (required)"
    )
    da.add_argument(
        "--questions",
        type=opt.input_file,
        help="questions joined by id, for answers without 'question'",
    )
    opt.out_option(da)
    opt.required(da, "answers")
    opt.model_options(
        da,
        flag="--judge",
        what="judge model",
        note="the paper used Phi-3 medium 128k and Qwen2 1.5B",
        concurrency=16,
        unit="answers",
    )

    report = commands.add(
        "debateqa",
        run_report,
        "DebateQA: P.D. and D.A. of several models and their combined score (Equation 4)",
        "One row per model: its mean P.D. (a `moot eval pd` folder) and D.A. (a `moot eval da` "
        "folder), and mu_w = k Z(1/P.D.) + (1-k) Z(D.A.), z-normalised across the models, with "
        "its rank, for each k (default Figure 3's). --min-povs keeps only questions with at "
        "least N partial answers (the paper's filter, 3). Writes report.json and report.md.",
        group="report",
        output=Output("report", (Mark("report.json", "report", "debateqa"),)),
    )
    report.add_argument(
        "--pd", type=opt.input_folder, nargs="+", metavar="DIR", help="eval pd folders"
    )
    report.add_argument(
        "--da",
        type=opt.input_folder,
        nargs="+",
        metavar="DIR",
        help="eval da folders, in --pd's order",
    )
    opt.out_option(report)
    opt.required(report, "pd", "da")
    report.add_argument(
        "--names", type=opt.names, metavar="A,B", help="model names (default: the --pd folders')"
    )
    report.add_argument(
        "--k",
        type=_weights,
        default=(0.0, 0.25, 0.5, 0.75, 1.0),
        metavar="K,K",
        help="weights of 1/P.D., each in [0, 1] (default Figure 3's 0,0.25,0.5,0.75,1)",
    )
    report.add_argument(
        "--min-povs",
        type=opt.positive,
        metavar="N",
        help="only questions with at least N partial answers in --partial-answers (paper: 3)",
    )
    report.add_argument(
        "--partial-answers",
        type=opt.input_file,
        metavar="FILE",
        help="the partial answers, for --min-povs",
    )
    opt.common_options(report)


def _weights(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated weights k in [0, 1]."""
    try:
        found = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers K,K,..., got {text!r}") from None
    if not all(0 <= k <= 1 for k in found):
        raise argparse.ArgumentTypeError(f"each k must be in [0, 1], got {text!r}")
    return found


def _answer_inputs(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    """`moot answer`'s questions (``--limit`` applied) and settings, checked; not its retriever."""
    from moot.core.data.questions import load_questions
    from moot.core.errors import ConfigError

    questions = runtime.limited(load_questions(args.questions), args)
    if args.mode != "plain" and not (args.index or args.web):
        raise ConfigError(f"--mode {args.mode} needs --index DIR (or --web)")
    if args.mode == "plain" and (args.index or args.web):
        raise ConfigError("--mode plain retrieves nothing: drop --index/--web or use rag/react")
    given = [
        f for f in ("model", "api_base", "temperature") if getattr(args, f"{f}_agent") is not None
    ]
    if given and args.mode != "react":
        flag = "--agent-" + given[0].replace("_", "-")
        raise ConfigError(f"{flag} is for --mode react (its separate search agent)")
    role = runtime.role_from(args, "answerer")
    agent = runtime.debater_role(args, "agent", "react_agent") if args.mode == "react" else None
    return questions, {
        "role": role,
        "mode": args.mode,
        "prompt": args.prompt,
        "k": args.k,
        "search_k": args.search_k,
        "max_searches": args.max_searches,
        "max_tokens": args.max_tokens,
        "seed": args.seed,
        "agent": agent,
    }


def run_answer(args: argparse.Namespace) -> Result:
    """`moot answer`."""
    from moot.graphs.debateqa_answer import AnswerContext, answer_questions

    questions, settings = _answer_inputs(args)
    retriever = retriever_from_args(args) if args.mode != "plain" else None
    specs = [settings["role"].spec, *([settings["agent"].spec] if settings["agent"] else [])]
    client = runtime.client_for(args, *specs)
    ctx = AnswerContext(client=client, retriever=retriever, **settings)
    progress = runtime.progress_for(args, client)
    run = runtime.run(
        answer_questions(questions, args.out, ctx, concurrency=args.concurrency, progress=progress)
    )
    summary = run.summary
    outputs = {"answers": args.out / "answers.jsonl", "summary": args.out / "summary.json"}
    lines = [
        f"{summary['answered']}/{summary['questions']} answered ({args.mode}, {args.prompt}); "
        f"mean {summary['mean_answer_words']} words",
        f"answers {outputs['answers']}\nsummary {outputs['summary']}",
    ]
    return runtime.finish(args, run.tallies, client.ledger, lines=lines, outputs=outputs)


def _curate_inputs(args: argparse.Namespace) -> tuple[list[Any], Path | None]:
    """`moot curate`'s questions (``--limit`` applied) and the index it searches.

    The index is ``--docs`` when it is one, else ``OUT/index`` from an earlier run; None when
    ``--docs`` is a corpus still to index (into ``OUT/index``).
    """
    from moot.core.data.questions import load_questions
    from moot.core.errors import ConfigError

    if not 0 < args.threshold <= 1:
        raise ConfigError(f"--threshold must be in (0, 1], got {args.threshold:g}")
    questions = runtime.limited(load_questions(args.questions), args)
    for index in (args.docs, args.out / "index"):
        if (index / "index.json").is_file():
            return questions, index
    return questions, None


def run_curate(args: argparse.Namespace) -> Result:
    """`moot curate`."""
    from moot.graphs.debateqa_curate import CurateContext, curate

    questions, path = _curate_inputs(args)
    retriever, embedder = _curate_tools(args, path)
    role = runtime.role_from(args, "curator")
    client = runtime.client_for(args, role.spec)
    ctx = CurateContext(
        client=client,
        role=role,
        retriever=retriever,
        embedder=embedder,
        documents=args.documents,
        threshold=args.threshold,
        max_tokens=args.max_tokens,
        seed=args.seed,
    )
    progress = runtime.progress_for(args, client)
    run = runtime.run(
        curate(questions, args.out, ctx, concurrency=args.concurrency, progress=progress)
    )
    summary = run.summary
    outputs = {
        "partial_answers": args.out / "partial_answers.jsonl",
        "curation": args.out / "curation.jsonl",
    }
    lines = [
        f"{summary['curated']}/{summary['questions']} questions curated: "
        f"{summary['povs_extracted']} POVs, {summary['duplicates_removed']} duplicates removed",
        f"partial answers {outputs['partial_answers']}",
    ]
    unread = f"moot: {run.unparsed} questions got no readable POV list (see curation.jsonl)"
    return runtime.finish(
        args,
        run.tallies,
        client.ledger,
        failed=bool(run.unparsed),
        lines=lines,
        messages=[unread] if run.unparsed else [],
        outputs=outputs,
    )


def _curate_tools(args: argparse.Namespace, path: Path | None) -> tuple[Any, Any]:
    """`moot curate`'s retriever and embedder, or a dry run's stand-ins (`args.planning` set).

    A dry run never searches (the longest chunks stand in for each search), never indexes a
    corpus (it is read in memory) and loads no embedder.
    """
    from moot.core.retrieval.embeddings import DEFAULT_EMBEDDER, Embedder
    from moot.core.retrieval.index import Index, LocalRetriever, build_index

    embedder = args.embedder or DEFAULT_EMBEDDER
    if getattr(args, "planning", None) is None:
        index = Index.load(path) if path else build_index(args.docs, args.out / "index")
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
        chunks = corpus_chunks(args.docs)
        manifest = {"source_sha256": corpus_sha256(args.docs), "chunk_chars": DEFAULT_CHUNK_CHARS}
    retriever = StandInRetriever("bm25", chunks, search_identity("bm25", manifest=manifest))
    return retriever, StandInEmbedder(embedder)


def run_pd(args: argparse.Namespace) -> Result:
    """`moot eval pd`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download a scorer at run time
    from moot.core.data.questions import load_answers, load_partial_answers
    from moot.core.data.records import package_versions
    from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer
    from moot.graphs.debateqa_pd import (
        match_answers,
        pd_claim,
        score_answers,
        summarize,
        write_report,
    )

    answers = runtime.limited(load_answers(args.answers), args)
    partial_sets = load_partial_answers(args.partial_answers)
    pairs, unused = match_answers(answers, partial_sets, args.answers, args.partial_answers)
    out = args.out
    if unused and not args.limit:
        runtime.note(
            args,
            f"note: {len(unused)} partial-answer sets have no answer (first: id {unused[0]})",
        )
    claim = pd_claim(args.scorer, args.variant, args.max_length, args.dtype, args.backend)

    def make_scorer() -> PerspectiveDiversityScorer:
        from transformers.utils import logging

        logging.disable_progress_bar()
        return PerspectiveDiversityScorer(
            args.scorer,
            args.variant,
            batch_size=args.batch_size,
            max_length=args.max_length,
            device=args.device,
            dtype=args.dtype,
            backend=args.backend,
        )

    run = runtime.run(
        score_answers(pairs, out, make_scorer, claim, progress=runtime.progress_for(args))
    )
    summary = summarize(
        run.records,
        variant=args.variant,
        scorer=args.scorer,
        scorer_identity=claim["scorer"],
        window=run.window or _previous_window(out),
        dtype=args.dtype or "auto",
        backend=args.backend,
        partial_answer_sets_without_answer=len(unused),
        sources={"answers": str(args.answers), "partial_answers": str(args.partial_answers)},
        versions=package_versions("moot", "transformers", "torch"),
    )
    write_report(summary, out)
    outputs = {"scores": out / "scores.jsonl", "summary": out / "summary.json"}
    unscored = (
        f"moot: {summary['errors']} answers could not be scored (a partial answer longer "
        f"than the window); see 'error' in {outputs['scores']}"
    )
    return runtime.finish(
        args,
        run.tallies,
        failed=bool(summary["errors"]),
        lines=[(out / "summary.md").read_text(encoding="utf-8"), f"scores {outputs['scores']}"],
        messages=[unscored] if summary["errors"] else [],
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


def _previous_window(out: Path) -> int | None:
    """The window an earlier run recorded (this run scored nothing, so built no scorer)."""
    import json

    previous = out / "summary.json"
    if previous.exists():
        return json.loads(previous.read_text(encoding="utf-8")).get("window")
    return None


def _da_inputs(args: argparse.Namespace) -> tuple[list[Any], dict[str, str], Any]:
    """`moot eval da`'s answers (``--limit`` applied), their sources, and the judge."""
    from moot.core.data.questions import load_answers, load_questions
    from moot.graphs.debateqa_eval import with_questions

    questions = load_questions(args.questions) if args.questions else []
    answers = with_questions(load_answers(args.answers), args.answers, questions, args.questions)
    sources = {"answers": str(args.answers)}
    if args.questions:
        sources["questions"] = str(args.questions)
    return runtime.limited(answers, args), sources, runtime.role_from(args, "da_judge")


def run_da(args: argparse.Namespace) -> Result:
    """`moot eval da`."""
    from moot.graphs.debateqa_eval import evaluate_dispute_awareness
    from moot.graphs.judging import write_summary

    answers, sources, role = _da_inputs(args)
    judging = runtime.judging(args, role)
    result = runtime.run(evaluate_dispute_awareness(answers, judging))
    text = write_summary(result, args.out, sources)
    names = ("judgments.jsonl", "summary.json")
    return runtime.finish(
        args,
        result.tallies,
        judging.client.ledger,
        nothing_read=result.nothing_read,
        lines=[text, *(f"{name:<16} {args.out / name}" for name in names)],
        outputs={name.partition(".")[0]: args.out / name for name in names},
    )


def run_report(args: argparse.Namespace) -> Result:
    """`moot report debateqa`."""
    from moot.core.errors import ConfigError
    from moot.graphs.debateqa_report import write_report

    if len(args.pd) != len(args.da):
        raise ConfigError(f"{len(args.pd)} --pd folders but {len(args.da)} --da folders")
    names = args.names or tuple(folder.name for folder in args.pd)
    if len(names) != len(args.pd) or len(set(names)) != len(names):
        raise ConfigError(f"--names needs {len(args.pd)} different names, one per --pd folder")
    if (args.min_povs is None) != (args.partial_answers is None):
        raise ConfigError("--min-povs and --partial-answers go together")
    text = write_report(
        args.pd, args.da, names, args.k, args.out, args.min_povs, args.partial_answers
    )
    return runtime.finish(
        args,
        lines=[text.removesuffix("\n"), f"wrote report.json and report.md to {args.out}"],
        outputs={"report": args.out / "report.json", "markdown": args.out / "report.md"},
    )
