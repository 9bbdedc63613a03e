"""The configuration of an SFT run (full or LoRA): a YAML file over a preset, with overrides.

Layers, later ones winning: the field defaults, the preset the file names (``preset:``), the file,
then command-line overrides such as ``training.learning_rate=1e-5``. Every key and value is
checked before anything is loaded, so a typo is a one-line error, not a traceback an hour in.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml

from moot.core.errors import ConfigError

PRESETS = (
    "debatune-llama2",
    "debatune-vicuna",
    "debatune-llama2-lora",
    "debatune-vicuna-lora",
    "compqa-distill",
)


@dataclass(frozen=True)
class ModelConfig:
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
    tokenizer_vocab: int = 1024
    chat_template: str | None = None
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    attn_implementation: str | None = None


@dataclass(frozen=True)
class DataConfig:
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

    train: str = ""
    eval: str | None = None
    max_length: int = 2048
    overlong: Literal["truncate", "drop"] = "truncate"


@dataclass(frozen=True)
class LoraSettings:
    """The LoRA adapter (peft ``LoraConfig``); used only with ``training.method: lora``.

    Args:
        r: Rank.
        alpha: Scaling numerator (``lora_alpha``).
        dropout: Dropout on the adapter's input.
        target_modules: Module names, or ``all-linear``.
        qlora: Load the base in 4 bits (bitsandbytes, CUDA): ``true``, ``false``, or ``auto``
            (when both are present).
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"
    qlora: bool | Literal["auto"] = False


@dataclass(frozen=True)
class TrainingSettings:
    """The optimisation (trl ``SFTConfig``).

    Args:
        output_dir: Run folder: checkpoints, the trained weights, the manifest.
        method: ``lora`` (train a LoRA adapter, written to ``adapter/``) or ``full`` (train every
            weight, written as a whole model to ``model/``).
        epochs: Passes over the training data.
        max_steps: Stop after this many optimizer steps (-1: run all epochs).
        learning_rate: Peak learning rate.
        lr_scheduler: A transformers scheduler name (``cosine``, ``linear``, ``constant``...).
        warmup_ratio: Share of the steps spent warming up.
        weight_decay: AdamW weight decay.
        per_device_batch_size: Samples per process per forward pass.
        effective_batch_size: Samples per optimizer step over all processes; gradient
            accumulation makes up the difference. None: no accumulation.
        packing: Pack samples into ``max_length`` blocks (best-fit, padding-free).
        padding_free: Flatten each batch into one sequence without padding (needs FlashAttention
            without packing).
        activation_checkpointing: Recompute activations in the backward pass to save memory.
        precision: ``auto`` (bf16 on GPUs that have it, else fp32), ``fp32``, ``bf16``, ``fp16``.
        seed: Seed of the initialisation, the data order and dropout.
        logging_steps: Log the loss every this many steps.
        save_steps: Checkpoint every this many steps (None: every epoch).
        save_total_limit: Checkpoints kept.
    """

    output_dir: str = ""
    method: Literal["lora", "full"] = "lora"
    epochs: float = 3.0
    max_steps: int = -1
    learning_rate: float = 2e-5
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    per_device_batch_size: int = 4
    effective_batch_size: int | None = None
    packing: bool = False
    padding_free: bool = False
    activation_checkpointing: bool = True
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    seed: int = 42
    logging_steps: int = 10
    save_steps: int | None = None
    save_total_limit: int = 2


