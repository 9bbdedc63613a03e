"""SFT with trl's ``SFTTrainer``, full or LoRA (peft): assistant-only loss, resumable, distributed.

A run folder holds ``checkpoints/`` (the trainer's, for resuming), the trained weights with the
tokenizer and its chat template (``adapter/``, the LoRA adapter, which ``moot generate --model``
and ``moot train merge`` take; or ``model/``, a whole model, with ``training.method: full``),
``base/`` for a base built from ``model.init``, ``manifest.json`` written last, and
``.moot/train.json`` claiming the folder for one configuration. Under ``accelerate launch`` every
process runs this same code; only the main process writes outside ``checkpoints/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from moot.core.data.folders import RunFolder
from moot.core.data.records import atomic_replace_dir, overlap, package_versions, write_json
from moot.core.errors import ConfigError, InputError
from moot.training.chat_templates import ChatFamily, chat_family, has_generation_markers
from moot.training.sft_batches import PackedRows, has_varlen_kernel, packed_rows_trainer
from moot.training.sft_config import LOGS, SFTRunConfig
from moot.training.sft_data import load_sft_dataset, read_sft_rows

SCRATCH_WAIT = 600.0  # seconds other processes wait for the main one to build a scratch base
VERSIONED = ("moot", "torch", "transformers", "trl", "peft", "accelerate", "datasets")
#: Written into a checkpoint once the trainer has saved all of it: resume trusts no other.
COMPLETE = "moot-complete.json"
#: What a folder claimed for another training run holds, in the refusal.
HOLDS = "a training run of another configuration or other data"


@dataclass(frozen=True)
class SFTResult:
    """What `train_sft` did.

    Attributes:
        output_dir: The run folder.
        manifest: The run manifest (``manifest.json``); empty on processes other than the
            main one of a multi-process run.
        already_done: The folder held this run finished: nothing was trained.
        method: ``lora`` or ``full`` (``training.method``).
    """

    output_dir: Path
    manifest: dict[str, Any]
    already_done: bool = False
    method: str = "lora"

    @property
    def model_dir(self) -> Path:
        """The trained weights with their tokenizer: ``adapter/`` (LoRA) or ``model/`` (full)."""
        return self.output_dir / _weights_folder(self.method)


def _weights_folder(method: str) -> str:
    """The run folder's subfolder for the trained weights of `method`."""
    return "adapter" if method == "lora" else "model"


def train_sft(
    config: SFTRunConfig,
    *,
    log: Callable[[str], None] = lambda line: None,
    progress: bool = True,
) -> SFTResult:
    """Train (or resume, or find finished) the SFT run `config` describes (full or LoRA).

    Args:
        config: The run's configuration.
        log: Receives one line per stage (data, truncation, resume, result), on the main
            process only.
        progress: Show the trainer's progress bar and per-step losses.

    Raises:
        ConfigError: The folder holds another configuration, the base model cannot be loaded,
            the chat template does not fit the tokenizer, or QLoRA cannot run here.
        InputError: Unusable training data (missing columns, empty, every sample too long).
    """
    return train_run(config, check_inputs, build_trainer, log=log, progress=progress)


