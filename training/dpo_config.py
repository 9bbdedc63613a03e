"""The configuration of a DPO run: SFT's (`moot.training.sft_config`) and a ``dpo`` section.

The same file, presets, overrides and checks as ``moot train sft``; ``data.train`` is a
preference dataset (`moot.training.dpo_data`), ``model.base`` a model or a LoRA adapter a
``moot train sft`` run wrote, and ``dpo`` holds trl's ``DPOConfig`` settings of the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from moot.core.validation import ConfigModel
from moot.training.sft_config import SFTRunConfig, load_run_config

#: trl 1.16's DPO losses (``DPOConfig.loss_type``); several are combined by ``loss_weights``.
LOSSES = (
    "sigmoid",
    "hinge",
    "ipo",
    "exo_pair",
    "nca_pair",
    "robust",
    "bco_pair",
    "sppo_hard",
    "aot",
    "aot_unpaired",
    "apo_zero",
    "apo_down",
    "discopop",
    "sft",
    "sigmoid_norm",
)


class DPOSettings(ConfigModel):
    """The preference loss: trl's ``DPOConfig`` fields of the same names.

    Args:
        beta: How far the policy may move from the reference (DPO's β; IPO's regularisation).
        loss_type: One of `LOSSES`, or several combined (e.g. ``[sigmoid, sft]``).
        loss_weights: One weight per loss in `loss_type`; None: 1 each.
        label_smoothing: The chance a preference is wrong (``robust``, ``exo_pair`` losses).
    """

    beta: float = Field(0.1, gt=0)
    loss_type: list[str] = ["sigmoid"]
    loss_weights: list[float] | None = None
    label_smoothing: float = Field(0.0, ge=0, lt=0.5, validate_default=True)

    @field_validator("loss_type", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("loss_type")
    @classmethod
    def _known_losses(cls, losses: list[str]) -> list[str]:
        if not losses:
            raise ValueError("name at least one loss")
        for loss in losses:
            if loss not in LOSSES:
                raise ValueError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")
        return losses

    @field_validator("label_smoothing")
    @classmethod
    def _exo_smooths(cls, value: float, info: ValidationInfo) -> float:
        if "exo_pair" in info.data.get("loss_type", ()) and not value:  # trl refuses it, late
            raise ValueError("the exo_pair loss needs a value above 0 (EXO's paper suggests 1e-3)")
        return value

    @model_validator(mode="after")
    def _one_weight_per_loss(self) -> DPOSettings:
        if self.loss_weights is not None and len(self.loss_weights) != len(self.loss_type):
            raise ValueError(
                f"dpo.loss_weights: {len(self.loss_weights)} weight(s) for "
                f"{len(self.loss_type)} loss(es) in dpo.loss_type"
            )
        return self

    def trainer_arguments(self) -> dict[str, Any]:
        """The settings as ``DPOConfig`` keyword arguments; None ones left to trl."""
        return {key: value for key, value in self.model_dump().items() if value is not None}


class DPORunConfig(SFTRunConfig):
    """A whole DPO run. See docs/cli.md (``moot train dpo``) for the YAML form.

    Example:
        >>> config = load_dpo_config(None, ["data.train=p.jsonl", "training.output_dir=runs/x",
        ...                                 "model.base=runs/sft/adapter", "dpo.beta=0.2"])
        >>> config.dpo.beta
        0.2
    """

    dpo: DPOSettings = DPOSettings()

    @model_validator(mode="after")
    def _preference_run(self) -> DPORunConfig:
        if self.model.init is not None:
            raise ValueError("DPO starts from a trained model: set model.base, not model.init")
        if self.training.packing:
            raise ValueError("training.packing is SFT's: DPO batches chosen and rejected pairs")
        if self.data.overlong == "drop":
            raise ValueError("data.overlong drop is SFT's: DPO truncates pairs to data.max_length")
        # what trl 1.16's DPOTrainer refuses or ignores, said before torch loads
        if self.training.padding_free:
            raise ValueError("training.padding_free is SFT's: trl's DPO trainer pads every batch")
        modules = self.lora.target_modules
        if self.training.method == "lora" and modules != "all-linear" and "lm_head" in modules:
            raise ValueError(
                "lora.target_modules: DPO cannot train an adapter on lm_head (trl computes "
                "log-probabilities from its weight): leave lm_head out"
            )
        trl = self.training.model_extra or {}
        liger = trl.get("liger_kernel_config") or {}
        if trl.get("use_liger_kernel") and liger.get("fused_linear_cross_entropy"):
            raise ValueError(
                "training.liger_kernel_config: fused_linear_cross_entropy is SFT's: trl's DPO "
                "trainer fuses its own LM head"
            )
        return self


def load_dpo_config(path: Path | str | None, overrides: Sequence[str] = ()) -> DPORunConfig:
    """Read a DPO run's configuration, as `moot.training.load_sft_config` reads SFT's.

    Raises:
        ConfigError: As `load_sft_config`, and for the ``dpo`` section.
    """
    return load_run_config(DPORunConfig, path, overrides)
