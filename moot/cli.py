"""The ``moot`` command line.

Heavy libraries (langgraph, litellm, datasets, llama.cpp) are imported inside the commands, so
``moot --help`` answers at once. Expected failures (`MootError`) print one line and exit 2; a run
whose work partly failed exits 1; ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_MODEL = "local/smollm2"
CHAT_TEMPLATES = ("alpaca", "llama-2", "llama-3", "vicuna", "zephyr")
LAUNCHES = ("ddp", "fsdp", "zero3", "zero3-offload")
FRAMEWORK_NAMES = ("debatrix", "non-iterative", "chronological", "dimensional", "direct")
DEMO_NOTE = (
    "note: local/smollm2 is the embedded 135M demo model: fluent, often off-topic or on the wrong "
    "side. Use a real model (--model, --judge) for real data."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "command_fn", None):
        parser.print_help()
        return 2
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # Ctrl-C cancels langgraph's executor with retry coroutines it never started; its warning
    # would bury the one-line "interrupted" message
    warnings.filterwarnings(
        "ignore", "coroutine 'arun_with_retry' was never awaited", RuntimeWarning
    )
    from moot.core.errors import MootError

    try:
        if getattr(args, "config", None):
            args = _apply_config(parser, argv, args)
        return int(args.command_fn(args) or 0)
    except MootError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"moot: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output path that is a file, a folder we may not write, a full disk
        if exc.filename is None:
            raise
        if args.debug:
            traceback.print_exc()
        print(f"moot: error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("moot: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (flags map 1:1 to the Python API's keyword arguments)."""
    parser = argparse.ArgumentParser(
        prog="moot", description="Multi-LLM debate simulation: debate data, training and judges."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    debate = commands.add_parser(
        "debate", help="generate DEBATunE debate data", description=_doc("debate")
    )
    debate.set_defaults(command_fn=_cmd_debate)
    debate.add_argument("--topics", help="topics file, datasets folder or hub name (required)")
    debate.add_argument("--out", type=Path, help="output folder (required)")
    debate.add_argument("--arguments-per-stance", type=_positive, default=3, metavar="K")
    debate.add_argument("--rounds", type=_positive, default=2, metavar="M")
    _model_options(debate, roles=("a", "b"), temperature=0.7)
    debate.add_argument("--seed", type=int, default=0, help="base sampling seed (default 0)")
    debate.add_argument("--turn-tokens", type=_positive, default=800, help="budget per turn")
    debate.add_argument("--conclusion-tokens", type=_positive, default=2048)
    debate.add_argument(
        "--concurrency",
        type=_positive,
        default=8,
        metavar="N",
        help="debates in flight (default 8)",
    )
    debate.add_argument("--shard", default="0/1", metavar="I/N", help="run shard I of N (0-based)")
    _run_options(debate)

    merge = commands.add_parser(
        "merge", help="join shard output folders", description=_doc("merge")
    )
    merge.set_defaults(command_fn=_cmd_merge)
    merge.add_argument("dirs", nargs="+", type=Path, metavar="DIR")
    merge.add_argument("--out", required=True, type=Path)
    merge.add_argument(
        "--allow-partial", action="store_true", help="merge even if shards are missing"
    )
    merge.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    evaluate = commands.add_parser(
        "eval", help="judge and score outputs (DEBATunE, PanelBench, DebateQA, BERDS)"
    )
    evaluate.set_defaults(command_fn=lambda _: evaluate.print_help() or 2)
    evaluations = evaluate.add_subparsers(title="evaluations", metavar="EVALUATION")
    for name, help_text in (
        ("controllability", "share of responses judged 100%% on their side (CC_P, CC_N)"),
        ("quality", "pairwise quality against a baseline, both orders (W/T/L, win score)"),
    ):
        sub = evaluations.add_parser(name, help=help_text, description=help_text.replace("%%", "%"))
        sub.set_defaults(command_fn=_cmd_eval, evaluation=name)
        sub.add_argument("--responses", type=Path, required=True, help="responses to judge")
        if name == "quality":
            sub.add_argument(
                "--baseline", type=Path, required=True, help="the baseline's responses"
            )
            sub.add_argument(
                "--stride",
                type=_positive,
                default=1,
                help="judge every S-th item (3 = the paper's 160-item subset)",
            )
            sub.add_argument(
                "--mask",
                action="append",
                default=[],
                type=_mask_name,
                metavar="NAME",
                help="replace NAME in both answers with [masked] (repeatable)",
            )
        sub.add_argument("--out", type=Path, required=True, help="output folder")
        sub.add_argument(
            "--judge",
            default=DEFAULT_MODEL,
            metavar="SPEC",
            help=f"judge model (default {DEFAULT_MODEL}; the paper used GPT-4)",
        )
        _call_options(sub)
        sub.add_argument("--concurrency", type=_positive, default=16, help="items judged at once")
        _constrained_option(sub, "JSON")
        _run_options(sub, config=False)
    panelbench = evaluations.add_parser(
        "panelbench",
        help="score `moot judge` outputs against PanelBench gold (DebateArt RMSE, BP accuracy)",
        description="RMSE x 100 of final and dimensional verdicts against DebateArt gold, from "
        "debater scores and from named winners; BP accuracy, completion and winners' positions. "
        "Unparsed, incomplete, failed and unjudged items are counted, never imputed.",
    )
    panelbench.set_defaults(command_fn=_cmd_eval_panelbench)
    panelbench.add_argument(
        "--predictions",
        type=Path,
        nargs="+",
        required=True,
        metavar="DIR",
        help="`moot judge` output folders, one per framework",
    )
    panelbench.add_argument(
        "--gold", type=Path, required=True, help="debates with gold: JSON/JSONL or DebateArt folder"
    )
    panelbench.add_argument(
        "--out", type=Path, help="output folder (default: the first DIR/panelbench)"
    )
    panelbench.add_argument(
        "--tie-margin",
        type=float,
        default=3.0,
        metavar="POINTS",
        help="source and language scores within this are a tie (default 3, the paper's)",
    )
    panelbench.add_argument("--quiet", action="store_true", help="do not print the summary")
    panelbench.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )

    generate = commands.add_parser(
        "generate",
        help="answer the DEBATunE test instructions with a model",
        description="Answer each topic's instructions (the paper's inference instruction, one per "
        "side and argument) and write the model-output format the judges read.",
    )
    generate.set_defaults(command_fn=_cmd_generate)
    generate.add_argument(
        "--dataset",
        required=True,
        help="topics with arguments per side (debate_test_v1_arg.jsonl shape)",
    )
    generate.add_argument(
        "--model",
        required=True,
        metavar="SPEC",
        help="provider/model, local/smollm2, or a local model / LoRA adapter folder",
    )
    generate.add_argument("--out", type=Path, required=True, help="output JSON file")
    generate.add_argument(
        "--template",
        choices=CHAT_TEMPLATES,
        help="chat template for a local model folder (default: its own)",
    )
    _call_options(generate)
    generate.add_argument("--max-tokens", type=_positive, default=2048)
    generate.add_argument("--concurrency", type=_positive, default=8)
    _run_options(generate, config=False)

    judge = commands.add_parser(
        "judge",
        help="judge debates speech by speech (Debatrix) or with a baseline framework",
        description="Judge each debate per dimension, speech by speech with memory (Debatrix), "
        "and combine the dimensions in a panel; or use one of the paper's baselines. Writes "
        "judgments.jsonl, summary.json and a report per judgment; reruns resume.",
    )
    judge.set_defaults(command_fn=_cmd_judge)
    judge.add_argument("--debates", help="debates: JSON/JSONL file or DebateArt folder (required)")
    judge.add_argument("--out", type=Path, help="output folder (required)")
    judge.add_argument("--framework", choices=FRAMEWORK_NAMES, default="debatrix")
    judge.add_argument(
        "--dimensions",
        type=_names,
        metavar="A,B,...",
        help="dimensions of split frameworks (default argument,source,language; "
        "BP: argument,support,clash,language)",
    )
    judge.add_argument(
        "--weights", type=_weights, metavar="A=W,...", help="panel weights (default: the paper's)"
    )
    judge.add_argument(
        "--judge",
        default=DEFAULT_MODEL,
        metavar="SPEC",
        help=f"judge model (default {DEFAULT_MODEL}; the paper used ChatGPT and GPT-4)",
    )
    _call_options(judge)
    judge.add_argument(
        "--context-window", type=_positive, metavar="TOKENS", help="the judge's context window"
    )
    judge.add_argument("--repeats", type=_positive, default=1, help="judgments per debate")
    judge.add_argument("--concurrency", type=_positive, default=4, help="debates judged at once")
    judge.add_argument("--analysis-tokens", type=_positive, default=1024, metavar="N")
    judge.add_argument("--judgment-tokens", type=_positive, default=1536, metavar="N")
    _constrained_option(judge, "JSON scores and winners")
    judge.add_argument("--report", choices=("md", "html"), default="md", help="report format")
    _run_options(judge)

    train = commands.add_parser("train", help="LoRA SFT (trl + peft), on one process or many")
    train.set_defaults(command_fn=lambda _: train.print_help() or 2)
    train_commands = train.add_subparsers(title="commands", metavar="COMMAND")
    sft = train_commands.add_parser(
        "sft",
        help="LoRA SFT with assistant-only loss",
        description="Fine-tune a LoRA adapter with trl's SFTTrainer: a YAML config (over a "
        "preset), then section.key=value overrides. Resumes from the last checkpoint; a "
        "finished run is not redone.",
    )
    sft.set_defaults(command_fn=_cmd_train_sft)
    sft.add_argument(
        "--config", dest="train_config", type=Path, required=True, help="the run's YAML config"
    )
    sft.add_argument(
        "overrides", nargs="*", metavar="SECTION.KEY=VALUE", help="e.g. training.epochs=1"
    )
    launch = sft.add_argument_group("launch on many processes (accelerate launch)")
    launch.add_argument("--launch", choices=LAUNCHES, help="distributed strategy")
    launch.add_argument("--num-processes", type=_positive, default=1, metavar="N")
    launch.add_argument("--num-machines", type=_positive, default=1, metavar="M")
    launch.add_argument("--machine-rank", type=int, default=0, metavar="R")
    launch.add_argument("--main-process-ip", metavar="IP")
    launch.add_argument("--main-process-port", type=int, metavar="PORT")
    sft.add_argument("--quiet", action="store_true", help="no progress bar or per-step losses")
    sft.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    merge_adapter = train_commands.add_parser(
        "merge",
        help="merge a LoRA adapter into its base model",
        description="Write one Hugging Face model folder (base + adapter merged) that "
        "`moot generate`, vLLM or any server can load.",
    )
    merge_adapter.set_defaults(command_fn=_cmd_train_merge)
    merge_adapter.add_argument("--adapter", type=Path, required=True, metavar="DIR")
    merge_adapter.add_argument("--out", type=Path, required=True, metavar="DIR")
    merge_adapter.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    data_group = commands.add_parser("data", help="build SFT datasets: CompQA distillation, mixing")
    data_group.set_defaults(command_fn=lambda _: data_group.print_help() or 2)
    data_commands = data_group.add_subparsers(title="commands", metavar="COMMAND")
    distill = data_commands.add_parser(
        "distill-compqa",
        help="judged CompQA answers scoring at least 18 of 19 as SFT records",
        description="Keep the judged comparative answers (CompQA's evaluated_summaries files) "
        "that scored at least --min-score of 19 and write them as chat SFT records. Exits 1 "
        "when none passed.",
    )
    distill.set_defaults(command_fn=_cmd_data_distill_compqa)
    distill.add_argument(
        "--judged",
        type=Path,
        nargs="+",
        required=True,
        metavar="FILE",
        help="judged answer files (<generator>_scenario_<N>.json, cam.json, ...)",
    )
    distill.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    distill.add_argument(
        "--min-score",
        type=float,
        default=18.0,
        metavar="S",
        help="lowest total score kept, 0-19 (default 18, the paper's threshold)",
    )
    distill.add_argument("--quiet", action="store_true", help="do not print the table")
    distill.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    mix = data_commands.add_parser(
        "mix",
        help="combine SFT datasets: deduplicated, weighted, split train/eval",
        description="Combine SFT datasets (moot debate, distill-compqa or mix outputs, JSON/JSONL, "
        "datasets folders, cached hub datasets) into one DatasetDict with train and eval splits, "
        "deduplicated on messages and split by a seeded hash of each row's id.",
    )
    mix.set_defaults(command_fn=_cmd_data_mix)
    mix.add_argument(
        "--in", dest="inputs", nargs="+", required=True, metavar="SRC", help="datasets to combine"
    )
    mix.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    mix.add_argument(
        "--weights",
        type=float,
        nargs="+",
        metavar="W",
        help="one per input: 1 = every row, 0.5 = a seeded half, 2 = every row twice",
    )
    mix.add_argument(
        "--eval-fraction",
        type=float,
        default=0.05,
        metavar="F",
        help="share of rows in the eval split, in [0, 1) (default 0.05; 0 = no eval split)",
    )
    mix.add_argument("--seed", type=int, default=0, help="seeds the weight sampling and the split")
    mix.add_argument("--quiet", action="store_true", help="do not print the table")
    mix.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    models = commands.add_parser("models", help="model utilities")
    models.set_defaults(command_fn=lambda _: models.print_help() or 2)
    model_commands = models.add_subparsers(title="commands", metavar="COMMAND")
    check = model_commands.add_parser("check", help="one round trip: latency and tokens")
    check.set_defaults(command_fn=_cmd_models_check)
    check.add_argument("spec", metavar="SPEC", help="provider/model, e.g. local/smollm2")
    check.add_argument("--api-base", metavar="URL")
    check.add_argument("--api-key-env", metavar="VAR")
    check.add_argument("--timeout", type=_seconds, default=60.0, help="seconds (default 60)")
    check.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)

    # DebateQA / BERDS: corpora and retrieval, answering, and their metrics under `eval`
    from moot import cli_answer, cli_berds, cli_pd, cli_retrieval

    for module in (cli_retrieval, cli_answer, cli_pd, cli_berds):
        module.register(commands, evaluations)

    # CompQA: comparative answers, the rubric judge and the report
    from moot import cli_compare, cli_compqa_eval, cli_compqa_report

    for module in (cli_compare, cli_compqa_eval, cli_compqa_report):
        module.register(commands, evaluations)
    return parser