def train_run(
    config: SFTRunConfig,
    check: Callable[[Any], dict[str, str | None]],
    build: Callable[..., PreparedRun],
    *,
    log: Callable[[str], None] = lambda line: None,
    progress: bool = True,
) -> SFTResult:
    """Train (or resume, or find finished) the run `config` describes, SFT's or DPO's.

    Args:
        config: The run's configuration.
        check: Checks the inputs before torch loads (`check_inputs`); their content hashes.
        build: Builds the trainer (`build_trainer`), called as ``build(config, log=,
            progress=)``.
        log: As `train_sft`'s.
        progress: As `train_sft`'s.
    """
    if not is_main():
        log = _silent
    out = Path(config.training.output_dir)
    method = config.training.method
    weights = out / _weights_folder(method)
    identity = _claim(out, config, check(config))  # bad input or folder: before torch
    import torch

    if not progress:
        from transformers.utils import logging

        logging.set_verbosity_error()
        logging.disable_progress_bar()
    manifest_path = out / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("identity") == identity:
            log(f"already trained: {weights}")
            return SFTResult(out, manifest, already_done=True, method=method)

    started = time.perf_counter()
    prepared = build(config, log=log, progress=progress)
    trainer, args = prepared.trainer, prepared.trainer.args
    checkpoint = _resume_point(out / "checkpoints", log)
    if checkpoint is not None:
        log(f"resuming from {checkpoint.name}")
    trained = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    metrics = {"train_loss": trained.training_loss}
    if prepared.eval_report is not None:
        metrics["eval_loss"] = trainer.evaluate()["eval_loss"]
    if trainer.is_fsdp_enabled:  # a sharded state dict would make save_model write nothing
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model(str(weights))  # every process joins; the main one writes
    if not args.should_save:
        trainer.accelerator.wait_for_everyone()  # return once the main process has the manifest
        return SFTResult(out, {}, already_done=False, method=method)
    trainer.processing_class.save_pretrained(weights)
    state = trainer.state
    manifest = {
        "identity": identity,
        "status": "complete",
        "method": method,
        "trainer": prepared.kind,
        "config": config.to_dict(),
        "base": prepared.base,
        "data": {"train": prepared.train_report, "eval": prepared.eval_report},
        "processes": args.world_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "device": "cuda" if torch.cuda.is_available() and not args.use_cpu else "cpu",
        "steps": state.global_step,
        "epochs": state.epoch,
        "tokens_seen": state.num_input_tokens_seen,
        "trainable_parameters": _trainable(trainer.model),
        "losses": metrics,
        "log_history": state.log_history,
        "seconds": round(time.perf_counter() - started, 1),
        "versions": package_versions(*VERSIONED),
    }
    RunFolder(out).write_manifest(manifest)
    trainer.accelerator.wait_for_everyone()
    log(
        f"trained {state.global_step} steps ({state.epoch:.2f} epochs) on {args.world_size} "
        f"process(es): train loss {metrics['train_loss']:.4f}"
        + (f", eval loss {metrics['eval_loss']:.4f}" if "eval_loss" in metrics else "")
    )
    return SFTResult(out, manifest, method=method)


def exit_worker() -> None:
    """End this process at once if it is a distributed worker; otherwise just return.

    Call it last in a worker's program, once its work is saved and every process is past its
    last collective. A worker that ends through the interpreter's normal shutdown can abort
    there (SIGABRT, "terminate called without an active exception"): DDP's reducer keeps the
    gloo process group alive until C++ teardown, whose threads then break on a peer that has
    already gone, even after ``destroy_process_group``. torchrun then fails a run that
    succeeded, and on several machines the others wait out its 300 s exit barrier. Flushing
    output and leaving with ``os._exit(0)`` skips that teardown.
    """
    import logging
    import sys

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True)
class PreparedRun:
    """A run ready to train: what `train_sft` trains, open for inspection.

    Attributes:
        trainer: The trl ``SFTTrainer`` (datasets tokenised, loss masks built).
        base: The base model's folder or hub id.
        train_report: Source, samples, tokens, overlong count and content hash of the train data.
        eval_report: The same for the eval data, or None without eval data.
        kind: The training it runs: ``sft`` or ``dpo`` (the manifest's ``trainer``).
    """

    trainer: Any
    base: str
    train_report: dict[str, Any]
    eval_report: dict[str, Any] | None
    kind: str = "sft"


def build_trainer(
    config: SFTRunConfig,
    *,
    log: Callable[[str], None] = lambda line: None,
    progress: bool = True,
) -> PreparedRun:
    """Load the data, tokenizer and base model and build the ``SFTTrainer`` of `config`.

    Raises:
        ConfigError: The base model cannot be loaded, or the chat template does not fit it.
        InputError: Unusable training data.
    """
    out = Path(config.training.output_dir)
    eval_source = eval_data(config)
    train_rows = _load(config.data.train, "train")  # bad data fails before torch is imported
    eval_rows = _load(eval_source, eval_split(eval_source)) if eval_source else None
    family = chat_family(config.model.chat_template) if config.model.chat_template else None
    from moot.core.metrics.perspective_diversity import EMBEDDED, embedded_hf_folder

    base = config.model.base
    if base == EMBEDDED:  # the embedded model's GGUF, which transformers reads (via gguf)
        base = str(embedded_hf_folder())
    if config.model.init is not None:
        base = str(out / "base")
        _scratch_base(config, family, train_rows, Path(base))
    from trl import SFTConfig

    own = {"max_length": config.data.max_length, "assistant_only_loss": True}
    args = trainer_args(config, SFTConfig, own, has_eval=eval_source is not None, progress=progress)
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if args.world_size != launched:  # e.g. workers that did not join one process group
        raise ConfigError(
            f"{launched} processes were launched but training sees {args.world_size}: they would "
            "train apart (use moot train sft --launch)"
        )
    tokenizer = load_tokenizer(base, family)
    train_rows, train_report = _fit_lengths(train_rows, tokenizer, config, config.data.train)
    log(_length_line("train", train_report, config))
    eval_report = None
    if eval_rows is not None:
        eval_rows, eval_report = _fit_lengths(eval_rows, tokenizer, config, str(eval_source))
        log(_length_line("eval", eval_report, config))
    from trl import SFTTrainer

    # packs as rows unless a variable-length kernel makes trl's one flattened sequence cheap
    rows = config.training.packing and not has_varlen_kernel(
        config.model.attn_implementation, args.device.type == "cuda"
    )
    trainer = (packed_rows_trainer(SFTTrainer) if rows else SFTTrainer)(
        model=load_model(base, config),
        args=args,
        train_dataset=train_rows,
        eval_dataset=eval_rows,
        processing_class=tokenizer,
        peft_config=lora_config(config),
    )
    if rows:
        trainer.data_collator = PackedRows(trainer.data_collator, tokenizer.pad_token_id)
    watch(trainer, config, progress)
    return PreparedRun(trainer, base, train_report, eval_report)


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The trainer's ``checkpoint-<step>`` folders in `folder`, by step."""
    found = []
    for path in folder.glob("checkpoint-*"):
        step = path.name.removeprefix("checkpoint-")
        if step.isdigit() and path.is_dir():
            found.append((int(step), path))
    return sorted(found)


