"""Training commands: `moot train sft|dpo|merge`, `moot data mix|preferences`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import Mark, Output, RunFolder, claim_mark
from moot.result import Result
from moot.training.defaults import DEFAULT_EVAL_FRACTION, DEFAULT_MIN_MARGIN

LAUNCHES = ("ddp", "fsdp", "zero3", "zero3-offload")


def register(commands: Commands) -> None:
    """Add the training and dataset-mixing commands."""
    commands.add(
        "sft",
        TrainSft,
        "SFT (full or LoRA) with assistant-only loss",
        "Fine-tune every weight or a LoRA adapter (training.method) with trl's SFTTrainer: a "
        "YAML config (over a preset), then section.key=value overrides. Resumes from the last "
        "checkpoint; a finished run is not redone.",
        group="train",
        output=Output(marks=(claim_mark("train"),)),  # an earlier version's folder: its claim
    )
    commands.add(
        "dpo",
        TrainDpo,
        "DPO (full or LoRA) on preference pairs",
        "Preference-tune a model or a moot train sft adapter with trl's DPOTrainer on "
        "{prompt, chosen, rejected} pairs: the same YAML config as train sft (over a preset) "
        "with a dpo section (beta, loss_type), then section.key=value overrides. With LoRA the "
        "reference is the adapter-off model. Resumes from the last checkpoint; a finished run "
        "is not redone.",
        group="train",
        output=Output(),  # no earlier version made its folders: its owner mark says whose
    )
    commands.add(
        "merge",
        MergeAdapter,
        "merge a LoRA adapter into its base model",
        "Write one Hugging Face model folder (base + adapter merged) that `moot generate`, vLLM "
        "or any server can load.",
        group="train",
        output=Output(marks=(Mark("manifest.json", "kind", "merged-model"),)),
    )
    commands.add(
        "mix",
        Mix,
        "combine SFT datasets: deduplicated, weighted, split train/eval",
        "Combine SFT datasets (moot debate, distill-compqa or mix outputs, JSON/JSONL, datasets "
        "folders, cached hub datasets) into one DatasetDict with train and eval splits, "
        "deduplicated on messages and split by a seeded hash of each row's id.",
        group="data",
        output=Output(marks=(Mark("manifest.json", "kind", "mix"),)),
    )
    commands.add(
        "preferences",
        Preferences,
        "preference pairs from judged runs, for DPO: {prompt, chosen, rejected}",
        "Build trl's preference records from moot eval quality (pairs whose two orders agree), "
        "moot eval controllability (a response judged 100% on its side over one that is not, "
        "across runs), moot eval compqa (answers to one question at least --min-margin points "
        "apart), moot eval judge (a custom judge: mean verdicts at least --min-margin apart, or "
        "both orders agreeing; a majority vote is refused) and moot judge folders (the "
        "conclusions of moot debate records of one argument whose debater A's Debatrix scores "
        "are at least --min-margin apart, across runs); deduplicated, split train/eval by a "
        "seeded hash of each pair's prompt, with a card counting the pairs per source and the "
        "judgments dropped and why.",
        group="data",
        output=Output(marks=(Mark("manifest.json", "kind", "preferences"),)),
    )


_LAUNCH = "launch on many processes (accelerate launch)"


class TrainSft(Job):
    """`moot train sft`: full or LoRA SFT, on one process or launched on many."""

    class Settings(opt.OutputSettings, opt.hub_settings("adapter or model")):
        """`moot train sft`'s settings (its ``--config`` is the run's own, not option values)."""

        train_config: Path = flag(
            flags=("--config",),
            parse=opt.input_file,
            metavar="FILE",
            help="the run's YAML config (sections model, data, lora, training; required)",
        )
        overrides: list[str] = flag(
            [],
            positional=True,
            nargs="*",
            metavar="SECTION.KEY=VALUE",
            help="e.g. training.num_train_epochs=1",
        )
        launch: str | None = flag(
            None, choices=LAUNCHES, group=_LAUNCH, help="distributed strategy"
        )
        num_processes: int = flag(1, parse=opt.positive, metavar="N", group=_LAUNCH)
        num_machines: int = flag(1, parse=opt.positive, metavar="M", group=_LAUNCH)
        machine_rank: int = flag(0, parse=int, metavar="R", group=_LAUNCH)
        main_process_ip: str | None = flag(None, metavar="IP", group=_LAUNCH)
        main_process_port: int | None = flag(None, parse=int, metavar="PORT", group=_LAUNCH)

    settings: Settings
    #: The ``moot train`` command: ``sft``, or a subclass's.
    trainer = "sft"

    def load_config(self) -> Any:
        """The run's configuration, from ``--config`` and the overrides."""
        from moot.training.sft_config import load_sft_config

        return load_sft_config(self.settings.train_config, self.settings.overrides)

    def check(self, config: Any) -> None:
        """Check the run's inputs before any heavy import (`moot.training.check_inputs`)."""
        from moot.training.sft_trainer import check_inputs

        check_inputs(config)

    def fit(self, config: Any, log: Any) -> Any:
        """Train here (`moot.training.train_sft`)."""
        from moot.training.sft_trainer import train_sft

        return train_sft(config, log=log, progress=not self.settings.quiet)

    def run(self) -> Result:
        """Check the config and the launch flags, hold the output folder, train."""
        from moot.core.errors import ConfigError

        given = self.settings
        config = self.load_config()  # before any launch
        launch_only = {
            "--num-processes": given.num_processes > 1,
            "--num-machines": given.num_machines > 1,
            "--machine-rank": given.machine_rank != 0,
            "--main-process-ip": given.main_process_ip is not None,
            "--main-process-port": given.main_process_port is not None,
        }
        if not given.launch and any(launch_only.values()):
            named = ", ".join(option for option, used in launch_only.items() if used)
            raise ConfigError(f"{named} need --launch (e.g. --launch ddp)")
        prog = self.args.command_parser.prog
        out = RunFolder(config.training.output_dir, prog, "training.output_dir")
        # held as every command's --out, by one process: not by a worker `--launch` started
        # (its launcher holds it), nor by another machine's launcher (the folder is usually on
        # storage every machine shares, and machine 0's; that launcher only checks it)
        worker = "RANK" in os.environ
        if worker or given.machine_rank != 0:
            out.check()
            return self.train(config)
        with out.hold():
            return self.train(config)

    def train(self, config: Any) -> Result:
        """Train with the output folder held: launched on many processes, or here."""
        given = self.settings
        if given.launch:
            return self.launch(config)
        from moot.training.sft_card import write_sft_card
        from moot.training.sft_trainer import exit_worker

        log = print if not given.quiet else (lambda line: None)  # the stages it reports
        result = self.fit(config, log)
        if not result.manifest:  # a launched worker other than the main one: it ends here, with 0
            exit_worker()
            return self.finish()
        write_sft_card(result.output_dir)
        outputs = {
            "model": result.model_dir,
            "manifest": result.output_dir / "manifest.json",
            "card": result.model_dir / "README.md",
        }
        kind = "adapter " if result.method == "lora" else "model   "
        lines = [
            f"{kind} {outputs['model']}\nmanifest {outputs['manifest']}",
            f"card     {outputs['card']}",
        ]
        exit_worker()  # a launched worker ends here, with 0
        return self.push(result.model_dir, "model", self.finish(lines=lines, outputs=outputs))

    def launch(self, config: Any) -> Result:
        """Train on many processes (``accelerate launch``); then the card and the push."""
        from moot.training.launch import run_launch
        from moot.training.sft_card import write_sft_card

        given = self.settings
        self.check(config)  # once here, not in every worker after its heavy imports
        code = run_launch(
            given.launch,
            given.train_config,
            ["--quiet", *given.overrides] if given.quiet else given.overrides,
            num_processes=given.num_processes,
            num_machines=given.num_machines,
            machine_rank=given.machine_rank,
            main_process_ip=given.main_process_ip,
            main_process_port=given.main_process_port,
            trainer=self.trainer,
        )
        if code != 0:
            return self.push(None, "model", self.finish(failed=True))
        if given.machine_rank != 0:  # the weights and manifest are machine 0's, and the push
            return self.finish()
        weights = write_sft_card(config.training.output_dir)  # the workers have finished
        outputs = {"model": weights, "manifest": Path(config.training.output_dir) / "manifest.json"}
        return self.push(weights, "model", self.finish(outputs=outputs))


