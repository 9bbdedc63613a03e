"""The card of a `moot train sft` or `dpo` run's weights: ``adapter/README.md`` or ``model/``.

Built from the run's ``manifest.json`` alone, so a rerun of a finished run (no training) writes
it too. It replaces the template card peft saves beside an adapter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moot.core.errors import InputError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.hub.push import pushed_repo
from moot.core.tables import render_table
from moot.training.sft_config import trl_names

#: The Hub model whose weights the embedded ``local/smollm2`` ships (as a GGUF).
EMBEDDED_BASE = "HuggingFaceTB/SmolLM2-135M-Instruct"


def hub_id(source: str | None) -> str | None:
    """`source` as a Hub id when it names one: pushed by moot, or not a local path."""
    if not source:
        return None
    if Path(source).exists():
        return pushed_repo(source)
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(source)
    except HFValidationError:
        return None
    return source if source.count("/") == 1 else None


def write_sft_card(output_dir: str | Path) -> Path:
    """Write the card of the finished run in `output_dir` into its weights folder; that folder.

    Raises:
        InputError: The run has no readable ``manifest.json`` (it has not finished).
    """
    output_dir = Path(output_dir)
    path = output_dir / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(
            path, f"unreadable ({exc.__class__.__name__}); has the run finished?"
        ) from None
    lora = manifest["method"] == "lora"
    weights = output_dir / ("adapter" if lora else "model")
    write_card(weights, sft_card(manifest, weights))
    return weights


def sft_card(manifest: dict[str, Any], weights: Path) -> Card:
    """The card of the weights a `moot train sft` or `dpo` run wrote (`moot.core.hub.cards`)."""
    config, lora = manifest["config"], manifest["method"] == "lora"
    base = config["model"]["base"]
    base_id = EMBEDDED_BASE if base == "local/smollm2" else hub_id(base)
    shown = base or f"a random-weight {config['model']['init']['model_type']} (`model.init`)"
    sources = [d["source"] for d in manifest["data"].values() if d]
    params = manifest["trainable_parameters"]
    train = trl_names(config["training"])  # a manifest of an earlier moot: its names
    what = "A LoRA adapter" if lora else "A fully fine-tuned model"
    dpo = manifest.get("trainer") == "dpo"  # `moot train dpo`'s run; an earlier moot's is SFT
    losses = ", ".join(f"{k} {v:.4f}" for k, v in manifest["losses"].items())
    settings = [
        ("method", manifest["method"]),
        ("epochs / steps", f"{manifest['epochs']:g} / {manifest['steps']}"),
        ("learning rate, scheduler", f"{train['learning_rate']:g}, {train['lr_scheduler_type']}"),
        (
            "precision, device, processes",
            f"{train['precision']}, {manifest['device']}, {manifest['processes']}",
        ),
        ("losses", losses),
    ]
    if lora:
        settings.append(
            (
                "LoRA r / alpha / targets",
                "{r} / {alpha} / {target_modules}".format(**config["lora"]),
            )
        )
    train_data = manifest["data"]["train"]
    on = ", ".join(f"`{s}`" for s in sources)
    if dpo:
        loss = config["dpo"]
        settings.append(("DPO loss, beta", f"{' + '.join(loss['loss_type'])}, {loss['beta']:g}"))
        reference = "its adapter off" if lora else "a frozen copy"
        summary = (
            f"{what} trained by `moot train dpo` with trl's DPOTrainer (the reference model: the "
            f"starting model, {reference}) on the preference pairs {on}; starting model: "
            f"`{base_id or shown}`. Direct Preference Optimization: Rafailov et al., NeurIPS 2023."
        )
        data_size = ("train preference pairs", train_data["samples"])
    else:
        summary = (
            f"{what} trained by `moot train sft` with trl's SFTTrainer, assistant-only loss, on "
            f"{on}; base model: `{base_id or shown}`. Supervised fine-tuning on debate "
            "statements follows DEBATunE (Li et al., ACL 2024, Section 3.2); on distilled "
            "comparative answers, CompQA (Nikishina et al., 2025, Section 4 and Appendix B)."
        )
        data_size = ("train samples / tokens", f"{train_data['samples']} / {train_data['tokens']}")
    table = render_table([("setting", "value"), *settings], left=2, markdown=True)
    trainer = "dpo" if dpo else "sft"
    return Card(
        kind="model",
        title=f"moot {trainer.upper()} {'adapter' if lora else 'model'} on {shown}",
        summary=summary,
        schema=f"Output folder of `moot train {trainer}`",
        sizes=[
            ("trainable parameters", params["trainable"]),
            ("parameters", params["total"]),
            data_size,
            ("bytes", folder_bytes(weights)),
        ],
        models=[base_id or shown],
        tags=[trainer, "trl", f"moot-{trainer}", *(["lora", "peft"] if lora else [])],
        base_model=base_id,
        datasets=[d for d in map(hub_id, sources) if d],
        library_name="peft" if lora else "transformers",
        notes=[("Training", table)],
        inputs=sources,
    )