def _model_options(
    parser: argparse.ArgumentParser, roles: Sequence[str], temperature: float
) -> None:
    group = parser.add_argument_group("models")
    group.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        metavar="SPEC",
        help=f"model for every role (default {DEFAULT_MODEL})",
    )
    group.add_argument("--api-base", metavar="URL", help="OpenAI-compatible server for --model")
    group.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the key")
    group.add_argument("--temperature", type=float, default=temperature)
    for role in roles:
        group.add_argument(
            f"--model-{role}", metavar="SPEC", help=f"model for debater {role.upper()}"
        )
        group.add_argument(f"--api-base-{role}", metavar="URL")
        group.add_argument(f"--temperature-{role}", type=float)
    group.add_argument("--timeout", type=_seconds, help="seconds per request before retrying")
    group.add_argument("--max-concurrency", type=_positive, help="requests in flight per model")
    group.add_argument("--context-window", type=_positive, help="model context window in tokens")
    group.add_argument("--max-retries", type=int, default=5, help="retries per call (default 5)")


def _call_options(parser: argparse.ArgumentParser) -> None:
    """Flags of a command that talks to one model (generate, eval)."""
    group = parser.add_argument_group("model")
    group.add_argument("--api-base", metavar="URL", help="OpenAI-compatible server")
    group.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the key")
    group.add_argument("--temperature", type=float, default=0.0)
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--timeout", type=_seconds, help="seconds per request before retrying")
    group.add_argument("--max-retries", type=int, default=5, help="retries per call (default 5)")


