"""DEBATunE's commands: `moot debate`, `merge-shards`, `generate`, `eval controllability|quality`.

Li et al., ACL 2024.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

#: An earlier version's `moot debate` and `moot merge-shards` folders: their manifest.
DEBATUNE_MANIFEST = Mark("manifest.json", "kind", "debatune")

CHAT_TEMPLATES = ("alpaca", "chatml", "llama-2", "llama-3", "vicuna", "zephyr")


def register(commands: Commands) -> None:
    """Add DEBATunE's commands."""
    debate = commands.add(
        "debate",
        run_debate,
        "generate DEBATunE debate data",
        "Two agents with opposite stances debate each argument for M rounds; the supporting "
        "agent concludes a statement that becomes an SFT record. Reruns resume; see docs/cli.md.",
        plan=True,
        output=Output("debate", (claim_mark("run"), DEBATUNE_MANIFEST)),
    )
    debate.add_argument(
        "--topics",
        type=opt.input_source,
        help="topics file, datasets folder or hub name (required)",
    )
    opt.out_option(debate)
    opt.required(debate, "topics")
    debate.add_argument("--arguments-per-stance", type=opt.positive, default=3, metavar="K")
    debate.add_argument(
        "--rounds",
        type=opt.non_negative,
        default=2,
        metavar="M",
        help="debate rounds (default 2, the paper's); 0: no debate, debater A's opening "
        "statement is the record (the paper's 'Topic Data without Debate' ablation)",
    )
    debate.add_argument("--turn-tokens", type=opt.positive, default=800, help="budget per turn")
    debate.add_argument("--conclusion-tokens", type=opt.positive, default=2048)
    debate.add_argument("--shard", default="0/1", metavar="I/N", help="run shard I of N (0-based)")
    opt.model_options(
        debate, what="model of both debaters", temperature=0.7, concurrency=8, unit="debates"
    )
    opt.debater_options(debate)
    opt.hub_options(debate, "dataset")

    commands.add(
        "merge-shards",
        MergeShards,
        "join the output folders of `moot debate --shard I/N` runs",
        "Join the output folders of `moot debate --shard I/N` runs into one dataset.",
        aliases=("merge",),
        output=Output("debate", (DEBATUNE_MANIFEST,)),
    )

    generate = commands.add(
        "generate",
        run_generate,
        "answer the DEBATunE test instructions with a model",
        "Answer each topic's instructions (the reference's inference instruction, one per side and "
        "argument) and write the model-output format the judges read.",
        plan=True,
    )
    generate.add_argument(
        "--dataset",
        type=opt.input_source,
        help="topics with arguments per side (debate_test_v1_arg.jsonl shape)",
    )
    opt.out_option(generate, "output JSON file", "FILE", progress=True)
    opt.required(generate, "dataset")
    generate.add_argument(
        "--template",
        choices=CHAT_TEMPLATES,
        help="chat template for a local model folder (default: its own)",
    )
    opt.model_options(
        generate,
        what="provider/model, local/smollm2, or a local model / LoRA adapter folder",
        default=None,
        max_tokens=2048,
        concurrency=8,
        unit="instructions",
    )
    generate.add_argument(
        "--max-length",
        type=opt.positive,
        metavar="N",
        help="instead of --max-tokens: a budget that counts the prompt's tokens too, as the "
        "reference's generate(max_length=2048); local model folders only",
    )
    opt.batch_options(generate, 1, "greedy instructions")
    generate.set_defaults(max_tokens=None)  # 2048 unless --max-length: the two exclude each other

    for name, run, text in (
        ("controllability", run_eval, "share of responses judged 100% on their side (CC_P, CC_N)"),
        ("quality", run_eval, "pairwise quality against a baseline, both orders (W/T/L, score)"),
    ):
        sub = commands.add(
            name,
            run,
            text.replace("%", "%%"),
            text,
            group="eval",
            plan=True,
            output=Output(name, (claim_mark(EVAL_CLAIM),)),
        )
        sub.set_defaults(evaluation=name)
        sub.add_argument("--responses", type=opt.input_file, help="responses to judge (required)")
        opt.out_option(sub)
        opt.required(sub, "responses")
        if name == "quality":
            sub.add_argument(
                "--baseline", type=opt.input_file, help="the baseline's responses (required)"
            )
            opt.required(sub, "baseline")
            sub.add_argument(
                "--stride",
                type=opt.positive,
                default=1,
                help="judge every S-th item (3 = the paper's 160-item subset)",
            )
            sub.add_argument(
                "--mask",
                action="append",
                default=[],
                type=opt.non_blank,
                metavar="NAME",
                help="replace NAME in both answers with [masked] (repeatable)",
            )
        opt.model_options(
            sub,
            flag="--judge",
            what="judge model",
            note="the paper used GPT-4",
            constrained="JSON",
            concurrency=16,
            unit="responses",
        )


