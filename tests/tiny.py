"""Tiny random-weight models built offline from configs, for tests: a Llama with a word-level
tokenizer, and BERT/DPR encoders with a WordPiece tokenizer over `BERT_WORDS`."""

from __future__ import annotations

from pathlib import Path

BASE_WORDS = ["<pad>", "<s>", "</s>", "<unk>"]
#: The encoders' words (others are [UNK]).
BERT_WORDS = ["voting", "compulsory", "turnout", "free", "choice", "raises", "falls", "should"]
BERT_SIZES = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2}


def tiny_llama(
    folder: Path, words: list[str], chat_template: str | None = None, *, says_words: bool = False
) -> Path:
    """Save a 1-layer Llama (hidden 16) whose vocabulary is `BASE_WORDS` + `words` to `folder`.

    With `says_words`, it never generates a special token (its generation config suppresses
    them), so its replies are never empty: greedy, it otherwise says nothing at all, and an
    empty reply is a failed call.
    """
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
    model = LlamaForCausalLM(config)
    if says_words:
        model.generation_config.suppress_tokens = list(range(len(BASE_WORDS)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def bert_tokenizer(folder: Path):  # noqa: ANN201 - a BertTokenizerFast
    """Save and return a lower-casing WordPiece tokenizer over `BERT_WORDS`."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *BERT_WORDS]
    # a dict, not vocab_file=: transformers 5 ignores vocab_file (every word became [UNK])
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocabulary)})
    tokenizer.save_pretrained(folder)
    return tokenizer


def tiny_bert(folder: Path, seed: int = 0, init: float = 0.02) -> Path:
    """Save a 1-layer BERT (hidden 16) with `bert_tokenizer` to `folder`.

    `init` is the weights' standard deviation: at BERT's 0.02 the [CLS] vector hardly depends
    on the text (cosine ≈ 1 between any two); at 1.0 it does.
    """
    import torch
    from transformers import BertConfig, BertModel

    tokenizer = bert_tokenizer(folder)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tokenizer), intermediate_size=32, initializer_range=init, **BERT_SIZES
    )
    BertModel(config).save_pretrained(folder)
    return folder


def tiny_dpr(folder: Path, encoder: str, seed: int) -> Path:
    """Save a 1-layer DPR `encoder` (``DPRContextEncoder`` or ``DPRQuestionEncoder``)."""
    import torch
    import transformers

    tokenizer = bert_tokenizer(folder)
    torch.manual_seed(seed)
    config = transformers.DPRConfig(vocab_size=len(tokenizer), intermediate_size=32, **BERT_SIZES)
    getattr(transformers, encoder)(config).save_pretrained(folder)
    return folder