def _constrained_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--constrained/--no-constrained``: send a JSON schema as ``response_format``."""
    parser.add_argument(
        "--constrained",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"ask for schema-constrained {what} (default: on for local/smollm2)",
    )


def _constrained(args: argparse.Namespace, role: Any) -> bool:
    """`--constrained` as given, else on for the embedded model (it decodes to the schema)."""
    if args.constrained is None:
        return role.spec.transport == "embedded"
    return bool(args.constrained)


def _run_options(parser: argparse.ArgumentParser, config: bool = True) -> None:
    group = parser.add_argument_group("run")
    if config:
        group.add_argument(
            "--config", type=Path, help="YAML file of option defaults (keys = flag names)"
        )
    group.add_argument("--cache", type=Path, help="request cache file (default $MOOT_CACHE_DIR)")
    group.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    group.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    group.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def _cmd_debate(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.topics import load_topics
    from moot.graphs.debatune_run import DebateRunConfig, Shard, check_run_folder, run_debatune

    _require(args, "topics", "out")
    shard = Shard.parse(args.shard)
    topics = load_topics(args.topics)
    role_a, role_b = _role(args, "a", "debater_a"), _role(args, "b", "debater_b")
    config = DebateRunConfig(
        debater_a=role_a,
        debater_b=role_b,
        rounds=args.rounds,
        arguments_per_stance=args.arguments_per_stance,
        seed=args.seed,
        turn_tokens=args.turn_tokens,
        conclusion_tokens=args.conclusion_tokens,
    )
    check_run_folder(args.out, config, shard)
    client = _client(args, role_a.spec, role_b.spec)
    # warnings only once every check passed: refused input gets its one error line alone
    if role_a.spec == role_b.spec and role_a.temperature == role_b.temperature:
        _note(
            args,
            f"warning: both debaters use {role_a.spec.name} at temperature "
            f"{role_a.temperature:g}; set --model-b or --temperature-b for distinct voices",
        )
    if DEFAULT_MODEL in (role_a.spec.name, role_b.spec.name):
        _note(args, DEMO_NOTE)
    with _Progress(args, "debates") as progress:
        summary = asyncio.run(
            run_debatune(
                topics,
                args.out,
                config,
                client,
                concurrency=args.concurrency,
                shard=shard,
                source=str(args.topics),
                on_progress=progress.update,
            )
        )
    if not args.quiet:
        _print_run_summary(summary)
    for failure in summary.failures:
        print(f"moot: failed {failure['id']}: {failure['error']}", file=sys.stderr)
    if summary.failures:
        print(
            f"moot: {len(summary.failures)} failed; rerun the same command to retry them",
            file=sys.stderr,
        )
    return 0 if summary.ok else 1


def _cmd_merge(args: argparse.Namespace) -> int:
    from moot.graphs.debatune_run import merge_runs

    counts = merge_runs(args.dirs, args.out, allow_partial=args.allow_partial)
    print(
        f"merged {len(args.dirs)} folder(s) into {args.out}: {counts['debates']} debates, "
        f"{counts['dataset_records']} dataset records, {counts['failures']} failed"
    )
    if counts["failures"]:
        print(
            f"moot: {counts['failures']} failed in the shards; rerun their `moot debate` "
            "commands, then merge again",
            file=sys.stderr,
        )
    return 1 if counts["failures"] else 0


def _cmd_generate(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.records import check_out_file
    from moot.core.data.topics import load_topics
    from moot.core.errors import ConfigError
    from moot.graphs.debatune_generate import debate_test_instructions, generate_responses
    from moot.prompts import template_source

    check_out_file(args.out, [args.dataset])
    items = debate_test_instructions(load_topics(args.dataset), args.dataset)
    text = f"hf/{args.model}" if Path(args.model).is_dir() else args.model
    template = template_source(f"chat_templates/{args.template}.j2") if args.template else None
    role = _single_role(args, text, "generator", chat_template=template)
    if template and role.spec.transport != "hf":
        raise ConfigError("--template applies to local model folders only")
    client = _client(args, role.spec)
    records, failed = asyncio.run(
        generate_responses(
            items,
            args.out,
            role,
            client,
            concurrency=args.concurrency,
            max_tokens=args.max_tokens,
            seed=args.seed,
        )
    )
    total = client.ledger.total()
    if not args.quiet:
        print(
            f"{len(records) - failed}/{len(records)} answered by {role.spec.name}; "
            f"{total.calls} calls ({total.cache_hits} cached), "
            f"{total.completion_tokens} completion tokens"
        )
    if failed:
        print(
            f"moot: {failed} failed; {args.out} not written; rerun the same command to retry",
            file=sys.stderr,
        )
        return 1
    if not args.quiet:
        print(f"responses {args.out}")
    return 0


def _cmd_judge(args: argparse.Namespace) -> int:
    import asyncio

    from moot.agents.debatrix_judges import FRAMEWORKS
    from moot.core.data.debates import load_debates
    from moot.graphs.debatrix_run import JudgeSettings, judge_debates

    _require(args, "debates", "out")
    debates = load_debates(args.debates)
    role = _single_role(args, args.judge, "judge", context_window=args.context_window)
    settings = JudgeSettings(
        role=role,
        framework=FRAMEWORKS[args.framework],
        dimensions=args.dimensions,
        weights=args.weights or {},
        seed=args.seed,
        constrained=_constrained(args, role),
        analysis_tokens=args.analysis_tokens,
        judgment_tokens=args.judgment_tokens,
    )
    settings.plan(debates)  # bad dimensions fail before the judge is contacted
    client = _client(args, role.spec)
    with _Progress(args, "judgments") as progress:
        summary = asyncio.run(
            judge_debates(
                debates,
                args.out,
                settings,
                client,
                repeats=args.repeats,
                concurrency=args.concurrency,
                report_format=args.report,
                on_progress=progress.update,
            )
        )
    errors = summary.count("error")
    if not args.quiet:
        total = client.ledger.total()
        print(
            f"judged {len(summary.records)}/{summary.planned} ({summary.already_done} before): "
            f"{summary.count('complete')} complete, {summary.count('incomplete')} incomplete "
            f"(prompt over the context window), {errors} failed; "
            f"{summary.parse_failures} unparsed scores or winners"
        )
        print(
            f"judge calls {total.calls} ({total.cache_hits} cached), "
            f"{total.prompt_tokens} prompt + {total.completion_tokens} completion tokens"
        )
        out = args.out
        print(f"judgments {out / 'judgments.jsonl'}\nsummary   {out / 'summary.json'}")
        print(f"reports   {out / 'reports'}")
    for record in summary.records:
        if record["status"] == "error":
            print(f"moot: failed {record['debate']}: {record['reason']}", file=sys.stderr)
    return _judge_exit(errors, summary.nothing_read, "judgments")


def _cmd_eval(args: argparse.Namespace) -> int:
    import asyncio

    from moot.core.data.responses import load_responses
    from moot.graphs.debatune_eval import (
        align,
        evaluate_controllability,
        evaluate_quality,
        write_report,
    )

    responses = load_responses(args.responses)
    sources = {"responses": str(args.responses)}
    if args.evaluation == "quality":
        baseline = load_responses(args.baseline)
        align(responses, baseline, args.baseline)
        sources["baseline"] = str(args.baseline)
    role = _single_role(args, args.judge, f"{args.evaluation}_judge")
    client = _client(args, role.spec)
    constrained = _constrained(args, role)
    if args.evaluation == "quality":
        run = evaluate_quality(
            responses,
            baseline,
            args.out,
            role,
            client,
            stride=args.stride,
            concurrency=args.concurrency,
            seed=args.seed,
            mask=args.mask,
            constrained=constrained,
        )
    else:
        run = evaluate_controllability(
            responses,
            args.out,
            role,
            client,
            concurrency=args.concurrency,
            seed=args.seed,
            constrained=constrained,
        )
    result = asyncio.run(run)
    write_report(result, args.out, sources)
    if not args.quiet:
        print((args.out / "summary.md").read_text(encoding="utf-8"))
        print(f"judgments {args.out / 'judgments.jsonl'}\nchart     {args.out / 'chart.png'}")
        total = client.ledger.total()
        print(f"judge calls {total.calls} ({total.cache_hits} cached)")
    return _judge_exit(result.errors, result.nothing_read)


def _cmd_eval_panelbench(args: argparse.Namespace) -> int:
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
    out = args.out or args.predictions[0] / "panelbench"
    write_panelbench_report(summary, out)
    if not args.quiet:
        print((out / "summary.md").read_text(encoding="utf-8"))
        print(f"summary {out / 'summary.json'}\nchart   {out / 'chart.png'}")
    return 0


def _cmd_train_sft(args: argparse.Namespace) -> int:
    from moot.core.errors import ConfigError
    from moot.training.sft_config import load_sft_config

    config = load_sft_config(args.train_config, args.overrides)  # checked before any launch
    launch_only = {
        "--num-processes": args.num_processes > 1,
        "--num-machines": args.num_machines > 1,
        "--machine-rank": args.machine_rank != 0,
        "--main-process-ip": args.main_process_ip is not None,
        "--main-process-port": args.main_process_port is not None,
    }
    if not args.launch and any(launch_only.values()):
        given = ", ".join(flag for flag, used in launch_only.items() if used)
        raise ConfigError(f"{given} need --launch (e.g. --launch ddp)")
    if args.launch:
        from moot.training.launch import run_launch

        return run_launch(
            args.launch,
            args.train_config,
            ["--quiet", *args.overrides] if args.quiet else args.overrides,
            num_processes=args.num_processes,
            num_machines=args.num_machines,
            machine_rank=args.machine_rank,
            main_process_ip=args.main_process_ip,
            main_process_port=args.main_process_port,
        )
    from moot.training.sft_trainer import exit_worker, train_sft

    result = train_sft(config, log=print, progress=not args.quiet)
    if result.manifest:  # the main process
        print(f"adapter  {result.adapter_dir}\nmanifest {result.output_dir / 'manifest.json'}")
    exit_worker()  # a launched worker ends here, with 0
    return 0


def _cmd_train_merge(args: argparse.Namespace) -> int:
    from moot.training.merge import merge_adapter

    print(f"merged   {merge_adapter(args.adapter, args.out)}")
    return 0


def _cmd_data_distill_compqa(args: argparse.Namespace) -> int:
    from moot.training.compqa_data import distill_compqa

    summary = distill_compqa(args.judged, args.out, min_score=args.min_score)
    if not args.quiet:
        print(summary.table())
    if not summary.kept:
        print(f"moot: no answer scored >= {args.min_score:g}; nothing written", file=sys.stderr)
        return 1
    print(
        f"wrote {summary.kept} records to {args.out} (dataset.jsonl, dataset/, manifest.json, "
        f"README.md); {summary.duplicates} duplicate(s) dropped"
    )
    if summary.invalid_judgments:
        _note(args, f"note: {summary.invalid_judgments} invalid or failed judgment(s) skipped")
    if summary.unchecked_scores:
        _note(args, f"note: {summary.unchecked_scores} score(s) kept unchecked: no score_dict")
    return 0


def _cmd_data_mix(args: argparse.Namespace) -> int:
    from moot.training.mixing import mix_datasets

    summary = mix_datasets(
        args.inputs,
        args.out,
        weights=args.weights,
        eval_fraction=args.eval_fraction,
        seed=args.seed,
    )
    if not args.quiet:
        print(summary.table())
    print(
        f"wrote {args.out}: {summary.train} train and {summary.eval} eval rows; "
        f"{summary.duplicates} duplicate(s) dropped"
    )
    return 0


def _cmd_models_check(args: argparse.Namespace) -> int:
    import asyncio
    import time

    from moot.core.llm.models import ModelClient, RetryPolicy
    from moot.core.llm.spec import Role, parse_spec

    spec = parse_spec(
        args.spec, api_base=args.api_base, api_key_env=args.api_key_env, timeout=args.timeout
    )
    client = ModelClient(retry=RetryPolicy(attempts=1))
    client.prepare(spec)
    role = Role("check", spec, temperature=0.0)
    messages = [{"role": "user", "content": "Reply with one short sentence: are you ready?"}]
    from moot.core.errors import EndpointError, ModelCallError

    start = time.perf_counter()
    try:
        reply = asyncio.run(client.complete(role, messages, stage="check", max_tokens=32, seed=0))
    except ModelCallError as exc:
        raise EndpointError(str(exc)) from None
    latency = time.perf_counter() - start
    print(
        f"{spec.name}: ok in {latency * 1000:.0f} ms, {reply.prompt_tokens} prompt + "
        f"{reply.completion_tokens} completion tokens"
    )
    print(f"reply: {reply.text.strip()[:200]}")
    return 0


def _role(args: argparse.Namespace, suffix: str, name: str) -> Any:
    from moot.core.llm.spec import Role, parse_spec

    spec_text = getattr(args, f"model_{suffix}") or args.model
    own_model = getattr(args, f"model_{suffix}") is not None
    api_base = getattr(args, f"api_base_{suffix}") or (None if own_model else args.api_base)
    spec = parse_spec(
        spec_text,
        api_base=api_base,
        api_key_env=args.api_key_env,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency,
        context_window=args.context_window,
    )
    temperature = getattr(args, f"temperature_{suffix}")
    return Role(name, spec, args.temperature if temperature is None else temperature)


def _single_role(args: argparse.Namespace, text: str, name: str, **options: Any) -> Any:
    """The one model of `generate` or `eval`, from its spec text and the `_call_options`."""
    from moot.core.llm.spec import Role, parse_spec

    spec = parse_spec(
        text, api_base=args.api_base, api_key_env=args.api_key_env, timeout=args.timeout, **options
    )
    if spec.transport == "embedded":
        _note(args, DEMO_NOTE)
    return Role(name, spec, args.temperature)


def _client(args: argparse.Namespace, *specs: Any) -> Any:
    """The model layer for a command, with credentials and endpoints checked up front."""
    from moot.core.llm.models import ModelClient

    client = ModelClient(cache=_cache(args), retry=_retry(args))
    for spec in specs:
        client.prepare(spec)
    return client


def _cache(args: argparse.Namespace) -> Any:
    if args.no_cache:
        return None
    from moot.core.llm.cache import RequestCache, default_cache_path

    return RequestCache(args.cache or default_cache_path())


def _retry(args: argparse.Namespace) -> Any:
    from moot.core.llm.models import RetryPolicy

    if args.max_retries < 0:
        from moot.core.errors import ConfigError

        raise ConfigError("--max-retries must be 0 or more")
    return RetryPolicy(attempts=args.max_retries + 1)


def _apply_config(
    parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace
) -> argparse.Namespace:
    """Re-parse with a YAML file's values as defaults, so flags on the command line still win."""
    import yaml

    from moot.core.errors import InputError

    path = args.config
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(path, f"cannot read config: {str(exc).splitlines()[0]}") from None
    if not isinstance(values, dict):
        raise InputError(path, "expected a mapping of option names to values")
    subparser = _subparser_for(parser, args.command_fn)
    actions = {action.dest: action for action in subparser._actions}
    defaults = {}
    for key, value in values.items():
        action = actions.get(str(key).replace("-", "_"))
        if action is None or action.dest in ("config", "help"):
            raise InputError(path, f"unknown option {key!r}")
        defaults[action.dest] = _config_value(path, key, action, value)
    subparser.set_defaults(**defaults)
    return parser.parse_args(argv)