def _debate_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """`moot debate`'s topics, configuration and shard, checked against its ``--out``."""
    from moot.core.data.topics import load_topics
    from moot.graphs.debatune_run import DebateRunConfig, Shard, check_run_folder

    shard = Shard.parse(args.shard)
    topics = load_topics(args.topics)
    config = DebateRunConfig(
        debater_a=runtime.debater_role(args, "a", "debater_a"),
        debater_b=runtime.debater_role(args, "b", "debater_b"),
        rounds=args.rounds,
        arguments_per_stance=args.arguments_per_stance,
        seed=args.seed,
        turn_tokens=args.turn_tokens,
        conclusion_tokens=args.conclusion_tokens,
    )
    check_run_folder(args.out, config, shard)
    return topics, config, shard


def run_debate(args: argparse.Namespace) -> Result:
    """`moot debate`."""
    from moot.graphs.debatune_run import run_debatune

    topics, config, shard = _debate_inputs(args)
    role_a, role_b = config.debater_a, config.debater_b
    client = runtime.client_for(args, role_a.spec, role_b.spec)
    # warnings only once every check passed: refused input gets its one error line alone
    if args.rounds and role_a.spec == role_b.spec and role_a.temperature == role_b.temperature:
        runtime.note(
            args,
            f"warning: both debaters use {role_a.spec.name} at temperature "
            f"{role_a.temperature:g}; set --model-b or --temperature-b for distinct voices",
        )
    summary = runtime.run(
        run_debatune(
            topics,
            args.out,
            config,
            client,
            concurrency=args.concurrency,
            shard=shard,
            source=str(args.topics),
            limit=args.limit,
            progress=runtime.progress_for(args, client),
        )
    )
    out = summary.out_dir
    outputs = {
        "dataset": out / "dataset.jsonl",
        "debates": out / "debates.jsonl",
        "manifest": out / "manifest.json",
        "card": out / "README.md",
    }
    lines = [
        f"dataset   {outputs['dataset']}  ({summary.dataset_records} records; "
        f"datasets copy in {out / 'dataset'})",
        f"debates   {outputs['debates']}",
        f"manifest  {outputs['manifest']}",
        f"card      {outputs['card']}",
    ]
    failures = [f"moot: failed {f['id']}: {f['error']}" for f in summary.failures]
    result = runtime.finish(
        args, summary.tallies, client.ledger, lines=lines, messages=failures, outputs=outputs
    )
    return runtime.push(args, summary.out_dir, "dataset", result)


class MergeShards(Job):
    """`moot merge-shards` (also `moot merge`)."""

    class Settings(opt.CommonSettings):
        """`moot merge-shards`' settings."""

        dirs: list[str] = flag(positional=True, nargs="+", parse=opt.input_source, metavar="DIR")
        out: Path = opt.out_flag()
        allow_partial: bool = flag(
            False, action="store_true", help="merge even if shards are missing"
        )

    settings: Settings

    def run(self) -> Result:
        """Join the shards' folders into ``--out``."""
        from moot.graphs.debatune_merge import merge_runs

        dirs, out = self.settings.dirs, self.settings.out
        counts = merge_runs(dirs, out, allow_partial=self.settings.allow_partial)
        line = (
            f"merged {len(dirs)} folder(s) into {out}: {counts['debates']} debates, "
            f"{counts['dataset_records']} dataset records, {counts['failures']} failed"
        )
        failed = [
            f"moot: {counts['failures']} failed in the shards; rerun their `moot debate` "
            "commands, then merge again"
        ]
        return self.finish(
            lines=[line],
            messages=failed if counts["failures"] else [],
            failed=bool(counts["failures"]),
            outputs={"dataset": out / "dataset.jsonl", "debates": out / "debates.jsonl"},
        )


