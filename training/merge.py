"""Merge a LoRA adapter into its base: one plain Hugging Face model folder.

The merged folder loads with ``AutoModelForCausalLM.from_pretrained`` alone, so ``moot generate``,
vLLM or any OpenAI-compatible server can serve it; the tokenizer (with the chat template the
adapter was trained with) goes along.
"""

from __future__ import annotations

import json
from pathlib import Path

from moot.core.data.records import atomic_replace_dir, check_out_dir, write_json
from moot.core.errors import ConfigError, InputError
from moot.core.hub.cards import Card, folder_bytes, write_card

KIND = "merged-model"


def merge_adapter(adapter_dir: Path, out_dir: Path) -> Path:
    """Write the base model with the adapter's weights merged in to `out_dir`.

    The folder appears complete or not at all.

    Args:
        adapter_dir: A peft LoRA adapter folder (``adapter_config.json``), e.g. a run's
            ``adapter/``; its base is read from ``base_model_name_or_path``.
        out_dir: The merged model's folder: new, empty, or an earlier merge's (replaced).

    Returns:
        `out_dir`.

    Raises:
        InputError: `adapter_dir` is not a LoRA adapter folder.
        ConfigError: The base model cannot be loaded, or `out_dir` is (or holds, or sits inside)
            the adapter or a local base, or holds anything but an earlier merge.
    """
    adapter_dir, out_dir = Path(adapter_dir), Path(out_dir)
    config_path = adapter_dir / "adapter_config.json"
    if not config_path.is_file():
        raise InputError(adapter_dir, "not a LoRA adapter folder (no adapter_config.json)")
    try:
        base = json.loads(config_path.read_text(encoding="utf-8"))["base_model_name_or_path"]
    except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        problem = "no base_model_name_or_path" if isinstance(exc, KeyError) else "not a JSON object"
        raise InputError(config_path, problem) from None
    check_out_dir(out_dir, KIND, [adapter_dir, base])
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    try:
        model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir))
    except (OSError, ValueError) as exc:
        problem = str(exc).strip().splitlines()[0]
        raise ConfigError(f"cannot load {adapter_dir}'s base {base!r}: {problem}") from None
    tokenizer_source = adapter_dir if (adapter_dir / "tokenizer_config.json").exists() else base
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_source))
    merged = model.merge_and_unload()

    def build(folder: Path) -> None:
        merged.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        write_json(
            folder / "manifest.json", {"kind": KIND, "adapter": str(adapter_dir), "base": base}
        )
        parameters = sum(p.numel() for p in merged.parameters())
        write_card(folder, merged_card(adapter_dir, base, parameters, folder_bytes(folder)))

    atomic_replace_dir(build, out_dir)
    return out_dir


def merged_card(adapter_dir: Path, base: str, parameters: int, size: int) -> Card:
    """The merged model's card (`moot.core.hub.cards`): the adapter's base and data carry over.

    The Hub ids of the base and the training data are read from the adapter's own card (a
    `moot train sft` adapter has one), else the base is named as the adapter names it.
    """
    from huggingface_hub import ModelCard

    from moot.training.sft_card import hub_id

    known: dict = {}
    if (adapter_dir / "README.md").is_file():
        known = ModelCard.load(adapter_dir / "README.md").data.to_dict()
    base_id = known.get("base_model") or hub_id(base)
    datasets = known.get("datasets") or []
    return Card(
        kind="model",
        title=f"moot merged model on {base_id or base}",
        summary=(
            f"The LoRA adapter `{adapter_dir}` merged into its base `{base_id or base}` by "
            "`moot train merge` (peft's `merge_and_unload`): one plain transformers model folder "
            "that `moot generate`, vLLM or any OpenAI-compatible server loads without peft; the "
            "tokenizer and its chat template come with it."
        ),
        schema="Output folder of `moot train merge`",
        sizes=[("parameters", parameters), ("bytes", size)],
        models=[base_id or base],
        tags=["sft", "merged", "moot-sft"],
        base_model=base_id,
        datasets=datasets if isinstance(datasets, list) else [datasets],
        library_name="transformers",
        inputs=[adapter_dir],
    )