@dataclass(frozen=True)
class SFTRunConfig:
    """A whole SFT run. See docs/cli.md (``moot train sft``) for the YAML form.

    Example:
        >>> config = load_sft_config(None, ["data.train=d.jsonl", "training.output_dir=runs/x",
        ...                                 "model.base=meta-llama/Llama-2-7b-hf"])
        >>> config.training.learning_rate
        2e-05
    """

    preset: str | None = None
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    lora: LoraSettings = field(default_factory=LoraSettings)
    training: TrainingSettings = field(default_factory=TrainingSettings)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (what the manifest records)."""
        return dataclasses.asdict(self)

    def gradient_accumulation(self, processes: int) -> int:
        """Accumulation steps that make up `effective_batch_size` on `processes` processes.

        Raises:
            ConfigError: The effective batch is not a multiple of the per-step batch.
        """
        per_step = self.training.per_device_batch_size * processes
        wanted = self.training.effective_batch_size
        if wanted is None:
            return 1
        if wanted % per_step:
            raise ConfigError(
                f"training.effective_batch_size {wanted} is not a multiple of "
                f"per_device_batch_size × processes = {per_step}"
            )
        return wanted // per_step


_SECTION_TYPES = {
    "model": ModelConfig,
    "data": DataConfig,
    "lora": LoraSettings,
    "training": TrainingSettings,
}


def load_sft_config(path: Path | str | None, overrides: Sequence[str] = ()) -> SFTRunConfig:
    """Read a run's configuration: preset, then the YAML file at `path`, then `overrides`.

    Args:
        path: A YAML file with the sections ``model``, ``data``, ``lora``, ``training`` (and
            optionally ``preset``), or None.
        overrides: ``section.key=value`` strings; values are read as YAML (``1e-5``, ``[q_proj]``).

    Raises:
        ConfigError: An unreadable file, an unknown preset, section or key, a value of the wrong
            type, or a missing required value.
    """
    where = str(path) if path else "config"
    tree = _read_yaml(Path(path)) if path else {}
    for override in overrides:
        key, sep, text = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {override!r}: expected section.key=value")
        _assign(tree, key.strip(), _yaml_value(text, override), override)
    preset = tree.pop("preset", None)
    if preset is not None:
        tree = _merge(_preset(preset, where), tree)
    sections = {}
    for name, values in tree.items():
        if name not in _SECTION_TYPES:
            raise ConfigError(f"{where}: unknown section {name!r}{_hint(name, _SECTION_TYPES)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: section {name!r} must be a mapping")
        sections[name] = _build(_SECTION_TYPES[name], values, f"{where}: {name}")
    config = SFTRunConfig(preset=preset, **sections)
    _check(config, where)
    return config


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        tree = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid YAML: nested too deeply") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if tree is None:
        return {}
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a mapping of sections")
    return tree


def _yaml_value(text: str, override: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else None
    except yaml.YAMLError:
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
    target[name] = value


def _preset(name: object, where: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"{where}: unknown preset {name!r} (known: {', '.join(PRESETS)})")
    text = resources.files("moot.training").joinpath(f"presets/{name}.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    built = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{where}: unknown key {key!r}{_hint(key, fields)}")
        value = _number(value) if _fits(0.5, hints[key]) else value
        if not _fits(value, hints[key]):
            raise ConfigError(f"{where}.{key}: expected {_describe(hints[key])}, got {value!r}")
        built[key] = float(value) if hints[key] is float else value
    return cls(**built)


def _number(value: Any) -> Any:
    """YAML reads ``2e-5`` as text (it wants ``2.0e-5``); a float field takes it as a number."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _fits(value: Any, kind: Any) -> bool:
    """Whether a YAML value fits a field's annotation."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(kind))
    if origin is Literal:
        return any(value == option and type(value) is type(option) for option in kind.__args__)
    if origin is list:
        (item,) = typing.get_args(kind)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if kind is type(None):
        return value is None
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _describe(kind: Any) -> str:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(kind))
    if origin is Literal:
        return " or ".join(repr(option) for option in kind.__args__)
    if origin is list:
        return f"a list of {_describe(typing.get_args(kind)[0])}"
    if origin is dict:
        return "a mapping"
    return "null" if kind is type(None) else {"str": "text"}.get(kind.__name__, kind.__name__)


def _hint(name: str, known: typing.Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check(config: SFTRunConfig, where: str) -> None:
    """Required values and ranges that the types alone do not catch."""
    model, data, lora, training = config.model, config.data, config.lora, config.training
    if (model.base is None) == (model.init is None):
        raise ConfigError(f"{where}: set exactly one of model.base and model.init")
    if model.init is not None and "model_type" not in model.init:
        raise ConfigError(f"{where}: model.init needs a model_type (e.g. llama)")
    if not data.train:
        raise ConfigError(f"{where}: data.train is required")
    if not training.output_dir:
        raise ConfigError(f"{where}: training.output_dir is required")
    positive = {
        "data.max_length": data.max_length,
        "lora.r": lora.r,
        "lora.alpha": lora.alpha,
        "training.epochs": training.epochs,
        "training.learning_rate": training.learning_rate,
        "training.per_device_batch_size": training.per_device_batch_size,
        "training.logging_steps": training.logging_steps,
        "training.save_total_limit": training.save_total_limit,
        "model.tokenizer_vocab": model.tokenizer_vocab,
    }
    if training.effective_batch_size is not None:
        positive["training.effective_batch_size"] = training.effective_batch_size
    if training.save_steps is not None:
        positive["training.save_steps"] = training.save_steps
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{where}: {key} must be more than 0, got {value}")
    for key, value in {
        "lora.dropout": lora.dropout,
        "training.warmup_ratio": training.warmup_ratio,
    }.items():
        if not 0 <= value < 1:
            raise ConfigError(f"{where}: {key} must be in [0, 1), got {value}")
    if training.max_steps == 0 or training.max_steps < -1:
        raise ConfigError(f"{where}: training.max_steps must be -1 (all epochs) or more than 0")
    if training.method == "full" and lora.qlora is True:
        raise ConfigError(
            f"{where}: lora.qlora needs training.method lora (a 4-bit base is frozen)"
        )
    if model.chat_template is not None:
        from moot.training.chat_templates import chat_family

        chat_family(model.chat_template)