def _generate_inputs(args: argparse.Namespace) -> tuple[list[Any], Any, int | None]:
    """`moot generate`'s instructions (``--limit`` applied), role and ``--max-tokens``."""
    from moot.core.data.planned import is_planned
    from moot.core.data.records import check_out_file
    from moot.core.data.topics import load_topics
    from moot.core.errors import ConfigError
    from moot.graphs.debatune_generate import debate_test_instructions
    from moot.prompts import template_source

    check_out_file(args.out)
    items = debate_test_instructions(load_topics(args.dataset), args.dataset)
    local = Path(args.model).is_dir() or is_planned(args.model)  # `{sft}/adapter` in a dry run
    text = f"hf/{args.model}" if local else args.model
    template = template_source(f"chat_templates/{args.template}.j2") if args.template else None
    role = runtime.role_from(args, "generator", text, chat_template=template)
    if template and "chat_template" not in role.spec.transport_class.options:
        raise ConfigError("--template applies to local model folders only")
    if args.max_length is not None and args.max_tokens is not None:
        raise ConfigError("--max-length and --max-tokens exclude each other: give one")
    if args.max_length is not None and not role.spec.transport_class.takes_max_length:
        raise ConfigError(
            "--max-length applies to local model folders only (their tokenizer counts the "
            "prompt); use --max-tokens"
        )
    max_tokens = None if args.max_length is not None else args.max_tokens or 2048
    return runtime.limited(items, args), role, max_tokens


def run_generate(args: argparse.Namespace) -> Result:
    """`moot generate`."""
    from moot.graphs.debatune_generate import answer_instructions

    items, role, max_tokens = _generate_inputs(args)
    client = runtime.client_for(args, role.spec)
    result = runtime.run(
        answer_instructions(
            items,
            args.out,
            role,
            client,
            concurrency=args.concurrency,
            max_tokens=max_tokens,
            max_length=args.max_length,
            seed=args.seed,
            progress=runtime.progress_for(args, client),
        )
    )
    lines = [] if result.failed else [f"responses {args.out}"]
    failed = [f"moot: {args.out} not written: it needs every answer"] if result.failed else []
    outputs = {} if result.failed else {"responses": args.out}
    return runtime.finish(
        args, result.tallies, client.ledger, lines=lines, messages=failed, outputs=outputs
    )


def _eval_inputs(args: argparse.Namespace) -> tuple[list[Any], list[Any], dict[str, str], Any]:
    """The responses and baseline (quality; else none) to judge, their sources, the judge."""
    from moot.core.data.responses import load_responses
    from moot.graphs.debatune_eval import align

    responses = load_responses(args.responses)
    sources = {"responses": str(args.responses)}
    baseline = []
    if args.evaluation == "quality":
        baseline = load_responses(args.baseline)
        align(responses, baseline, args.baseline)
        sources["baseline"] = str(args.baseline)
    role = runtime.role_from(args, f"{args.evaluation}_judge")
    return runtime.limited(responses, args), runtime.limited(baseline, args), sources, role


def run_eval(args: argparse.Namespace) -> Result:
    """`moot eval controllability` and `moot eval quality`."""
    from moot.graphs.debatune_eval import evaluate_controllability, evaluate_quality, write_report

    responses, baseline, sources, role = _eval_inputs(args)
    judging = runtime.judging(args, role)
    constrained = runtime.constrained(args, role)
    if args.evaluation == "quality":
        mask, stride = args.mask, args.stride
        run = evaluate_quality(
            responses, baseline, judging, stride=stride, mask=mask, constrained=constrained
        )
    else:
        run = evaluate_controllability(responses, judging, constrained=constrained)
    result = runtime.run(run)
    write_report(result, args.out, sources)
    outputs = {
        "judgments": args.out / "judgments.jsonl",
        "summary": args.out / "summary.json",
        "chart": args.out / "chart.png",
    }
    lines = [
        (args.out / "summary.md").read_text(encoding="utf-8"),
        f"judgments {outputs['judgments']}\nchart     {outputs['chart']}",
    ]
    return runtime.finish(
        args,
        result.tallies,
        judging.client.ledger,
        nothing_read=result.nothing_read,
        lines=lines,
        outputs=outputs,
    )
