"""DEBATunE's commands: `moot debate`, `merge-shards`, `generate`, `eval controllability|quality`.

Li et al., ACL 2024.
"""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, ClassVar

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job, ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import Settings, flag
from moot.core.data.folders import EVAL_CLAIM, Mark, Output, claim_mark
from moot.result import Result

#: An earlier version's `moot debate` and `moot merge-shards` folders: their manifest.
DEBATUNE_MANIFEST = Mark("manifest.json", "kind", "debatune")

#: `moot generate --template NAME`: the chat template each name renders (under `prompts/`). Where
#: DEBATunE's evaluation has a format for the family (its generate_inference.py, `PROMPT_DICT`),
#: it is that format exactly (`chat_templates/debatune/`; vicuna's SFT template is the released
#: format itself); chatml and llama-3, which the release lacks, are moot's chat templates.
RELEASED_FORMATS = "chat_templates/debatune/"
GENERATE_TEMPLATES = {
    "alpaca": f"{RELEASED_FORMATS}alpaca.j2",
    "chatml": "chat_templates/chatml.j2",
    "llama-2": f"{RELEASED_FORMATS}llama-2.j2",
    "llama-3": "chat_templates/llama-3.j2",
    "vicuna": "chat_templates/vicuna.j2",
    "wizardlm": f"{RELEASED_FORMATS}wizardlm.j2",
    "zephyr": f"{RELEASED_FORMATS}zephyr.j2",
}


def register(commands: Commands) -> None:
    """Add DEBATunE's commands."""
    commands.add(
        "debate",
        Debate,
        "generate DEBATunE debate data",
        "Two agents with opposite stances debate each argument for M rounds; the supporting "
        "agent concludes a statement that becomes an SFT record. Reruns resume; see docs/cli.md.",
        plan=True,
        output=Output("debate", (claim_mark("run"), DEBATUNE_MANIFEST)),
    )
    commands.add(
        "merge-shards",
        MergeShards,
        "join the output folders of `moot debate --shard I/N` runs",
        "Join the output folders of `moot debate --shard I/N` runs into one dataset; a DIR "
        "without a manifest stands for the shard folders in it.",
        aliases=("merge",),
        output=Output("debate", (DEBATUNE_MANIFEST,)),
    )
    commands.add(
        "generate",
        Generate,
        "answer the DEBATunE test instructions with a model",
        "Answer each topic's instructions (the reference's inference instruction, one per side and "
        "argument) and write the model-output format the judges read.",
        plan=True,
    )
    for job in (Controllability, Quality):
        commands.add(
            job.name,
            job,
            job.about.replace("%", "%%"),
            job.about,
            group="eval",
            plan=True,
            output=Output(job.name, (claim_mark(EVAL_CLAIM),)),
        )