class TrainDpo(TrainSft):
    """`moot train dpo`: full or LoRA DPO on preference pairs, as `moot train sft` runs SFT."""

    trainer = "dpo"

    def load_config(self) -> Any:
        """The DPO run's configuration (`moot.training.load_dpo_config`)."""
        from moot.training.dpo_config import load_dpo_config

        return load_dpo_config(self.settings.train_config, self.settings.overrides)

    def check(self, config: Any) -> None:
        """Check the preference data and the base before any heavy import."""
        from moot.training.dpo_trainer import check_dpo_inputs

        check_dpo_inputs(config)

    def fit(self, config: Any, log: Any) -> Any:
        """Train here (`moot.training.train_dpo`)."""
        from moot.training.dpo_trainer import train_dpo

        return train_dpo(config, log=log, progress=not self.settings.quiet)


class MergeAdapter(Job):
    """`moot train merge`: a LoRA adapter merged into its base model."""

    class Settings(opt.CommonSettings, opt.hub_settings("merged model")):
        """`moot train merge`'s settings."""

        adapter: Path = flag(parse=opt.input_folder, metavar="DIR", help="the adapter (required)")
        out: Path = opt.out_flag()

    settings: Settings

    def run(self) -> Result:
        """Merge, write the card, push with ``--push-to-hub``."""
        from moot.training.merge import merge_adapter

        merged = merge_adapter(self.settings.adapter, self.settings.out)
        outputs = {"model": merged, "card": merged / "README.md"}
        lines = [f"merged   {merged}\ncard     {outputs['card']}"]
        return self.push(merged, "model", self.finish(lines=lines, outputs=outputs))


