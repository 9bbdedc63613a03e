"""A Hugging Face model folder, LoRA adapter or hub id (``hf/<path>``), run in this process.

Its engine is ``--backend``: transformers (`moot.core.llm.local_hf.LocalModel`) or vLLM
(`moot.core.llm.local_vllm.VLLMModel`); requests are batched by the engine's `Batcher`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, Reply, Transport, register_transport


@register_transport
class HF(Transport):
    """A local model: loaded once per client, on ``--device`` in ``--dtype``, free.

    Args:
        spec: The model (its folder, chat template and the options below).
    """

    name = "hf"
    prefixes = ("hf",)
    in_process = True
    free = True
    takes_max_length = True
    repeats_on_retry = True  # it seeds each call: it would say it again
    options = ("device", "dtype", "batch_size", "backend", "chat_template")

    def __init__(self, spec: ModelSpec):
        from moot.core.llm.local_hf import weights_identity

        self.spec = spec
        if spec.backend == "vllm":
            from moot.core.llm.local_vllm import VLLMModel

            self._model: Any = VLLMModel(
                spec.model,
                spec.chat_template,
                dtype=spec.dtype,
                device=spec.device,
                batch_size=spec.batch_size,
            )
        else:
            from moot.core.llm.local_hf import LocalModel

            self._model = LocalModel(
                spec.model,
                spec.chat_template,
                device=spec.device,
                dtype=spec.dtype,
                batch_size=spec.batch_size,
            )
        # float32 keeps the identity of earlier runs; other precisions or engines answer
        # differently, so they have their own cache entries
        engine = "" if spec.backend == "transformers" else f"|{spec.backend}"
        precision = "" if self._model.precision == "float32" else f"|{self._model.precision}"
        self.identity = weights_identity(spec.model) + (spec.chat_template or "")
        self.identity += engine + precision

    @classmethod
    def check(cls, text: str, provider: str, model: str, api_base: str | None) -> None:
        """No endpoint; a folder that exists holds a model or an adapter."""
        if api_base:
            raise ConfigError(f"model spec {text!r} runs in process and takes no --api-base")
        folder = Path(model)
        if folder.exists() and not any(
            (folder / f).exists() for f in ("config.json", "adapter_config.json")
        ):
            raise ConfigError(
                f"{model}: no config.json or adapter_config.json (not a model folder)"
            )

    @classmethod
    def connect(cls, spec: ModelSpec, concurrency: int | None = None) -> Transport:
        """Load the weights (the engine's batches are `spec.batch_size` requests)."""
        return cls(spec)

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """Queue the request in the engine's batch; tokenizing runs off the event loop."""
        future = await asyncio.to_thread(self._model.submit, messages, params)
        text, finish, prompt, completion = await asyncio.wrap_future(future)
        return Reply(text, finish, {"prompt_tokens": prompt, "completion_tokens": completion})