def _config_value(path: Path, key: object, action: argparse.Action, value: object) -> object:
    """Check and convert a config value exactly as the flag's own parser would."""
    from moot.core.errors import InputError

    if action.nargs == 0:  # an on/off flag
        if not isinstance(value, bool):
            raise InputError(path, f"option {key!r}: expected true or false")
        return value
    if value is None:
        if action.default is not None:  # e.g. `rounds:` with nothing after it
            raise InputError(path, f"option {key!r}: needs a value")
        return None
    try:
        return (action.type or str)(str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
        raise InputError(path, f"option {key!r}: {exc}") from None


def _require(args: argparse.Namespace, *names: str) -> None:
    from moot.core.errors import ConfigError

    for name in names:
        if getattr(args, name) is None:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"missing {flag} (on the command line or as `{name}:` in --config)")


def _subparser_for(parser: argparse.ArgumentParser, fn: Any) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for sub in action.choices.values():
            if sub.get_default("command_fn") is fn:
                return sub
    raise LookupError(fn)


def _print_run_summary(summary: Any) -> None:
    out = summary.out_dir
    total = summary.ledger.total()
    print()
    print(
        f"dataset   {out / 'dataset.jsonl'}  ({summary.dataset_records} records; "
        f"datasets copy in {out / 'dataset'})"
    )
    print(f"debates   {out / 'debates.jsonl'}")
    print(f"manifest  {out / 'manifest.json'}")
    print()
    failed_debates = sum(1 for f in summary.failures if f["kind"] == "debate")
    print(
        f"debates planned {summary.planned}, done before {summary.already_done}, "
        f"completed now {summary.completed}, failed {failed_debates}, "
        f"argument lists failed {len(summary.failures) - failed_debates}, {summary.seconds:.1f}s"
    )
    print(_ledger_table(summary.ledger))
    cost = f"${total.cost_usd:.4f}"
    if summary.ledger.unpriced:
        cost += f" (+ unpriced: {', '.join(sorted(summary.ledger.unpriced))})"
    print(
        f"total: {total.calls} calls ({total.cache_hits} cached), "
        f"{total.prompt_tokens + total.completion_tokens} tokens, cost {cost}"
    )