class Mix(Job):
    """`moot data mix`: SFT datasets combined, deduplicated, weighted, split train/eval."""

    class Settings(opt.CommonSettings, opt.hub_settings("dataset")):
        """`moot data mix`'s settings."""

        inputs: list[str] = flag(
            flags=("--in",),
            parse=opt.input_source,
            nargs="+",
            metavar="SRC",
            help="datasets to combine (required)",
        )
        out: Path = opt.out_flag()
        weights: list[float] | None = flag(
            None,
            parse=float,
            nargs="+",
            metavar="W",
            help="one per input: 1 = every row, 0.5 = a seeded half, 2 = every row twice",
        )
        eval_fraction: float = flag(
            DEFAULT_EVAL_FRACTION,
            parse=float,
            metavar="F",
            help=f"share of rows in the eval split, in [0, 1) (default {DEFAULT_EVAL_FRACTION:g}; "
            "0 = no eval split)",
        )
        seed: int = flag(0, parse=int, help="seeds the weight sampling and the split")

    settings: Settings

    def run(self) -> Result:
        """Mix, write the splits and manifest, push with ``--push-to-hub``."""
        from moot.training.mixing import mix_datasets

        given = self.settings
        summary = mix_datasets(
            given.inputs,
            given.out,
            weights=given.weights,
            eval_fraction=given.eval_fraction,
            seed=given.seed,
        )
        return _wrote_splits(self, summary, "rows")


class Preferences(Job):
    """`moot data preferences`: judged runs into preference pairs (trl's format)."""

    class Settings(opt.CommonSettings, opt.hub_settings("dataset")):
        """`moot data preferences`' settings."""

        runs: list[Path] = flag(
            positional=True,
            nargs="+",
            parse=opt.input_folder,
            metavar="RUN",
            help="folders of moot eval quality, controllability, compqa or judge, or moot judge "
            "(of moot debate records)",
        )
        out: Path = opt.out_flag()
        min_margin: float = flag(
            DEFAULT_MIN_MARGIN,
            parse=float,
            metavar="M",
            help="the least score difference of a scored pair, in each source's own points: "
            f"CompQA's 0-19 totals, Debatrix's 1-10 scores, a custom judge's verdicts (default "
            f"{DEFAULT_MIN_MARGIN:g})",
        )
        prompt_field: str | None = flag(
            None,
            metavar="NAME",
            help="a custom judge's item field that is the prompt (default: its one inputs field)",
        )
        answer_field: str | None = flag(
            None,
            metavar="NAME",
            help="a mean custom judge's item field that is the answer (default: its one judged "
            "field; both_orders: its a and b)",
        )
        eval_fraction: float = flag(
            DEFAULT_EVAL_FRACTION,
            parse=float,
            metavar="F",
            help="share of prompts in the eval split, all their pairs held out, in [0, 1) "
            f"(default {DEFAULT_EVAL_FRACTION:g}; 0 = no eval split)",
        )
        seed: int = flag(0, parse=int, help="seeds the split")

    settings: Settings

    def run(self) -> Result:
        """Build, write the splits, manifest and card, push with ``--push-to-hub``."""
        from moot.training.preferences import build_preferences

        given = self.settings
        summary = build_preferences(
            given.runs,
            given.out,
            min_margin=given.min_margin,
            eval_fraction=given.eval_fraction,
            seed=given.seed,
            prompt_field=given.prompt_field,
            answer_field=given.answer_field,
        )
        return _wrote_splits(self, summary, "pairs")


def _wrote_splits(job: Job, summary: Any, unit: str) -> Result:
    """`moot data mix`'s or `data preferences`' result: its table, the splits written, the push."""
    out = job.settings.out
    line = (
        f"wrote {out}: {summary.train} train and {summary.eval} eval {unit}; "
        f"{summary.duplicates} duplicate(s) dropped"
    )
    outputs = {"train": out / "train.jsonl", "manifest": out / "manifest.json"}
    return job.push(out, "dataset", job.finish(lines=[summary.table(), line], outputs=outputs))
