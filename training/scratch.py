"""Random-weight base models built from a config, with a tokenizer trained on the data.

For tests and demos that must not download anything: ``model.init`` in a run's config names a
transformers architecture and its sizes; the tokenizer is a byte-level BPE trained on the
training texts, so any text round-trips, with the chat family's markers as whole tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError
from moot.training.chat_templates import ChatFamily

BASE_SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")


def build_scratch_base(
    init: dict[str, Any],
    vocab_size: int,
    family: ChatFamily | None,
    texts: Iterable[str],
    out_dir: Path,
    seed: int,
) -> None:
    """Save a random-weight model and its trained tokenizer into `out_dir`.

    Args:
        init: A transformers config as keyword arguments, with ``model_type``.
        vocab_size: The tokenizer's vocabulary, special tokens included.
        family: The chat format whose markers become special tokens (its ``eos`` ends turns).
        texts: Training texts for the tokenizer.
        out_dir: Where ``save_pretrained`` writes model and tokenizer.
        seed: Seed of the weights.

    Raises:
        ConfigError: An unknown ``model_type`` or an invalid size.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast

    eos = family.eos if family else "</s>"
    specials = list(dict.fromkeys([*BASE_SPECIALS, eos, *(family.special if family else ())]))
    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token=eos, unk_token="<unk>", pad_token="<pad>"
    )
    ids = {
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    options = {k: v for k, v in init.items() if k != "model_type"}
    try:
        config = AutoConfig.for_model(init["model_type"], **options, **ids)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"model.init: {str(exc).splitlines()[0]}") from None
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
