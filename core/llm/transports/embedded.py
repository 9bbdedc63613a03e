"""The embedded demo model (``local/smollm2``): llama.cpp in process, reached over loopback.

Its server (`moot.core.llm.embedded`) starts when the transport connects; requests then take the
OpenAI-compatible path (`moot.core.llm.transports.openai`) with the server's own key.
"""

from __future__ import annotations

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, Transport, register_transport
from moot.core.llm.transports.openai import OpenAI

#: The embedded models, by name. SmolLM2-135M is a demo model: fluent, often off-topic or on the
#: wrong side. Use a real model for real data.
EMBEDDED_MODELS = ("smollm2",)

#: Default request timeout of the embedded model, in seconds: a 2-core CPU takes minutes for
#: long completions.
EMBEDDED_TIMEOUT = 600.0


@register_transport
class Embedded(Transport):
    """The embedded model: no key, no network, free; llama.cpp decodes to a request's schema."""

    name = "embedded"
    prefixes = ("local",)
    in_process = True
    free = True
    embedded = True
    decodes_schema = True
    defaults = {"timeout": EMBEDDED_TIMEOUT}

    @classmethod
    def check(cls, text: str, provider: str, model: str, api_base: str | None) -> None:
        """One of `EMBEDDED_MODELS`, and no endpoint: moot serves it."""
        if model not in EMBEDDED_MODELS:
            raise ConfigError(
                f"unknown model spec {text!r}: embedded models are {', '.join(EMBEDDED_MODELS)}"
            )
        if api_base:
            raise ConfigError(f"model spec {text!r} is embedded and takes no --api-base")

    @classmethod
    def connect(cls, spec: ModelSpec, concurrency: int | None = None) -> Transport:
        """Start the server (one parallel slot per request in flight) and reach it over HTTP."""
        from moot.core.llm.embedded import cache_identity, slots_for, start_embedded

        endpoint = start_embedded(spec.model, slots_for(spec.max_concurrency or concurrency))
        transport = OpenAI(spec, endpoint.api_base, endpoint.api_key, cache_identity(spec.model))
        transport.context_window = endpoint.context_window
        return transport
