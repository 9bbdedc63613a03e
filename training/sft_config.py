"""The configuration of an SFT run (full or LoRA): a YAML file over a preset, with overrides.

Layers, later ones winning: the field defaults, the preset the file names (``preset:``), the file,
then command-line overrides such as ``training.learning_rate=1e-5``. The merged tree is checked
by the pydantic models below (`moot.core.validation`) before anything is loaded, so a typo is one
line naming the file and the key, not a traceback an hour in.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails

from moot.core.errors import ConfigError
from moot.core.loader import Unreadable, load_yaml
from moot.core.validation import ConfigModel, problem

PRESETS = (
    "debatune-llama2",
    "debatune-vicuna",
    "debatune-llama2-lora",
    "debatune-vicuna-lora",
    "compqa-distill",
)

#: ``training.report_to`` names (transformers' integrations) and the package each needs:
#: (module to find, what to pip install).
REPORTERS = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
    "trackio": ("trackio", "trackio"),
    "mlflow": ("mlflow", "mlflow"),
    "comet_ml": ("comet_ml", "comet-ml"),
    "clearml": ("clearml", "clearml"),
    "dvclive": ("dvclive", "dvclive"),
    "neptune": ("neptune", "neptune"),
    "swanlab": ("swanlab", "swanlab"),
    "codecarbon": ("codecarbon", "codecarbon"),
}

#: Keys of ``training`` that change where a run is watched, not what it trains.
WATCHING = ("report_to", "run_name")

#: Where the trainer's logs go in the run folder (TensorBoard's event files).
LOGS = "logs"

Strategy = Literal["steps", "epoch", "no"]


class ModelConfig(ConfigModel):
    """The base model.

    Args:
        base: A local model folder, a hub id (offline: it must be in the Hugging Face cache), or
            ``local/smollm2``: the embedded model's own weights (its GGUF, converted once to a
            transformers folder in the moot cache; its chat template is ``chatml``).
        init: Instead of `base`, a transformers config (``model_type`` and sizes) to build a
            random-weight model from: tests and demos, no download.
        tokenizer_vocab: With `init`, the vocabulary of a byte-level BPE tokenizer trained on the
            training data.
        chat_template: A family of `moot.training.chat_templates.FAMILIES`; None keeps the
            tokenizer's own, which must carry ``{% generation %}`` markers.
        dtype: Weights' dtype when loading `base`: ``auto``, ``float32``, ``bfloat16``, ``float16``.
        attn_implementation: e.g. ``sdpa``, ``flash_attention_2``; None lets transformers choose.
    """

    base: str | None = None
    init: dict[str, Any] | None = None
    tokenizer_vocab: int = Field(1024, gt=0)
    chat_template: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    attn_implementation: str | None = None

    @field_validator("init")
    @classmethod
    def _init_names_its_type(cls, init: dict[str, Any] | None) -> dict[str, Any] | None:
        if init is not None and "model_type" not in init:
            raise ValueError("needs a model_type (e.g. llama)")
        return init

    @field_validator("chat_template")
    @classmethod
    def _known_family(cls, name: str | None) -> str | None:
        from moot.training.chat_templates import FAMILIES

        if name is not None and name not in FAMILIES:
            raise ValueError(f"unknown chat template {name!r} (known: {', '.join(FAMILIES)})")
        return name


class DataConfig(ConfigModel):
    """The training data.

    Args:
        train: Anything `moot.training.load_sft_dataset` reads (a `moot data mix` folder, a
            `moot debate` folder, JSONL, a cached hub dataset).
        eval: Evaluation data: a JSON/JSONL file (all its records), or the ``eval`` split of a
            folder or hub dataset; None uses the ``eval`` split of a `moot data mix` folder
            given as `train`, if any.
        max_length: Longest sample in tokens, chat template included.
        overlong: What to do with longer samples: ``truncate`` (keep the start) or ``drop``.
    """

    train: str = Field(min_length=1)
    eval: str | None = None
    max_length: int = Field(2048, gt=0)
    overlong: Literal["truncate", "drop"] = "truncate"


class LoraSettings(ConfigModel):
    """The LoRA adapter (peft ``LoraConfig``); used only with ``training.method: lora``.

    Args:
        r: Rank.
        alpha: Scaling numerator (``lora_alpha``).
        dropout: Dropout on the adapter's input.
        target_modules: Module names, or ``all-linear``.
        qlora: Load the base in 4 bits (bitsandbytes, CUDA): ``true``, ``false``, or ``auto``
            (when both are present).
    """

    r: int = Field(16, gt=0)
    alpha: int = Field(32, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | str = "all-linear"
    qlora: bool | Literal["auto"] = False


#: moot's earlier names for trl's own fields: still read, as trl's names (docs/cli.md lists them).
RENAMED = {
    "epochs": "num_train_epochs",
    "lr_scheduler": "lr_scheduler_type",
    "warmup_ratio": "warmup_steps",  # trl reads a warmup below 1 as a share of the steps
    "per_device_batch_size": "per_device_train_batch_size",
    "gradient_checkpointing": "activation_checkpointing",  # transformers' own old name
}

#: trl's fields a config may not set, and why: moot sets them itself, or they hold a secret.
REFUSED = {
    "gradient_accumulation_steps": "set by moot from training.effective_batch_size",
    "max_length": "set by moot from data.max_length",
    "assistant_only_loss": "set by moot: the loss covers the assistant's turns only",
    "bf16": "set by moot from training.precision",
    "fp16": "set by moot from training.precision",
    "use_cpu": "set by moot: CUDA when present, else the CPU",
    "include_num_input_tokens_seen": "set by moot: it counts the tokens for the manifest",
    "disable_tqdm": "set by moot from --quiet",
    "resume_from_checkpoint": "set by moot: a rerun resumes from the last complete checkpoint",
    "hub_token": "a secret does not belong in a config: log in (hf auth login) or set HF_TOKEN",
}

#: Keys of ``training`` that are moot's alone, not trl's (``output_dir`` is the run folder:
#: trl's checkpoints go to ``OUT/checkpoints``).
OWN = ("output_dir", "method", "effective_batch_size", "precision")


def trl_names(training: dict[str, Any]) -> dict[str, Any]:
    """`training` with moot's earlier names (`RENAMED`) read as trl's; an old manifest's too."""
    return {RENAMED.get(key, key): value for key, value in training.items()}