def _ledger_table(ledger: Any) -> str:
    header = ("role", "stage", "model", "calls", "cached", "prompt", "completion", "cost $")
    rows = [header] + [
        (
            role,
            stage,
            model,
            str(u.calls),
            str(u.cache_hits),
            str(u.prompt_tokens),
            str(u.completion_tokens),
            f"{u.cost_usd:.4f}",
        )
        for (role, stage, model), u in sorted(ledger.entries.items())
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines)


class _Progress:
    """A tqdm bar with ETA on a terminal; silent otherwise."""

    def __init__(self, args: argparse.Namespace, unit: str) -> None:
        self.enabled = not args.quiet and sys.stderr.isatty()
        self.unit, self.bar = unit, None

    def __enter__(self) -> _Progress:
        return self

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=self.unit, file=sys.stderr)
        self.bar.update(done - self.bar.n)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _judge_exit(errors: int, nothing_read: bool, failed: str = "judge calls") -> int:
    """A judging command's exit code, with the reason on stderr.

    1 when judge calls failed for good (a rerun retries them) or when not one reply could be
    read, so nothing was measured; else 0.
    """
    if errors:
        retry = "rerun the same command to retry them"
        print(f"moot: {errors} {failed} failed; {retry}", file=sys.stderr)
    if nothing_read:
        print(
            "moot: not one judge reply could be read (each is recorded with its problem), so "
            "nothing was measured; check the judge model and its replies in the output",
            file=sys.stderr,
        )
    return 1 if errors or nothing_read else 0


def _note(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def _mask_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a non-blank name")
    return text


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return names


def _weights(text: str) -> dict[str, float]:
    weights = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT, got {part!r}") from None
        if not name.strip() or weight < 0:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT with WEIGHT >= 0, got {part!r}")
        weights[name.strip()] = weight
    return weights


def _doc(command: str) -> str:
    return {
        "debate": "Two agents with opposite stances debate each argument for M rounds; the "
        "supporting agent concludes a statement that becomes an SFT record. Reruns "
        "resume; see docs/cli.md.",
        "merge": "Join the output folders of `moot debate --shard I/N` runs into one dataset.",
    }[command]
