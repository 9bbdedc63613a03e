"""vLLM's offline engine for models run in process (``--backend vllm``): generation and P.D.

Written against vLLM's documented offline API (``vllm.LLM`` with token-id prompts,
``SamplingParams``, ``LoRARequest``, ``prompt_logprobs``) and untested on the machine moot is
developed on: it has no GPU, and vLLM pins another torch than moot does (``pyproject.toml``'s
``vllm`` extra says which). vLLM is imported only when this backend is chosen.

A LoRA adapter folder runs as its base model (``base_model_name_or_path`` in its
``adapter_config.json``) with the adapter applied per request through a ``LoRARequest``.
Requests are handed to the engine in batches of up to ``--batch-size`` (`Batcher`); vLLM
schedules them itself and seeds each with its own seed, so sampled requests share batches too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError
from moot.core.llm.batcher import Batcher
from moot.core.llm.local_hf import Prompt, Reply, prepare


def load_vllm() -> Any:
    """The ``vllm`` module, on a machine with a CUDA GPU.

    Raises:
        ConfigError: vLLM is not installed, or there is no CUDA GPU.
    """
    try:
        import vllm
    except ImportError:
        raise ConfigError(
            "--backend vllm needs the vllm package (pip install 'moot[vllm]', in an environment "
            "of its own: vLLM pins another torch than moot)"
        ) from None
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("--backend vllm needs a CUDA GPU; torch sees none here")
    return vllm


class VLLMEngine:
    """A model folder or LoRA adapter folder loaded in ``vllm.LLM``.

    Args:
        path: A model folder (``config.json``) or a LoRA adapter folder.
        dtype: ``auto`` (None: vLLM's choice from the model's config), ``float32``,
            ``bfloat16`` or ``float16``.
        device: None, ``auto`` or ``cuda``: vLLM places the model on the GPUs it sees
            (``CUDA_VISIBLE_DEVICES`` chooses them).

    Raises:
        ConfigError: No vLLM or GPU (`load_vllm`), another device, or an adapter without its
            base's name.
    """

    def __init__(self, path: str, dtype: str | None = None, device: str | None = None) -> None:
        if device not in (None, "auto", "cuda"):
            raise ConfigError(
                f"--backend vllm runs on the GPUs vLLM sees, not --device {device} "
                "(choose them with CUDA_VISIBLE_DEVICES)"
            )
        vllm = load_vllm()
        self.vllm, self.path, self.precision = vllm, path, dtype or "auto"
        adapter = Path(path) / "adapter_config.json"
        self.lora: Any = None
        options: dict[str, Any] = {"model": path, "dtype": self.precision}
        if adapter.exists():
            config = json.loads(adapter.read_text(encoding="utf-8"))
            if not config.get("base_model_name_or_path"):
                raise ConfigError(f"{adapter}: no base_model_name_or_path")
            options.update(
                model=config["base_model_name_or_path"],
                enable_lora=True,
                max_lora_rank=int(config.get("r") or 16),
            )
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, str(Path(path).resolve()))
        self.llm = vllm.LLM(**options)

    def run(self, ids: Sequence[list[int]], params: Sequence[Any]) -> list[Any]:
        """``LLM.generate`` over token-id prompts, one ``SamplingParams`` each, in order."""
        prompts = [{"prompt_token_ids": list(row)} for row in ids]
        return self.llm.generate(prompts, list(params), lora_request=self.lora, use_tqdm=False)

    def logprob_sums(self, sequences: Sequence[list[int]], starts: Sequence[int]) -> list[float]:
        """For each sequence, the sum of its tokens' log-probabilities from `starts` on."""
        params = self.vllm.SamplingParams(max_tokens=1, prompt_logprobs=0)
        outputs = self.run(sequences, [params] * len(sequences))
        sums = []
        for output, sequence, start in zip(outputs, sequences, starts, strict=True):
            scored = output.prompt_logprobs  # one dict per token (the first: None)
            sums.append(sum(scored[i][sequence[i]].logprob for i in range(start, len(sequence))))
        return sums


class VLLMModel:
    """Chat generation through `VLLMEngine`, with `moot.core.llm.local_hf.LocalModel`'s API.

    Args:
        path: A model folder or a LoRA adapter folder.
        chat_template: Jinja chat template to use instead of the tokenizer's own.
        dtype: As `VLLMEngine`'s.
        device: As `VLLMEngine`'s.
        batch_size: Most requests handed to the engine in one call.
    """

    def __init__(
        self,
        path: str,
        chat_template: str | None = None,
        *,
        dtype: str | None = None,
        device: str | None = None,
        batch_size: int = 1,
    ) -> None:
        self.engine = VLLMEngine(path, dtype, device)
        self.path, self.precision = path, self.engine.precision
        self.tokenizer = self.engine.llm.get_tokenizer()
        if chat_template:
            self.tokenizer.chat_template = chat_template
        # the model's generation config, as transformers' generate reads it: a request's own
        # temperature replaces its temperature only
        self._defaults = self.engine.llm.get_default_sampling_params()
        self._batcher: Batcher[Prompt, Reply] = Batcher(self._generate, batch_size, _same)

    def submit(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Future[Reply]:
        """Queue one chat request; its future holds (text, finish_reason, prompt, completion)."""
        return self._batcher.submit(prepare(self.tokenizer, messages, params, f"hf/{self.path}"))

    def _generate(self, batch: list[Prompt]) -> list[Reply]:
        params = [
            self.engine.vllm.SamplingParams(
                temperature=self._defaults.temperature if p.temperature is None else p.temperature,
                top_p=self._defaults.top_p,
                top_k=self._defaults.top_k,
                max_tokens=p.budget,
                seed=p.seed,
            )
            for p in batch
        ]
        outputs = self.engine.run([p.ids for p in batch], params)
        replies = []
        for output, prompt in zip(outputs, batch, strict=True):
            done = output.outputs[0]
            finish = "length" if done.finish_reason == "length" else "stop"
            replies.append((done.text, finish, len(prompt.ids), len(done.token_ids)))
        return replies


def _same(prompt: Prompt) -> str:
    """Every request may share a batch: vLLM samples each with its own parameters."""
    return "any"
