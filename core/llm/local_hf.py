"""Local Hugging Face models (a model folder or a LoRA adapter) generating in process.

Used for ``hf/<path>`` model specs, so a freshly trained model answers through the same model
layer (cache, ledger) as any server. Generation runs in a worker thread, one request at a time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError, ContextWindowExceeded

WEIGHT_FILES = (
    "model.safetensors",
    "adapter_model.safetensors",
    "pytorch_model.bin",
    "adapter_model.bin",
    "model.safetensors.index.json",
)


def weights_identity(path: str) -> str:
    """A cache identity that changes when the weights in `path` change."""
    folder = Path(path)
    parts = [str(folder.resolve())]
    for name in WEIGHT_FILES:
        file = folder / name
        if file.exists():
            stat = file.stat()
            parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "hf/" + "|".join(parts)


class LocalModel:
    """A causal LM (or a LoRA adapter over its base) with its tokenizer.

    Args:
        path: A folder with ``config.json`` (a model) or ``adapter_config.json`` (a LoRA
            adapter), or a hub id (needs the network unless cached).
        chat_template: Jinja chat template to use instead of the tokenizer's own.
    """

    def __init__(self, path: str, chat_template: str | None = None) -> None:
        import transformers

        self._lock = threading.Lock()
        self.path = path
        try:
            if (Path(path) / "adapter_config.json").exists():
                from peft import AutoPeftModelForCausalLM

                self.model = AutoPeftModelForCausalLM.from_pretrained(path)
            else:
                self.model = transformers.AutoModelForCausalLM.from_pretrained(path)
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load hf/{path}: {str(exc).splitlines()[0]}") from None
        self.model.eval()
        if chat_template:
            self.tokenizer.chat_template = chat_template

    def generate(self, messages: list[dict[str, str]], params: dict[str, Any]) -> tuple:
        """(text, finish_reason, prompt_tokens, completion_tokens) for one chat request."""
        import torch

        tokenizer = self.tokenizer
        if tokenizer.chat_template:
            prompt = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        else:  # a bare base model: plain role-prefixed turns
            turns = [f"{m['role']}: {m['content']}" for m in messages]
            prompt = "\n".join(turns) + "\nassistant:"
        inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        budget = int(params.get("max_tokens") or 512)
        used = int(inputs["input_ids"].shape[1])
        if params.get("max_length"):  # transformers' max_length: the prompt's tokens count too
            total = int(params["max_length"])
            if used >= total:
                raise ContextWindowExceeded(
                    f"hf/{self.path}: the prompt's {used} tokens fill max_length {total}"
                )
            budget = total - used if "max_tokens" not in params else min(budget, total - used)
        options: dict[str, Any] = {"max_new_tokens": budget}
        if "temperature" in params:  # else the model's generation_config decides
            temperature = float(params["temperature"] or 0.0)
            options["do_sample"] = temperature > 0
            if temperature > 0:
                options["temperature"] = temperature
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        with self._lock, torch.inference_mode():
            torch.manual_seed(int(params.get("seed") or 0))
            output = self.model.generate(**inputs, **options, pad_token_id=pad)
        new = output[0, inputs["input_ids"].shape[1] :]
        text = tokenizer.decode(new, skip_special_tokens=True)
        finish = "length" if len(new) >= budget else "stop"
        return text, finish, used, int(len(new))