def _resume_point(folder: Path, log: Callable[[str], None]) -> Path | None:
    """The newest complete checkpoint in `folder`, once the main process has deleted torn ones.

    A checkpoint without `COMPLETE` is one whose save a kill interrupted (or whose deletion
    began): resuming from it fails or, worse, loads half a state. A run that an earlier moot
    began marked none: there, a checkpoint is complete when it holds the trainer's state, the
    last file the trainer writes.
    """
    found = _checkpoints(folder)
    legacy = not any((path / COMPLETE).is_file() for _, path in found)
    complete = None
    for _, path in found:
        if (path / COMPLETE).is_file() or (legacy and (path / "trainer_state.json").is_file()):
            complete = path
        elif is_main():
            log(f"{path.name} is incomplete (a kill cut its save or deletion short): deleted")
            shutil.rmtree(path)
    return complete


def _completion_callback(keep: int) -> Any:
    """A callback that marks each saved checkpoint complete, then keeps only the `keep` newest.

    The trainer calls ``on_save`` once a checkpoint is wholly written (weights, optimizer,
    scheduler, RNG, state). Rotation is done here rather than by the trainer (which deletes
    the old checkpoints before ``on_save``, by modification time) so that a complete checkpoint
    exists at every moment.
    """
    from transformers import TrainerCallback

    class MarkComplete(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not args.should_save:
                return
            folder = Path(args.output_dir)
            write_json(
                folder / f"checkpoint-{state.global_step}" / COMPLETE, {"step": state.global_step}
            )
            complete = [path for _, path in _checkpoints(folder) if (path / COMPLETE).is_file()]
            for old in complete[:-keep]:
                (old / COMPLETE).unlink()  # first, so a kill mid-deletion leaves it unmarked
                shutil.rmtree(old)

    return MarkComplete()


def _scratch_base(config: SFTRunConfig, family: ChatFamily | None, rows: Any, folder: Path) -> None:
    """Build the ``model.init`` base once, before the trainer's arguments exist.

    Under DeepSpeed ZeRO-3 the arguments switch model construction to partitioned init, a
    collective that would hang with only the main process building; so the main process builds
    and writes the folder whole (atomically) first, and the others wait for it.
    """
    if (folder / "config.json").exists():
        return
    if is_main():
        from moot.training.scratch import build_scratch_base

        texts = (m["content"] for row in rows for m in row["messages"])
        init, vocab, seed = (
            config.model.init or {},
            config.model.tokenizer_vocab,
            config.training.seed,
        )
        atomic_replace_dir(
            lambda tmp: build_scratch_base(init, vocab, family, texts, tmp, seed), folder
        )
        return
    deadline = time.monotonic() + SCRATCH_WAIT
    while not (folder / "config.json").exists():
        if time.monotonic() > deadline:
            raise ConfigError(f"{folder}: the main process did not build the base in time")
        time.sleep(0.2)


def _claim(out: Path, config: SFTRunConfig, data: dict[str, str | None]) -> str:
    """Claim `out` for this configuration and data (``.moot/train.json``); return the identity.

    A folder an earlier moot claimed for this configuration keeps the identity it recorded (its
    manifest carries it), though that moot named or defaulted some settings otherwise.
    """
    settings = config.trained_settings()
    text = json.dumps({"config": settings, "data": data}, sort_keys=True)
    identity = hashlib.sha256(text.encode()).hexdigest()[:16]

    def same(claim: Any) -> bool:  # or an earlier moot's, that named some settings otherwise
        return isinstance(claim, dict) and (
            claim.get("identity") == identity
            or (claim.get("data") == data and config.claimed_by(claim.get("config") or {}))
        )

    folder = RunFolder(out, flag="training.output_dir")
    claim = folder.claim if is_main() else folder.check_claim  # the main process writes it
    claim("train", {"identity": identity, "config": settings, "data": data}, HOLDS, same)
    claimed = folder.claimed("train")  # an earlier moot's keeps the identity it recorded
    return (claimed.get("identity") if isinstance(claimed, dict) else None) or identity


def is_main() -> bool:
    """Whether this is the main process (rank 0), or the only one."""
    return int(os.environ.get("RANK", "0")) == 0


def _silent(line: str) -> None:
    """Other processes say nothing: the main process speaks for the run."""


def eval_data(config: SFTRunConfig) -> str | None:
    """The eval data: ``data.eval``, or the ``eval`` split of a `moot data mix` folder."""
    if config.data.eval:
        return config.data.eval
    train = Path(config.data.train)
    for folder in (train, train / "dataset"):
        splits = folder / "dataset_dict.json"
        if splits.is_file():
            has_eval = "eval" in json.loads(splits.read_text(encoding="utf-8")).get("splits", [])
            return config.data.train if has_eval else None
    return None


def _messages(source: str, split: str) -> list[Any]:
    """The conversations of an SFT dataset's split, checked (`read_sft_rows`)."""
    return [row["messages"] for row in read_sft_rows(source, split=split)]


def check_inputs(
    config: SFTRunConfig, read: Callable[[str, str], list[Any]] = _messages
) -> dict[str, str | None]:
    """Check what the run needs before any model loads; its data's hashes (`content_digest`).

    The base must be on this machine (`check_base`) and the train and eval data usable. Data
    files are read without torch, transformers or `datasets` (`read`, ``(source, split)`` to
    checked samples: `read_sft_rows`' conversations by default), so a bad input is refused in a
    moment, before any heavy import, and before a launch starts its workers.

    Raises:
        InputError: Unusable training or eval data (see `read_sft_rows`).
        ConfigError: A base model that is not on this machine, a hub dataset that cannot be
            loaded, an evaluation schedule without eval data, or a ``training.output_dir`` that
            is, holds or lies inside the base or the data.
    """
    check_base(config)
    eval_source = eval_data(config)
    training = config.training
    for source in (config.model.base, config.data.train, eval_source):
        if source and (how := overlap(training.output_dir, source)):
            raise ConfigError(
                f"training.output_dir {training.output_dir} {how} an input ({source}): "
                "choose another folder"
            )
    if not eval_source and (training.eval_steps or training.eval_strategy not in (None, "no")):
        raise ConfigError(
            "training.eval_strategy and eval_steps need eval data: set data.eval, or train on a "
            "moot data mix folder with an eval split"
        )
    rows = {"train": read(config.data.train, "train")}
    if eval_source:
        rows["eval"] = read(eval_source, eval_split(eval_source))
    digests = {split: content_digest(found) for split, found in rows.items()}
    return {"train": digests["train"], "eval": digests.get("eval")}


def check_base(config: SFTRunConfig) -> None:
    """Refuse a base that cannot be here: a missing local path, or offline, an uncached hub id.

    Other problems (a corrupt folder, a gated repo online) surface when the model loads.
    """
    from moot.core.metrics.perspective_diversity import EMBEDDED

    base = config.model.base
    if config.model.init is not None or not base or base == EMBEDDED or Path(base).exists():
        return
    if base.startswith((".", "/", "~")):
        raise ConfigError(f"cannot load model {base!r}: no such folder")
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(base, "config.json"), str):
            raise ConfigError(_not_here(base))


