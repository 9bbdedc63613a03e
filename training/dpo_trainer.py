"""DPO with trl's ``DPOTrainer``, full or LoRA, on SFT's run machinery (`sft_trainer`).

The run folder is an SFT run's (``checkpoints/``, ``adapter/`` or ``model/``, ``manifest.json``
with ``trainer: dpo``, ``.moot/train.json``), resumed and finished alike. With LoRA the reference
model is the policy with its adapter switched off (``ref_model=None``: trl's way, no second copy
in memory). A ``model.base`` that is a LoRA adapter (``moot train sft``'s ``adapter/``) is merged
into its base first (`moot.training.merge_adapter`, into ``OUT/base/``): that merged model is
both where DPO starts and its reference, and ``moot train merge`` finds it as the new adapter's
base.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError, InputError
from moot.training.chat_templates import chat_family, has_chat_template
from moot.training.dpo_config import DPORunConfig
from moot.training.dpo_data import load_preference_dataset, read_preference_rows
from moot.training.sft_trainer import (
    SCRATCH_WAIT,
    PreparedRun,
    SFTResult,
    check_inputs,
    content_digest,
    eval_data,
    eval_split,
    is_main,
    load_model,
    load_tokenizer,
    lora_config,
    train_run,
    trainer_args,
    watch,
)


def train_dpo(
    config: DPORunConfig,
    *,
    log: Callable[[str], None] = lambda line: None,
    progress: bool = True,
) -> SFTResult:
    """Train (or resume, or find finished) the DPO run `config` describes (full or LoRA).

    Args:
        config: The run's configuration.
        log: Receives one line per stage, on the main process only.
        progress: Show the trainer's progress bar and per-step losses.

    Raises:
        ConfigError: As `moot.training.train_sft`.
        InputError: An unusable preference dataset (`read_preference_rows`).
    """
    return train_run(config, check_dpo_inputs, build_dpo_trainer, log=log, progress=progress)


def check_dpo_inputs(config: DPORunConfig) -> dict[str, str | None]:
    """`moot.training.sft_trainer.check_inputs` for preference data: its content hashes.

    Pairs in chat messages need a chat template: ``model.chat_template``, or the base's own
    (read from its tokenizer files, before torch loads).

    Raises:
        ConfigError: As `check_inputs`, and chat pairs whose base has no chat template.
    """
    chat: list[str] = []  # the sources whose pairs are chat messages

    def read(source: str, split: str) -> list[dict[str, Any]]:
        rows = read_preference_rows(source, split=split)
        if isinstance(rows[0]["prompt"], list):
            chat.append(source)
        return rows

    digests = check_inputs(config, read)
    base = config.model.base or ""
    if chat and not config.model.chat_template and has_chat_template(base) is False:
        raise ConfigError(_no_template(chat[0], base))
    return digests


def _no_template(source: str, base: str) -> str:
    return (
        f"{source}: the pairs are chat messages and {base}'s tokenizer has no chat template: "
        "set model.chat_template"
    )


def build_dpo_trainer(
    config: DPORunConfig,
    *,
    log: Callable[[str], None] = lambda line: None,
    progress: bool = True,
) -> PreparedRun:
    """Load the preference data, tokenizer and model and build the ``DPOTrainer`` of `config`.

    Raises:
        ConfigError: The base model cannot be loaded, or the chat template does not fit it.
        InputError: An unusable preference dataset.
    """
    from trl import DPOConfig, DPOTrainer

    out = Path(config.training.output_dir)
    eval_source = eval_data(config)
    train_rows = load_preference_dataset(config.data.train, split="train")
    eval_rows = (
        load_preference_dataset(eval_source, split=eval_split(eval_source)) if eval_source else None
    )
    base = _base(config, out / "base")
    family = chat_family(config.model.chat_template) if config.model.chat_template else None
    tokenizer = load_tokenizer(base, family, markers=False)  # the whole answer is learnt
    if tokenizer.chat_template is None and isinstance(train_rows[0]["prompt"], list):
        raise ConfigError(_no_template(config.data.train, base))  # a base not read before torch
    own = {"max_length": config.data.max_length, **config.dpo.trainer_arguments()}
    args = trainer_args(config, DPOConfig, own, has_eval=eval_rows is not None, progress=progress)
    trainer = DPOTrainer(
        model=load_model(base, config),
        ref_model=None,  # LoRA: the adapter-off policy; full: trl's copy of the starting model
        args=args,
        train_dataset=train_rows,
        eval_dataset=eval_rows,
        processing_class=tokenizer,
        peft_config=lora_config(config),
    )
    reports = {"train": _report(train_rows, trainer.train_dataset, config.data.train, config)}
    if eval_rows is not None:
        reports["eval"] = _report(eval_rows, trainer.eval_dataset, str(eval_source), config)
    for split, report in reports.items():
        line = f"{split}: {report['samples']} preference pairs"
        if report["overlong"]:
            line += (
                f"; {report['overlong']} dropped, their prompt alone filling data.max_length "
                f"{config.data.max_length} tokens"
            )
        log(line)
    watch(trainer, config, progress)
    return PreparedRun(trainer, base, reports["train"], reports.get("eval"), kind="dpo")


def _base(config: DPORunConfig, merged: Path) -> str:
    """The model DPO starts from: `model.base`, or the SFT adapter it names merged into `merged`.

    The main process merges (the folder appears whole); the others wait for it.
    """
    from moot.core.metrics.perspective_diversity import EMBEDDED, embedded_hf_folder

    base = config.model.base or ""
    if base == EMBEDDED:
        return str(embedded_hf_folder())
    if not (Path(base) / "adapter_config.json").is_file():
        return base
    if not (merged / "config.json").is_file():
        if is_main():
            from moot.training.merge import merge_adapter

            merge_adapter(Path(base), merged)
        deadline = time.monotonic() + SCRATCH_WAIT
        while not (merged / "config.json").is_file():
            if time.monotonic() > deadline:
                raise ConfigError(f"{merged}: the main process did not merge {base} in time")
            time.sleep(0.2)
    return str(merged)


def _report(rows: Any, kept: Any, source: str, config: DPORunConfig) -> dict[str, Any]:
    """Source, pairs trained and dropped, and content hash of a split (the manifest's ``data``).

    trl keeps the start of a pair over ``max_length`` and drops a pair whose prompt alone fills
    it (no answer token left to learn from): `kept` is the split as trl prepared it.

    Raises:
        InputError: trl dropped every pair.
    """
    if not len(kept):
        limit = config.data.max_length
        raise InputError(source, f"every pair's prompt alone fills data.max_length {limit} tokens")
    return {
        "source": source,
        "samples": len(kept),
        "overlong": len(rows) - len(kept),
        "sha256": content_digest(rows.to_list()),
    }
