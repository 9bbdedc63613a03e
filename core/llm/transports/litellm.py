"""Every other provider litellm knows (``anthropic/...``, ``ollama_chat/...``), by ``acompletion``.

The transport for every provider no other transport claims (prefix ``*``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

from moot.core.errors import ConfigError
from moot.core.llm.spec import (
    SPEC_HINT,
    ModelSpec,
    Reply,
    Transport,
    register_transport,
    resolve_api_key,
)
from moot.core.llm.transports import router
from moot.core.llm.transports.anthropic_batches import AnthropicBatches
from moot.core.llm.transports.replies import Answered, litellm_rate_limits, request


@register_transport
class LiteLLM(Transport):
    """A provider's model through ``litellm.acompletion``, litellm's own retries off.

    Args:
        spec: The model.
        api_key: The key sent, if any; None lets litellm read the provider's own variable.
    """

    name = "litellm"
    prefixes = ("*",)

    def __init__(self, spec: ModelSpec, api_key: str | None):
        self.spec, self.api_base, self.identity, self._key = spec, spec.api_base, spec.name, api_key
        if api_key is None and spec.api_base:
            # litellm would otherwise fall back to the provider's own key variable and send it
            # to a custom server
            self._key = "EMPTY"
        self._batches: AnthropicBatches | None = None

    @classmethod
    def check(cls, text: str, provider: str, model: str, api_base: str | None) -> None:
        """Only a provider litellm knows."""
        if provider not in litellm_providers():
            raise ConfigError(
                f"unknown model spec {text!r}: unknown provider {provider!r} ({SPEC_HINT})"
            )

    @classmethod
    def missing_keys(cls, spec: ModelSpec) -> list[str]:
        """Environment variables litellm needs for `spec` that are not set (imports litellm)."""
        from moot.core.llm.litellm_import import litellm

        report = litellm.validate_environment(model=spec.name, api_base=spec.api_base)
        return list(report.get("missing_keys", []))

    @classmethod
    def connect(cls, spec: ModelSpec, concurrency: int | None = None) -> Transport:
        """The spec's provider, or a Router over its several endpoints (`router.Router`)."""
        key = resolve_api_key(spec)
        if router.routed(spec):
            return router.Router(spec, key)
        return cls(spec, key)

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """``litellm.acompletion`` within the deadline, which bounds litellm's own work too."""
        from moot.core.llm.litellm_import import litellm

        async def sent() -> Answered:
            response = await asyncio.wait_for(
                litellm.acompletion(
                    model=self.spec.name,
                    messages=messages,
                    api_base=self.api_base,
                    api_key=self._key,
                    timeout=self.spec.timeout,
                    num_retries=0,
                    drop_params=True,
                    **params,
                ),
                self.spec.timeout,
            )
            return Answered(response, litellm_rate_limits(response))

        return await request(sent(), self.spec, self.api_base, self._key)

    def batches(self) -> AnthropicBatches | None:
        """Anthropic's Message Batches API for ``anthropic/...`` (``--batch``); None: no other."""
        if self.spec.provider != "anthropic":
            return None
        if self._batches is None:
            self._batches = AnthropicBatches(self.spec, self.api_base, self._key)
        return self._batches


@functools.cache
def litellm_providers() -> frozenset[str]:
    """Provider names litellm knows, read from its bundled data (importing litellm costs ~3 s)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    path = (
        Path(next(iter(spec.submodule_search_locations))) / "provider_endpoints_support_backup.json"
    )
    try:
        providers = json.loads(path.read_text(encoding="utf-8"))["providers"]
    except (OSError, KeyError, ValueError):
        return frozenset()
    return frozenset(providers)