def eval_split(source: str) -> str:
    """The split of the eval data to read: a file is one split (``train``: all of it)."""
    return "train" if Path(source).is_file() else "eval"


def _load(source: str, split: str) -> Any:
    return load_sft_dataset(source, split=split).select_columns(["messages"])


def watch(trainer: Any, config: SFTRunConfig, progress: bool) -> None:
    """Give `trainer` moot's checkpoint marks and rotation, its log folder, and quiet."""
    trainer.add_callback(_completion_callback(config.training.save_total_limit))
    _tensorboard_logs(trainer, Path(config.training.output_dir) / LOGS)
    if not progress:
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)


def trainer_args(
    config: SFTRunConfig,
    trl_class: type,
    own: dict[str, Any],
    *,
    has_eval: bool,
    progress: bool,
) -> Any:
    """The trl arguments (`trl_class`: ``SFTConfig``, ``DPOConfig``) of `config`'s run.

    trl's fields of ``training`` over moot's defaults, under what moot derives and the trainer's
    `own` fields (e.g. SFT's ``assistant_only_loss``).

    Raises:
        ConfigError: A precision this machine lacks, an unknown optimizer, or a value trl refuses.
    """
    import torch

    training = config.training
    out = Path(training.output_dir)
    cuda = torch.cuda.is_available()
    precision = training.precision
    if precision == "auto":
        precision = "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    if precision != "fp32" and not cuda:
        raise ConfigError(f"training.precision {precision} needs a GPU here; use fp32 or auto")
    # trl's fields by name: moot's defaults, the config's
    given = _known_names(training.trainer_arguments(), trl_class)
    names = {field.name for field in fields(trl_class)}
    # a default of moot's for a field this trainer lacks (SFT's packing, for DPO) is left out;
    # the same field given in the config reaches the trainer, which names it
    given = {k: v for k, v in given.items() if k in names or k in training.model_fields_set}
    if "optim" in given:
        _optimizer(given["optim"])
    defaults = {
        "per_device_eval_batch_size": training.per_device_train_batch_size,
        "data_seed": training.seed,
        "ddp_find_unused_parameters": False,
    }
    derived = {  # moot's own keys and rules; the config may not set these fields (REFUSED)
        "output_dir": str(out / "checkpoints"),
        "gradient_accumulation_steps": config.gradient_accumulation(
            int(os.environ.get("WORLD_SIZE", "1"))
        ),
        **own,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "use_cpu": not cuda,
        "save_strategy": training.strategy("save"),
        "save_steps": training.save_steps or 500,  # read only with the steps strategy
        "save_total_limit": None,  # the completion callback rotates, after marking
        "eval_strategy": training.strategy("eval") if has_eval else "no",
        "include_num_input_tokens_seen": "non_padding",
        "run_name": training.run_name or out.name,
        "disable_tqdm": not progress,
    }
    try:
        return trl_class(**{**defaults, **given, **derived})
    except (TypeError, ValueError) as exc:  # trl's own check of a value passed through
        raise ConfigError(f"training: {str(exc).strip().splitlines()[0]}") from None


