"""A tiny random-weight Llama with a word-level tokenizer, built offline, for tests."""

from __future__ import annotations

from pathlib import Path

BASE_WORDS = ["<pad>", "<s>", "</s>", "<unk>"]


def tiny_llama(folder: Path, words: list[str], chat_template: str | None = None) -> Path:
    """Save a 1-layer Llama (hidden 16) whose vocabulary is `BASE_WORDS` + `words` to `folder`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocabulary = [*BASE_WORDS, *words]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocabulary)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    if chat_template:
        tokenizer.chat_template = chat_template
    config = LlamaConfig(
        vocab_size=len(vocabulary),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