def _key_error(key: str, message: str) -> ValidationError:
    """A validation error at `key` of the section being validated (``training.KEY: message``)."""
    error = InitErrorDetails(type="value_error", loc=(key,), input=None, ctx={"error": message})
    return ValidationError.from_exception_data("TrainingSettings", [error])


class TrainingSettings(ConfigModel):
    """The optimisation: trl's ``SFTConfig`` fields by their own names, and moot's own keys.

    Any other field of the installed trl's ``SFTConfig`` (transformers' ``TrainingArguments``
    included) may be given too, and reaches the trainer as given; a key that is neither is
    refused with the closest known one, before torch loads (`moot.training.trl_fields`). The
    fields below are the ones moot gives its own default or check, or reads itself.

    Args:
        output_dir: Run folder: checkpoints, the trained weights, the logs, the manifest.
        method: ``lora`` (train a LoRA adapter, written to ``adapter/``) or ``full`` (train every
            weight, written as a whole model to ``model/``).
        num_train_epochs: Passes over the training data.
        max_steps: Stop after this many optimizer steps (-1: run all epochs).
        learning_rate: Peak learning rate.
        lr_scheduler_type: A transformers scheduler name (``cosine``, ``linear``, ``constant``...).
        warmup_steps: Steps spent warming up; below 1, a share of all steps.
        weight_decay: AdamW weight decay.
        optim: A transformers optimizer name (``adamw_torch``, ``adafactor``, ``sgd``...,
            transformers' ``OptimizerNames``); None: transformers' default (``adamw_torch_fused``).
        max_grad_norm: Gradients are clipped to this norm (0: no clipping).
        per_device_train_batch_size: Samples per process per forward pass (in evaluation too,
            unless ``per_device_eval_batch_size`` is given).
        effective_batch_size: Samples per optimizer step over all processes; gradient
            accumulation makes up the difference. None: no accumulation.
        packing: Pack samples into ``max_length`` blocks (best-fit, padding-free); each pack is
            a row of the batch, flattened into one sequence only for FlashAttention on a GPU
            (`moot.training.sft_batches`).
        padding_free: Flatten each batch into one sequence without padding (needs FlashAttention
            without packing).
        activation_checkpointing: Recompute activations in the backward pass to save memory
            (transformers' gradient checkpointing, under its v5 name).
        precision: ``auto`` (bf16 on GPUs that have it, else fp32), ``fp32``, ``bf16``, ``fp16``.
        seed: Seed of the initialisation, the data order and dropout (and ``data_seed``, unless
            given).
        logging_strategy: Log the loss every ``logging_steps`` steps, every epoch, or never.
        logging_steps: Log the loss every this many steps.
        eval_strategy: Evaluate every ``eval_steps`` steps, every epoch, or never; None: steps
            when ``eval_steps`` is set, else every epoch (with eval data; without, never).
        eval_steps: Evaluate every this many steps.
        save_strategy: Checkpoint every ``save_steps`` steps, every epoch, or never (then a
            killed run starts over); None: steps when ``save_steps`` is set, else every epoch.
        save_steps: Checkpoint every this many steps.
        save_total_limit: Checkpoints kept (moot rotates them, once the newest is complete).
        report_to: Experiment trackers the trainer logs to (transformers' integrations:
            ``tensorboard``, ``wandb``, ``trackio``, ``mlflow``...); each one's package must be
            installed. ``[]`` or ``none``: none.
        run_name: The run's name in the trackers; None: the output folder's name.
    """

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    output_dir: str = Field(min_length=1)
    method: Literal["lora", "full"] = "lora"
    num_train_epochs: float = Field(3.0, gt=0)
    max_steps: int = -1
    learning_rate: float = Field(2e-5, gt=0)
    lr_scheduler_type: str = "cosine"
    warmup_steps: float = Field(0.03, ge=0)
    weight_decay: float = 0.0
    optim: str | None = None
    max_grad_norm: float = Field(1.0, ge=0)
    per_device_train_batch_size: int = Field(4, gt=0)
    effective_batch_size: int | None = Field(None, gt=0)
    packing: bool = False
    padding_free: bool = False
    activation_checkpointing: bool = True
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    seed: int = 42
    logging_strategy: Strategy = "steps"
    logging_steps: int = Field(10, gt=0)
    eval_strategy: Strategy | None = None
    eval_steps: int | None = Field(None, gt=0)
    save_strategy: Strategy | None = None
    save_steps: int | None = Field(None, gt=0)
    save_total_limit: int = Field(2, gt=0)
    report_to: list[str] = []
    run_name: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _trl_fields(cls, given: Any) -> Any:
        """Read old names as trl's; refuse a key trl does not know or moot sets itself."""
        if not isinstance(given, dict):
            return given
        from moot.core.validation import did_you_mean
        from moot.training.trl_fields import sft_config_fields

        twice = next((old for old, new in RENAMED.items() if old in given and new in given), None)
        if twice:
            raise _key_error(twice, f"the old name of {RENAMED[twice]}, also given: keep one")
        ratio = given.get("warmup_ratio")
        if isinstance(ratio, int | float) and not 0 <= ratio < 1:
            raise _key_error("warmup_ratio", f"a share of the steps, in [0, 1), got {ratio}")
        trl = sft_config_fields()
        known = [*cls.model_fields, *trl]
        for key in given:
            if key in REFUSED:
                raise _key_error(key, REFUSED[key])
            if key not in cls.model_fields and key not in trl and key not in RENAMED:
                raise _key_error(key, f"unknown key{did_you_mean(key, known)}")
        return trl_names(given)

    @field_validator("max_steps")
    @classmethod
    def _steps(cls, steps: int) -> int:
        if steps == 0 or steps < -1:
            raise ValueError(f"must be -1 (all epochs) or more than 0, got {steps}")
        return steps

    @field_validator("report_to", mode="before")
    @classmethod
    def _one_or_none(cls, value: Any) -> Any:
        """``report_to: tensorboard`` is a list of one; ``none`` (transformers' word) is none."""
        if value == "none" or value is None:
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("report_to")
    @classmethod
    def _installed(cls, names: list[str]) -> list[str]:
        """A tracker is refused here, before torch loads, if its package is missing."""
        for name in names:
            if name not in REPORTERS:
                raise ValueError(f"unknown tracker {name!r} (known: {', '.join(REPORTERS)})")
            module, package = REPORTERS[name]
            if importlib.util.find_spec(module) is None:
                raise ValueError(
                    f"{name} needs the {package} package, which is not installed "
                    f"(pip install {package})"
                )
        return names

    def trainer_arguments(self) -> dict[str, Any]:
        """The settings that are trl's ``SFTConfig`` fields, by name; None ones left to trl."""
        settings = self.model_dump(exclude=set(OWN))
        return {key: value for key, value in settings.items() if value is not None}

    def strategy(self, what: Literal["eval", "save"]) -> str:
        """The ``eval`` or ``save`` strategy in force: as given, else by whether steps are set."""
        given = getattr(self, f"{what}_strategy")
        if given is not None:
            return given
        return "steps" if getattr(self, f"{what}_steps") is not None else "epoch"