class Debate(ModelJob):
    """`moot debate`: DEBATunE debates, each concluded as an SFT record, into ``--out``."""

    class Settings(
        opt.model_settings(
            what="model of both debaters", temperature=0.7, concurrency=8, unit="debates"
        ),
        opt.DebaterSettings,
        opt.hub_settings("dataset"),
    ):
        """`moot debate`'s settings."""

        topics: str = flag(
            parse=opt.input_source, help="topics file, datasets folder or hub name (required)"
        )
        out: Path = opt.out_flag()
        arguments_per_stance: int = flag(3, parse=opt.positive, metavar="K")
        rounds: int = flag(
            2,
            parse=opt.non_negative,
            metavar="M",
            help="debate rounds (default 2, the paper's); 0: no debate, debater A's opening "
            "statement is the record (the paper's 'Topic Data without Debate' ablation)",
        )
        turn_tokens: int = flag(800, parse=opt.positive, help="budget per turn")
        conclusion_tokens: int = flag(2048, parse=opt.positive)
        shard: str = flag(
            "0/1",
            metavar="I/N",
            help="run shard I of N (0-based); auto: the scheduler's (SLURM array, Kubernetes "
            "Indexed Job, torchrun; see docs/scaling.md)",
        )

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[Any, Any, Any]:
        """The topics, the run's configuration and shard, checked against ``--out``."""
        from moot.core.data.topics import load_topics
        from moot.graphs.debatune_run import DebateRunConfig, Shard, check_run_folder

        given = self.settings
        shard = Shard.from_option(given.shard)
        topics = load_topics(given.topics)
        config = DebateRunConfig(
            debater_a=runtime.debater_role(given, "a", "debater_a"),
            debater_b=runtime.debater_role(given, "b", "debater_b"),
            rounds=given.rounds,
            arguments_per_stance=given.arguments_per_stance,
            seed=given.seed,
            turn_tokens=given.turn_tokens,
            conclusion_tokens=given.conclusion_tokens,
        )
        check_run_folder(given.out, config, shard)
        return topics, config, shard

    def specs(self) -> list[Any]:
        """The debaters'."""
        config = self.inputs[1]
        return [config.debater_a.spec, config.debater_b.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Debate this shard's topics (the rest of them, on a rerun)."""
        from moot.graphs.debatune_run import run_debatune

        given, (topics, config, shard) = self.settings, self.inputs
        del self.inputs  # `run_debatune` lets the topics go once its plan is made: not held here
        role_a, role_b = config.debater_a, config.debater_b
        # warnings only once every check passed: refused input gets its one error line alone
        if given.rounds and role_a.spec == role_b.spec and role_a.temperature == role_b.temperature:
            self.note(
                f"warning: both debaters use {role_a.spec.name} at temperature "
                f"{role_a.temperature:g}; set --model-b or --temperature-b for distinct voices"
            )
        return run_debatune(
            topics,
            given.out,
            config,
            client,
            concurrency=given.concurrency,
            shard=shard,
            source=str(given.topics),
            limit=given.limit,
            progress=progress,
        )

    def report(self, done: Any, client: Any) -> Result:
        """Where the dataset is, what failed; the dataset pushed with ``--push-to-hub``."""
        out = done.out_dir
        outputs = {
            "dataset": out / "dataset.jsonl",
            "debates": out / "debates.jsonl",
            "manifest": out / "manifest.json",
            "card": out / "README.md",
        }
        lines = [
            f"dataset   {outputs['dataset']}  ({done.dataset_records} records; "
            f"datasets copy in {out / 'dataset'})",
            f"debates   {outputs['debates']}",
            f"manifest  {outputs['manifest']}",
            f"card      {outputs['card']}",
        ]
        failures = [f"moot: failed {f['id']}: {f['error']}" for f in done.failures]
        result = self.finish(
            done.tallies, client.ledger, lines=lines, messages=failures, outputs=outputs
        )
        return self.push(out, "dataset", result)


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
        from moot.graphs.debatune_merge import merge_runs, shard_folders

        dirs, out = shard_folders(self.settings.dirs), self.settings.out
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


class _Instructions(Settings):
    """`moot generate`'s dataset, output and template (its flags before the model's)."""

    dataset: str = flag(
        parse=opt.input_source,
        help="topics with arguments per side (debate_test_v1_arg.jsonl shape)",
    )
    out: Path = opt.out_flag("output JSON file", "FILE", progress=True)
    template: str | None = flag(
        None,
        choices=tuple(GENERATE_TEMPLATES),
        help="prompt format for a local model folder: DEBATunE's released one for the family "
        "(default: the tokenizer's own chat template)",
    )


class Generate(ModelJob):
    """`moot generate`: a model's answers to the DEBATunE test instructions, in one file."""

    class Settings(
        _Instructions,
        opt.model_settings(
            what="provider/model, local/smollm2, or a local model / LoRA adapter folder",
            default=None,
            max_tokens=2048,
            concurrency=8,
            unit="instructions",
        ),
        opt.single(
            "max_length",
            int | None,
            flag(
                None,
                parse=opt.positive,
                metavar="N",
                help="instead of --max-tokens: a budget that counts the prompt's tokens too, as "
                "the reference's generate(max_length=2048); local model folders only",
            ),
        ),
        opt.batch_settings(1, "greedy instructions"),
    ):
        """`moot generate`'s settings."""

        max_tokens: int | None = None  # 2048 unless --max-length: the two exclude each other

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[list[Any], Any, int | None, str | None]:
        """The instructions (``--limit`` applied), the generator, its budget, its chat template."""
        from moot.core.data.planned import is_planned
        from moot.core.data.records import check_out_file
        from moot.core.data.topics import load_topics
        from moot.core.errors import ConfigError
        from moot.graphs.debatune_generate import debate_test_instructions
        from moot.prompts import template_source

        given = self.settings
        check_out_file(given.out)
        items = debate_test_instructions(load_topics(given.dataset), given.dataset)
        local = Path(given.model).is_dir() or is_planned(given.model)  # `{sft}/adapter`, dry run
        text = f"hf/{given.model}" if local else given.model
        name = GENERATE_TEMPLATES[given.template] if given.template else None
        template = template_source(name) if name else None
        role = self.role("generator", text, chat_template=template)
        if template and "chat_template" not in role.spec.transport_class.options:
            raise ConfigError("--template applies to local model folders only")
        if given.max_length is not None and given.max_tokens is not None:
            raise ConfigError("--max-length and --max-tokens exclude each other: give one")
        if given.max_length is not None and not role.spec.transport_class.takes_max_length:
            raise ConfigError(
                "--max-length applies to local model folders only (their tokenizer counts the "
                "prompt); use --max-tokens"
            )
        max_tokens = None if given.max_length is not None else given.max_tokens or 2048
        return self.limited(items), role, max_tokens, name

    def specs(self) -> list[Any]:
        """The generator's."""
        return [self.inputs[1].spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Answer the instructions; the file is written once every answer is in."""
        from moot.graphs.debatune_generate import answer_instructions

        given, (items, role, max_tokens, template) = self.settings, self.inputs
        return answer_instructions(
            items,
            given.out,
            role,
            client,
            concurrency=given.concurrency,
            max_tokens=max_tokens,
            max_length=given.max_length,
            seed=given.seed,
            template=template,  # a --template's answers are its own: its digest is in their ids
            progress=progress,
        )

    def report(self, done: Any, client: Any) -> Result:
        """Where the responses are, or why they are not written."""
        out = self.settings.out
        lines = [] if done.failed else [f"responses {out}"]
        failed = [f"moot: {out} not written: it needs every answer"] if done.failed else []
        outputs = {} if done.failed else {"responses": out}
        return self.finish(
            done.tallies, client.ledger, lines=lines, messages=failed, outputs=outputs
        )


class _Responses(Settings):
    """The responses an evaluation judges and its output folder (its first flags)."""

    responses: Path = flag(parse=opt.input_file, help="responses to judge (required)")
    out: Path = opt.out_flag()


class _Pairwise(Settings):
    """`moot eval quality`'s baseline, stride and masked names."""

    baseline: Path = flag(parse=opt.input_file, help="the baseline's responses (required)")
    stride: int = flag(
        1, parse=opt.positive, help="judge every S-th item (3 = the paper's 160-item subset)"
    )
    mask: list[str] = flag(
        [],
        action="append",
        parse=opt.non_blank,
        metavar="NAME",
        help="replace NAME in both answers with [masked] (repeatable)",
    )


#: The judge of both evaluations.
_JUDGE = opt.model_settings(
    flag="--judge",
    what="judge model",
    note="the paper used GPT-4",
    constrained="JSON",
    concurrency=16,
    unit="responses",
)


class Evaluation(ModelJob):
    """A DEBATunE evaluation: responses judged (`Controllability`, `Quality`), then scored."""

    #: The command's name (``moot eval NAME``) and what it measures.
    name: ClassVar[str]
    about: ClassVar[str]

    settings: Any  # a subclass's Settings: `_Responses` and `_JUDGE`'s

    @functools.cached_property
    def responses(self) -> list[Any]:
        """The responses to judge, all of them (``--limit`` applies to those judged)."""
        from moot.core.data.responses import load_responses

        return load_responses(self.settings.responses)

    def sources(self) -> dict[str, str]:
        """The files judged, by name, for the summary."""
        return {"responses": str(self.settings.responses)}

    @functools.cached_property
    def judge(self) -> Any:
        """The judge's role."""
        return self.role(f"{self.name}_judge")

    def specs(self) -> list[Any]:
        """The judge's, once the responses are read and checked."""
        self.responses  # noqa: B018 - read before the judge is contacted, or even made
        return [self.judge.spec]

    def calls(self, client: Any, progress: Any) -> Any:
        """Judge the responses (`evaluate`) with the judge, into ``--out``."""
        judging = self.judging(self.judge, client, progress)
        return self.evaluate(judging, runtime.constrained(self.settings, self.judge))

    def evaluate(self, judging: Any, constrained: bool) -> Coroutine[Any, Any, Any]:
        """The evaluator's run: `judging` judges, ``constrained`` or not."""
        raise NotImplementedError

    def report(self, done: Any, client: Any) -> Result:
        """The summary written, and where the judgments and chart are."""
        from moot.graphs.debatune_eval import write_report

        out = self.settings.out
        write_report(done, out, self.sources())
        outputs = {
            "judgments": out / "judgments.jsonl",
            "summary": out / "summary.json",
            "chart": out / "chart.png",
        }
        lines = [
            (out / "summary.md").read_text(encoding="utf-8"),
            f"judgments {outputs['judgments']}\nchart     {outputs['chart']}",
        ]
        return self.finish(
            done.tallies,
            client.ledger,
            nothing_read=done.nothing_read,
            lines=lines,
            outputs=outputs,
        )


class Controllability(Evaluation):
    """`moot eval controllability`: is each response judged wholly on its side."""

    name = "controllability"
    about = "share of responses judged 100% on their side (CC_P, CC_N)"

    class Settings(_Responses, _JUDGE):
        """`moot eval controllability`'s settings."""

    settings: Settings

    def evaluate(self, judging: Any, constrained: bool) -> Coroutine[Any, Any, Any]:
        """Judge each response's supporting and opposing shares."""
        from moot.graphs.debatune_eval import evaluate_controllability

        responses = self.limited(self.responses)
        return evaluate_controllability(responses, judging, constrained=constrained)


class Quality(Evaluation):
    """`moot eval quality`: each response against the baseline's, in both orders."""

    name = "quality"
    about = "pairwise quality against a baseline, both orders (W/T/L, score)"

    class Settings(_Responses, _Pairwise, _JUDGE):
        """`moot eval quality`'s settings."""

    settings: Settings

    @functools.cached_property
    def baseline(self) -> list[Any]:
        """The baseline's responses, all of them, checked to align with those judged."""
        from moot.core.data.responses import align, load_responses

        baseline = load_responses(self.settings.baseline)
        align(self.responses, baseline, self.settings.baseline)
        return baseline

    def specs(self) -> list[Any]:
        """The judge's, once both files are read and aligned."""
        self.baseline  # noqa: B018 - aligned before the judge is contacted
        return super().specs()

    def sources(self) -> dict[str, str]:
        """The responses' and the baseline's files."""
        return {**super().sources(), "baseline": str(self.settings.baseline)}

    def evaluate(self, judging: Any, constrained: bool) -> Coroutine[Any, Any, Any]:
        """Judge each response against the baseline's."""
        from moot.graphs.debatune_eval import evaluate_quality

        given, responses, baseline = self.settings, self.responses, self.baseline
        return evaluate_quality(
            self.limited(responses),
            self.limited(baseline),
            judging,
            stride=given.stride,
            mask=given.mask,
            constrained=constrained,
        )