def _known_names(arguments: dict[str, Any], config_class: type) -> dict[str, Any]:
    """`arguments` under the names `config_class` has.

    transformers before 5.23 (vLLM 0.33 allows < 5.21) knows activation checkpointing only by its
    old name, gradient checkpointing.
    """
    if "activation_checkpointing" in {field.name for field in fields(config_class)}:
        return arguments
    old = "gradient_checkpointing"
    return {key.replace("activation_checkpointing", old): v for key, v in arguments.items()}


def _optimizer(name: str) -> str:
    """`name` if transformers knows the optimizer (its ``OptimizerNames``), else a ConfigError."""
    from transformers.training_args import OptimizerNames

    from moot.core.validation import did_you_mean

    known = [member.value for member in OptimizerNames]
    if name not in known:
        raise ConfigError(
            f"training.optim: unknown optimizer {name!r}{did_you_mean(name, known)} "
            "(transformers' OptimizerNames)"
        )
    return name


def _tensorboard_logs(trainer: Any, folder: Path) -> None:
    """Point the TensorBoard callback at `folder` (``OUT/logs``), not ``checkpoints/runs/<time>``.

    The callback's only setting is the ``TENSORBOARD_LOGGING_DIR`` variable; one set by the user
    wins. A resumed run adds an event file to the same folder, so its curve goes on.
    """
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = str(folder)