class SFTRunConfig(ConfigModel):
    """A whole SFT run. See docs/cli.md (``moot train sft``) for the YAML form.

    Example:
        >>> config = load_sft_config(None, ["data.train=d.jsonl", "training.output_dir=runs/x",
        ...                                 "model.base=meta-llama/Llama-2-7b-hf"])
        >>> config.training.learning_rate
        2e-05
    """

    preset: str | None = None
    model: ModelConfig = ModelConfig()
    data: DataConfig
    lora: LoraSettings = LoraSettings()
    training: TrainingSettings

    @model_validator(mode="after")
    def _consistent(self) -> SFTRunConfig:
        if (self.model.base is None) == (self.model.init is None):
            raise ValueError("set exactly one of model.base and model.init")
        if self.training.method == "full" and self.lora.qlora is True:
            raise ValueError("lora.qlora needs training.method lora (a 4-bit base is frozen)")
        training = self.training
        for what in ("eval", "save"):
            strategy, steps = (
                getattr(training, f"{what}_strategy"),
                getattr(training, f"{what}_steps"),
            )
            if strategy == "steps" and steps is None:
                raise ValueError(f"training.{what}_strategy steps needs training.{what}_steps")
            if strategy not in (None, "steps") and steps is not None:
                raise ValueError(
                    f"training.{what}_steps needs training.{what}_strategy steps (or none), "
                    f"not {strategy}"
                )
        return self

    @classmethod
    def sections(cls) -> list[str]:
        """The names of the config file's sections, each a mapping."""
        return [name for name in cls.model_fields if name != "preset"]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (what the manifest records)."""
        return self.model_dump()

    def trained_settings(self) -> dict[str, Any]:
        """`to_dict` less the keys that only say where the run is watched (`WATCHING`).

        A run folder is claimed for these: resuming with a tracker added or renamed is the same
        run.
        """
        settings = self.to_dict()
        for key in WATCHING:
            del settings["training"][key]
        return settings

    def claimed_by(self, claimed: dict[str, Any]) -> bool:
        """Whether `claimed` (a folder's recorded `trained_settings`) is this configuration.

        A key the recorded settings lack was added to moot after the run began: it matches
        while it holds its default, so a run folder survives an upgrade (and a key moot has
        since renamed to trl's name, `RENAMED`, is read under it). A trl field passed through
        matches only if both give it alike.
        """
        current = json.loads(json.dumps(self.trained_settings()))
        for section, values in current.items():
            if not isinstance(values, dict):
                if claimed.get(section) != values:
                    return False
                continue
            fields = type(getattr(self, section)).model_fields
            recorded = trl_names(claimed.get(section) or {})
            if set(recorded) - set(values):
                return False
            for key, value in values.items():
                if key in recorded:
                    expected = recorded[key]
                elif key not in fields or fields[key].is_required():
                    return False
                else:
                    expected = fields[key].get_default(call_default_factory=True)
                if json.loads(json.dumps(expected)) != value:
                    return False
        return True

    def gradient_accumulation(self, processes: int) -> int:
        """Accumulation steps that make up `effective_batch_size` on `processes` processes.

        Raises:
            ConfigError: The effective batch is not a multiple of the per-step batch.
        """
        per_step = self.training.per_device_train_batch_size * processes
        wanted = self.training.effective_batch_size
        if wanted is None:
            return 1
        if wanted % per_step:
            raise ConfigError(
                f"training.effective_batch_size {wanted} is not a multiple of "
                f"per_device_train_batch_size × processes = {per_step}"
            )
        return wanted // per_step


def load_sft_config(path: Path | str | None, overrides: Sequence[str] = ()) -> SFTRunConfig:
    """Read an SFT run's configuration: preset, then the YAML file at `path`, then `overrides`.

    Args:
        path: A YAML file with the sections ``model``, ``data``, ``lora``, ``training`` (and
            optionally ``preset``), or None.
        overrides: ``section.key=value`` strings; values are read as YAML (``1e-5``, ``[q_proj]``).

    Raises:
        ConfigError: An unreadable file, an unknown preset, section or key, a value of the wrong
            type, or a missing required value: one line naming the file and the key.
    """
    return load_run_config(SFTRunConfig, path, overrides)


Run = TypeVar("Run", bound=SFTRunConfig)


def load_run_config(
    schema: type[Run], path: Path | str | None, overrides: Sequence[str] = ()
) -> Run:
    """Read a training run's configuration of `schema` (SFT's, or one built on it, DPO's).

    As `load_sft_config`; every section `schema` has is a mapping, its defaults when left out.
    """
    where = str(path) if path else "config"
    tree = _read_yaml(Path(path)) if path else {}
    for override in overrides:
        key, sep, text = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {override!r}: expected section.key=value")
        _assign(tree, key.strip(), _yaml_value(text, override), override)
    preset = tree.get("preset")
    if preset is not None:
        tree = _merge(_preset(preset, where), tree)
    for name in schema.sections():  # a section left out is all defaults (or its required keys)
        tree.setdefault(name, {})
    try:
        return schema.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(f"{where}: {problem(exc, schema)}") from None


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        tree = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:  # `line 3: key 'lora' repeated`
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections")
    return tree


def _yaml_value(text: str, override: str) -> Any:
    try:
        return load_yaml(text) if text.strip() else None
    except Unreadable:
        raise ConfigError(f"override {override!r}: the value is not valid YAML") from None


def _assign(tree: dict[str, Any], key: str, value: Any, override: str) -> None:
    if key == "preset":
        tree["preset"] = value
        return
    section, dot, name = key.partition(".")
    if not dot or "." in name:
        raise ConfigError(f"override {override!r}: expected section.key=value")
    target = tree.setdefault(section, {})
    if not isinstance(target, dict):
        raise ConfigError(f"override {override!r}: section {section!r} is not a mapping")
    tree[section] = _layered(target, {name: value})


def _preset(name: object, where: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"{where}: unknown preset {name!r} (known: {', '.join(PRESETS)})")
    text = resources.files("moot.training").joinpath(f"presets/{name}.yaml").read_text("utf-8")
    return load_yaml(text)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _layered(merged[key], value)
        else:
            merged[key] = value
    return merged


def _layered(under: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The section `over` on top of `under`, a key of `over` replacing either of its names.

    So an old name (`RENAMED`) and its new one meet only within one layer, where they are refused.
    """
    names = {RENAMED.get(key, key) for key in over}
    kept = {key: value for key, value in under.items() if RENAMED.get(key, key) not in names}
    return {**kept, **over}
