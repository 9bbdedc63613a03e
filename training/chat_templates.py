"""Chat templates of the model families the papers fine-tune, with ``{% generation %}`` markers.

The markers tell transformers which characters the assistant wrote, so trl's assistant-only loss
trains exactly the answers (and each answer's end-of-turn token); a template without them would
make the loss mask cover nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from moot.core.errors import ConfigError
from moot.prompts import template_source


@dataclass(frozen=True)
class ChatFamily:
    """A model family's conversation format.

    Args:
        name: The family's name, as written in configs (``llama-2``).
        eos: The token that ends an assistant turn.
        special: Marker tokens the format writes besides ``eos`` (kept whole by tokenizers).
    """

    name: str
    eos: str
    special: tuple[str, ...] = ()

    @property
    def template(self) -> str:
        """The Jinja chat template (``prompts/chat_templates/<name>.j2``)."""
        return template_source(f"chat_templates/{self.name}.j2")


FAMILIES = {
    family.name: family
    for family in (
        ChatFamily("llama-2", "</s>", ("<s>",)),
        ChatFamily("vicuna", "</s>"),
        ChatFamily("alpaca", "</s>"),
        ChatFamily("zephyr", "</s>", ("<|system|>", "<|user|>", "<|assistant|>")),
        ChatFamily(
            "llama-3",
            "<|eot_id|>",
            ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"),
        ),
        # SmolLM2's format: `model.base: local/smollm2` trains the embedded model's own weights
        ChatFamily("chatml", "<|im_end|>", ("<|im_start|>",)),
    )
}


def chat_family(name: str) -> ChatFamily:
    """The family called `name`.

    Raises:
        ConfigError: No such family.
    """
    if name not in FAMILIES:
        raise ConfigError(f"unknown chat template {name!r} (known: {', '.join(FAMILIES)})")
    return FAMILIES[name]


_GENERATION = re.compile(r"\{%-?\s*generation\s*-?%\}")


def has_generation_markers(template: str | None) -> bool:
    """Whether a chat template marks the assistant's text for assistant-only loss."""
    return bool(template and _GENERATION.search(template))


def has_chat_template(model: str) -> bool | None:
    """Whether `model`'s tokenizer has a chat template, read from its files without loading it.

    `model` is a folder, a hub id in the cache, or a LoRA adapter folder (its own tokenizer, or
    else its base's, as `moot.training.merge_adapter` takes it). None: no tokenizer files here.
    """
    folder = Path(model)
    adapter = folder / "adapter_config.json"
    if adapter.is_file() and not (folder / "tokenizer_config.json").is_file():
        try:
            return has_chat_template(
                json.loads(adapter.read_text(encoding="utf-8"))["base_model_name_or_path"]
            )
        except (UnicodeDecodeError, ValueError, TypeError, KeyError):
            return None
    config = _tokenizer_file(model, "tokenizer_config.json")
    if config is None:
        return None
    if _tokenizer_file(model, "chat_template.jinja") is not None:  # transformers 5 writes it
        return True
    try:
        return bool(json.loads(config.read_text(encoding="utf-8")).get("chat_template"))
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None


def _tokenizer_file(model: str, name: str) -> Path | None:
    """`name` in the folder `model`, or in the cached hub repository `model`; None if absent."""
    if Path(model).is_dir():
        found = Path(model) / name
        return found if found.is_file() else None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(model, name)
    except ValueError:  # not a repository id
        return None
    return Path(cached) if isinstance(cached, str) else None