def load_tokenizer(base: str, family: ChatFamily | None, *, markers: bool = True) -> Any:
    """`base`'s tokenizer with `family`'s chat template; with `markers`, one that has them.

    `markers`: the template must carry ``{% generation %}`` markers (SFT's assistant-only loss).
    """
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(base)
    except (OSError, ValueError) as exc:
        raise ConfigError(_unloadable(base, exc)) from None
    if family is not None:
        tokenizer.chat_template = family.template
        if family.eos not in tokenizer.get_vocab():
            raise ConfigError(
                f"chat template {family.name} ends turns with {family.eos!r}, which is not a token "
                f"of {base}'s tokenizer: pick the base model's own family"
            )
    elif markers and not has_generation_markers(tokenizer.chat_template):
        raise ConfigError(
            f"{base}'s tokenizer has no chat template with {{% generation %}} markers, so "
            "assistant-only loss would train nothing: set model.chat_template to a family"
        )
    return tokenizer


def load_model(base: str, config: SFTRunConfig) -> Any:
    """`base` as a causal LM, with `config`'s dtype, attention and (QLoRA) quantization."""
    import torch
    from transformers import AutoModelForCausalLM

    options: dict[str, Any] = {}
    if config.model.dtype != "auto":
        options["dtype"] = getattr(torch, config.model.dtype)
    if config.model.attn_implementation:
        options["attn_implementation"] = config.model.attn_implementation
    quantization = _quantization(config.lora.qlora) if config.training.method == "lora" else None
    if quantization is not None:
        options["quantization_config"] = quantization
    try:
        return AutoModelForCausalLM.from_pretrained(base, **options)
    except (OSError, ValueError) as exc:
        raise ConfigError(_unloadable(base, exc)) from None


def lora_config(config: SFTRunConfig) -> Any:
    """The ``LoraConfig`` of a LoRA run; None trains every weight (``method: full``)."""
    if config.training.method == "full":
        return None
    from peft import LoraConfig

    lora = config.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def _quantization(qlora: bool | str) -> Any:
    """A 4-bit NF4 config for QLoRA, or None."""
    import importlib.util

    import torch

    available = torch.cuda.is_available() and importlib.util.find_spec("bitsandbytes") is not None
    if qlora is True and not available:
        raise ConfigError("lora.qlora needs a CUDA GPU and bitsandbytes (pip install bitsandbytes)")
    if not qlora or not available:
        return None
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )


def _unloadable(base: str, exc: Exception) -> str:
    if not Path(base).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        return _not_here(base)
    return f"cannot load model {base!r}: {str(exc).strip().splitlines()[0]}"


def _not_here(base: str) -> str:
    return (
        f"cannot load model {base!r}: not a local folder, and not in the Hugging Face cache "
        "(HF_HUB_OFFLINE=1)"
    )


def _fit_lengths(rows: Any, tokenizer: Any, config: SFTRunConfig, source: str) -> tuple:
    """Count samples over ``max_length`` and drop them if asked; report the numbers."""
    limit = config.data.max_length

    def lengths(batch: dict[str, list]) -> dict[str, list[int]]:
        texts = tokenizer.apply_chat_template(batch["messages"], tokenize=False)
        encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
        return {"length": [len(ids) for ids in encoded]}

    measured = rows.map(lengths, batched=True, batch_size=256)
    sizes = measured["length"]
    overlong = sum(size > limit for size in sizes)
    report = {
        "source": source,
        "samples": len(sizes),
        "overlong": overlong,
        "overlong_policy": config.data.overlong,
        "tokens": sum(min(size, limit) for size in sizes),
        "sha256": content_digest(rows["messages"]),
    }
    if config.data.overlong == "drop" and overlong:
        measured = measured.filter(lambda row: row["length"] <= limit)
        report["samples"] = len(measured)
        if not len(measured):
            raise InputError(source, f"every sample is longer than data.max_length {limit}")
    return measured.remove_columns("length"), report


def _length_line(split: str, report: dict[str, Any], config: SFTRunConfig) -> str:
    limit = config.data.max_length
    line = f"{split}: {report['samples']} samples, {report['tokens']} tokens"
    if report["overlong"]:
        done = "dropped" if config.data.overlong == "drop" else "truncated to keep the start"
        line += f"; {report['overlong']} longer than {limit} tokens, {done}"
    return line


def content_digest(conversations: Iterable[Any]) -> str:
    """A content hash of the samples' messages, in order."""
    digest = hashlib.sha256()
    for messages in conversations:
        digest.update(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode())
    return digest.hexdigest()


def _trainable(model: Any) -> dict[str, int]:
    def size(parameter: Any) -> int:  # ZeRO-3 leaves each process a partition
        return getattr(parameter, "ds_numel", None) or parameter.numel()

    total = sum(size(p) for p in model.parameters())
    trainable = sum(size(p) for p in model.parameters() if p.requires_grad)
    return {"trainable": trainable, "total": total}
