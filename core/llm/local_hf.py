"""Local Hugging Face models (a model folder or a LoRA adapter) generating in process.

Used for ``hf/<path>`` model specs, so a freshly trained model answers through the same model
layer (cache, ledger) as any server. The model is loaded on ``--device`` in ``--dtype``
(`moot.core.llm.devices`). Requests go through a `Batcher`: greedy requests arriving together
are left-padded into one ``generate`` call of up to ``--batch-size`` rows, generated to the
largest budget among them and each cut to its own budget and first end-of-sequence token, which
is what generating it alone gives. Sampled requests run alone, each seeded with its own seed, so
a sampled reply never depends on what else was asked at the time.
"""

from __future__ import annotations

from collections.abc import Hashable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError, ContextWindowExceeded
from moot.core.llm.batcher import Batcher
from moot.core.llm.devices import choose_device, choose_dtype, dtype_name

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


#: A reply: (text, finish_reason, prompt_tokens, completion_tokens).
Reply = tuple[str, str, int, int]


@dataclass(frozen=True)
class Prompt:
    """One chat request, tokenized, with its completion budget and how it is decoded.

    Attributes:
        ids: The prompt's token ids.
        budget: Most new tokens.
        temperature: Sampling temperature; 0 is greedy; None leaves it to the model's
            generation config.
        seed: The sampling seed of the request.
        greedy: Whether it is decoded greedily (so it may share a batch).
    """

    ids: list[int]
    budget: int
    temperature: float | None
    seed: int
    greedy: bool = False


def prepare(
    tokenizer: Any, messages: list[dict[str, str]], params: dict[str, Any], name: str
) -> Prompt:
    """Tokenize a chat request as the model's chat template (or plain turns) renders it.

    Args:
        tokenizer: The model's tokenizer.
        messages: The chat.
        params: Request parameters: ``max_tokens``, ``max_length`` (the prompt's tokens count
            too, as transformers' ``max_length``), ``temperature``, ``seed``.
        name: The model's name, for errors.

    Raises:
        ContextWindowExceeded: The prompt alone fills ``max_length``.
    """
    if tokenizer.chat_template:
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    else:  # a bare base model: plain role-prefixed turns
        turns = [f"{m['role']}: {m['content']}" for m in messages]
        prompt = "\n".join(turns) + "\nassistant:"
    ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    budget, used = int(params.get("max_tokens") or 512), len(ids)
    if params.get("max_length"):
        total = int(params["max_length"])
        if used >= total:
            raise ContextWindowExceeded(
                f"{name}: the prompt's {used} tokens fill max_length {total}"
            )
        budget = total - used if "max_tokens" not in params else min(budget, total - used)
    temperature = float(params["temperature"] or 0.0) if "temperature" in params else None
    return Prompt(ids, budget, temperature, int(params.get("seed") or 0))


class LocalModel:
    """A causal LM (or a LoRA adapter over its base) with its tokenizer, generating in batches.

    Args:
        path: A folder with ``config.json`` (a model) or ``adapter_config.json`` (a LoRA
            adapter), or a hub id (needs the network unless cached).
        chat_template: Jinja chat template to use instead of the tokenizer's own.
        device: ``auto`` (None), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``auto`` (None), ``float32``, ``bfloat16`` or ``float16``.
        batch_size: Most greedy requests generated in one call.

    Raises:
        ConfigError: The model cannot be loaded, or the device is not here.
    """

    def __init__(
        self,
        path: str,
        chat_template: str | None = None,
        *,
        device: str | None = None,
        dtype: str | None = None,
        batch_size: int = 1,
    ) -> None:
        import transformers

        self.path = path
        self.device = choose_device(device)
        self.dtype = choose_dtype(dtype, self.device)
        # CUDA: spread over every visible GPU (one GPU: all on it); the CPU: transformers' own
        placement = "auto" if self.device == "cuda" else self.device
        options: dict[str, Any] = {"dtype": self.dtype}
        if self.device != "cpu":
            options["device_map"] = placement
        try:
            if (Path(path) / "adapter_config.json").exists():
                from peft import AutoPeftModelForCausalLM

                self.model = AutoPeftModelForCausalLM.from_pretrained(path, **options)
            else:
                self.model = transformers.AutoModelForCausalLM.from_pretrained(path, **options)
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load hf/{path}: {str(exc).splitlines()[0]}") from None
        self.model.eval()
        if chat_template:
            self.tokenizer.chat_template = chat_template
        config = self.model.generation_config
        eos = config.eos_token_id
        self._eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        # the model's own default decoding when a request sends no temperature
        self._greedy_default = not config.do_sample and (config.num_beams or 1) == 1
        tokenizer = self.tokenizer
        self._pad = tokenizer.pad_token_id
        if self._pad is None:
            self._pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        self._batcher: Batcher[Prompt, Reply] = Batcher(self._generate, batch_size, _batch_key)

    @property
    def batch_sizes(self) -> dict[int, int]:
        """How many ``generate`` calls of each batch size this model has made."""
        return dict(self._batcher.sizes)

    @property
    def precision(self) -> str:
        """The weights' dtype, e.g. ``float32``."""
        return dtype_name(self.dtype)

    def submit(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Future[Reply]:
        """Queue one chat request; its future holds (text, finish_reason, prompt, completion).

        Raises:
            ContextWindowExceeded: The prompt alone fills ``max_length`` (nothing is queued).
        """
        prompt = prepare(self.tokenizer, messages, params, f"hf/{self.path}")
        if prompt.temperature is None:
            greedy = self._greedy_default
        else:
            greedy = prompt.temperature <= 0 and (self.model.generation_config.num_beams or 1) == 1
        return self._batcher.submit(replace(prompt, greedy=greedy))

    def generate(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """(text, finish_reason, prompt_tokens, completion_tokens) for one chat request."""
        return self.submit(messages, params).result()

    def _generate(self, batch: list[Prompt]) -> list[Reply]:
        """One ``generate`` call for `batch`, left-padded; each row cut to its own budget."""
        import torch

        width = max(len(p.ids) for p in batch)
        ids = torch.full((len(batch), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, prompt in enumerate(batch):
            ids[row, width - len(prompt.ids) :] = torch.tensor(prompt.ids, dtype=torch.long)
            mask[row, width - len(prompt.ids) :] = 1
        first = batch[0]  # the others decode as it does (`_batch_key`)
        options: dict[str, Any] = {"max_new_tokens": max(p.budget for p in batch)}
        if first.temperature is not None:  # else the model's generation_config decides
            options["do_sample"] = first.temperature > 0
            if first.temperature > 0:
                options["temperature"] = first.temperature
        with torch.inference_mode():
            torch.manual_seed(first.seed)
            output = self.model.generate(
                input_ids=ids.to(self.model.device),
                attention_mask=mask.to(self.model.device),
                pad_token_id=self._pad,
                **options,
            )
        replies = []
        for row, prompt in enumerate(batch):
            new = output[row, width:].tolist()
            end = next((i + 1 for i, token in enumerate(new) if token in self._eos), len(new))
            new = new[: min(end, prompt.budget)]
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            finish = "length" if len(new) >= prompt.budget else "stop"
            replies.append((text, finish, len(prompt.ids), len(new)))
        return replies


def _batch_key(prompt: Prompt) -> Hashable | None:
    """Greedy requests share batches (their budgets are cut afterwards); sampled ones do not."""
    return "greedy" if prompt.greedy else None
