"""Model specs: which model a role talks to, and how to reach it.

A spec string is litellm-style ``provider/model``: ``openai/gpt-4o-mini``,
``hosted_vllm/llama-3-8b`` (with ``api_base``), ``ollama_chat/llama3``, ``openai/<alias>`` plus
``api_base`` for any OpenAI-compatible server, or ``local/smollm2`` for the embedded default model.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from moot.core.errors import ConfigError
from moot.core.redaction import public_url, sending

#: The embedded models, by name. SmolLM2-135M is a demo model: fluent, often off-topic or on the
#: wrong side. Use a real model for real data.
EMBEDDED_MODELS = ("smollm2",)

#: Default request timeout of the embedded model, in seconds.
EMBEDDED_TIMEOUT = 600.0

#: Providers served through the OpenAI SDK's client: anything speaking the OpenAI chat API.
OPENAI_COMPATIBLE = ("openai", "hosted_vllm")


@dataclass(frozen=True)
class RouterGroup:
    """The deployments of one model in a ``--router`` file, and the file's Router settings.

    Read and checked by `moot.core.llm.router_file.load_router`.

    Two groups are equal when they are the same model of the same file: one model client then
    keeps one Router for every role using it, so a debate's roles share its endpoint.

    Args:
        path: The file, for messages.
        name: The model group (the spec's name).
        deployments: Each deployment's ``litellm_params``, ``os.environ/`` references resolved.
        settings: The Router's own arguments from the file (``routing_strategy`` ...).
    """

    path: str
    name: str
    deployments: tuple[dict[str, Any], ...] = field(compare=False, repr=False)
    settings: dict[str, Any] = field(compare=False, repr=False, hash=False)

    @property
    def api_bases(self) -> tuple[str, ...]:
        """Each deployment's server, in the file's order."""
        return tuple(str(params["api_base"]) for params in self.deployments)

    def secrets(self) -> list[str]:
        """The keys the file gives (its own or from the environment): scrubbed from messages."""
        return [str(p["api_key"]) for p in self.deployments if p.get("api_key")]

    def only(self, index: int) -> RouterGroup:
        """This group with its `index`-th deployment alone (`moot models check`, one by one)."""
        return RouterGroup(self.path, self.name, (self.deployments[index],), self.settings)


@dataclass(frozen=True)
class ModelSpec:
    """How to reach one model.

    Args:
        provider: litellm provider (``openai``, ``anthropic``, ``ollama_chat`` ...) or ``local``.
        model: The model name as the provider knows it.
        api_base: Base URL of an OpenAI-compatible or self-hosted server (the first of
            `api_bases` when there are several).
        api_bases: Every endpoint, when the model is served by several (replicas of one model):
            requests spread across them, each debate sticking to one (`moot.core.llm.endpoints`);
            empty for one endpoint or none.
        api_key_env: Name of the environment variable holding the key. Defaults to the provider's
            usual variable (``OPENAI_API_KEY`` ...) for its own endpoint. A key is never sent to a
            custom ``api_base`` unless this names it (or ``MOOT_API_KEY`` is set).
        max_concurrency: Most requests in flight to this model at once (shared by all roles);
            None: no bound of its own, the run's concurrency is the bound.
        timeout: Seconds before one request is abandoned (and retried).
        context_window: Prompt plus completion tokens the model accepts; prompts that cannot fit
            are refused before sending, and ``max_tokens`` is clamped to what is left.
        chat_template: For ``hf/<path>`` models, a Jinja chat template replacing the tokenizer's.
        router: The model's deployments in a ``--router`` file (a litellm Router config), used
            instead of `api_bases`, which then lists their servers.
        cooldown: Seconds one of several endpoints stays out once taken out; None: the
            ``--router`` file's ``cooldown_time``, else `moot.core.llm.endpoints.COOLDOWN_SECONDS`.
        max_fails: Failures, each within `cooldown` of the one before, that take one of several
            endpoints out; None: the file's ``allowed_fails`` + 1, else
            `moot.core.llm.endpoints.MAX_FAILS`.
        device: For ``hf/<path>`` models, where they run: ``auto`` (None), ``cpu``, ``cuda``,
            ``cuda:N`` or ``mps`` (`moot.core.llm.devices`).
        dtype: For ``hf/<path>`` models, their weights' precision: ``auto`` (None), ``float32``,
            ``bfloat16`` or ``float16``.
        batch_size: For ``hf/<path>`` models, most greedy requests generated in one call.
        backend: For ``hf/<path>`` models, the engine: ``transformers`` or ``vllm``.

    Example:
        >>> parse_spec("openai/llama3", api_base="http://127.0.0.1:8000/v1").transport
        'openai'
    """

    provider: str
    model: str
    api_base: str | None = None
    api_bases: tuple[str, ...] = ()
    api_key_env: str | None = None
    max_concurrency: int | None = None
    timeout: float = 120.0
    context_window: int | None = None
    chat_template: str | None = None
    router: RouterGroup | None = None
    cooldown: float | None = None
    max_fails: int | None = None
    device: str | None = None
    dtype: str | None = None
    batch_size: int = 1
    backend: str = "transformers"

    @property
    def name(self) -> str:
        """The spec string, ``provider/model``."""
        return f"{self.provider}/{self.model}"

    @property
    def transport(self) -> str:
        """``embedded``, ``hf`` (in process), ``openai`` (the OpenAI SDK) or ``litellm``."""
        if self.provider == "local":
            return "embedded"
        if self.provider == "hf":
            return "hf"
        return "openai" if self.provider in OPENAI_COMPATIBLE else "litellm"

    @property
    def endpoints(self) -> tuple[str, ...]:
        """Every endpoint of the model: `api_bases`, else `api_base` alone, else none."""
        return self.api_bases or ((self.api_base,) if self.api_base else ())

    def with_options(self, **changes: object) -> ModelSpec:
        """Return a copy with some fields changed (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def describe(self) -> dict[str, object]:
        """A JSON-safe description for manifests (never includes a key)."""
        api_base = public_url(self.api_base) if self.api_base else None
        described: dict[str, object] = {"spec": self.name, "api_base": api_base}
        if self.api_bases:
            described["api_bases"] = [public_url(url) for url in self.api_bases]
        if self.router is not None:
            described["router"] = self.router.path
        return {**described, "context_window": self.context_window}


@dataclass(frozen=True)
class Role:
    """A speaking part (debater A, judge ...) bound to a model and its sampling temperature.

    Args:
        name: The role's name, used in the token and cost ledger.
        spec: The model the role talks to.
        temperature: Sampling temperature for this role's calls; None sends none, so the
            model's own default applies (CompQA's "standard configuration", Section 3).
    """

    name: str
    spec: ModelSpec
    temperature: float | None = 0.0

    def describe(self) -> dict[str, object]:
        """A JSON-safe description for manifests."""
        return {"role": self.name, **self.spec.describe(), "temperature": self.temperature}


def parse_spec(
    text: str, *, api_base: str | Sequence[str] | None = None, **options: object
) -> ModelSpec:
    """Parse and validate a ``provider/model`` spec string.

    Args:
        text: The spec, e.g. ``openai/gpt-4o-mini`` or ``local/smollm2``.
        api_base: Base URL for OpenAI-compatible or self-hosted servers, or several (replicas
            of one model, each a URL or comma-separated URLs): requests spread across them.
        **options: Other `ModelSpec` fields (``None`` values are ignored).

    Returns:
        The validated spec.

    Raises:
        ConfigError: The spec is malformed, names an unknown provider or embedded model, lacks
            an ``api_base`` it needs, or an endpoint is not an http(s) URL or given twice.
    """
    bases = endpoint_list(text, api_base)
    api_base = bases[0] if bases else None
    provider, sep, model = text.strip().partition("/")
    hint = "expected provider/model, e.g. openai/gpt-4o-mini or local/smollm2"
    if not sep or not provider or not model:
        raise ConfigError(f"unknown model spec {text!r}: {hint}")
    if provider == "local":
        if model not in EMBEDDED_MODELS:
            raise ConfigError(
                f"unknown model spec {text!r}: embedded models are {', '.join(EMBEDDED_MODELS)}"
            )
        if api_base:
            raise ConfigError(f"model spec {text!r} is embedded and takes no --api-base")
    elif provider == "hf":  # a local model or LoRA adapter folder (or a hub id), run in process
        if api_base:
            raise ConfigError(f"model spec {text!r} runs in process and takes no --api-base")
        folder = Path(model)
        if folder.exists() and not any(
            (folder / f).exists() for f in ("config.json", "adapter_config.json")
        ):
            raise ConfigError(
                f"{model}: no config.json or adapter_config.json (not a model folder)"
            )
    elif provider not in _litellm_providers():
        raise ConfigError(f"unknown model spec {text!r}: unknown provider {provider!r} ({hint})")
    if provider == "hosted_vllm" and not api_base:
        raise ConfigError(f"model spec {text!r} needs --api-base (the vLLM server's URL)")
    spec = ModelSpec(
        provider=provider,
        model=model,
        api_base=api_base,
        api_bases=bases if len(bases) > 1 else (),
    )
    if provider == "local":  # a 2-core CPU takes minutes for long completions
        spec = spec.with_options(timeout=EMBEDDED_TIMEOUT)
    return spec.with_options(**options)


def endpoint_list(
    text: str, given: str | Sequence[str] | None, flag: str = "--api-base"
) -> tuple[str, ...]:
    """The endpoints `given` for model `text`: each a URL, or several separated by commas.

    `flag` names where they come from, in messages. Every form of a list (commas, a repeated
    flag, a list in a config, a recipe or a ``--router`` file) comes through here, so each
    accepts what one endpoint does.

    Raises:
        ConfigError: One is not an http(s) URL (a bad port or host too), holds a query string
            or a fragment (no client sends them to a model server: every request would miss),
            or is given twice; each named without credentials.
    """
    values = ([given] if given else []) if isinstance(given, str) else list(given or ())
    urls = [url.strip() for value in values for url in value.split(",")]
    seen: set[str] = set()
    for url in urls:
        where = f"invalid {flag} {public_url(url)!r} for {text!r}"
        try:
            parts = urlparse(url)
            parts.port  # noqa: B018 - a port that is no number, or out of range, raises here
        except ValueError as exc:
            raise ConfigError(f"{where}: {str(exc).lower()}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"{where}: expected http(s)://host:port/..."
                + (", several separated by commas" if flag.startswith("--") else "")
            )
        if parts.query or parts.fragment:
            raise ConfigError(
                f"{where}: moot cannot send a query string or fragment to a model server; "
                "give a key with --api-key-env"
            )
        if url.rstrip("/") in seen:
            raise ConfigError(f"{flag} {public_url(url)!r} is given twice for {text!r}")
        seen.add(url.rstrip("/"))
        if parts.password:  # sent as basic auth: a key like any other
            sending(parts.password)
    return tuple(urls)


def resolve_api_key(spec: ModelSpec) -> str | None:
    """Return the API key for `spec` from the environment, or None if it needs none.

    The key is one moot sends: `moot.core.redaction.redact` takes it out of what moot writes.

    Raises:
        ConfigError: The provider's own endpoint needs a key and none is set (the message names
            the variable, never a value).
    """
    if spec.api_key_env:
        key = os.environ.get(spec.api_key_env)
        if not key:
            raise ConfigError(f"missing API key for {spec.name}: set {spec.api_key_env}")
        return sending(key)
    if spec.api_base:  # a custom server: never forward a provider's key to it implicitly
        return sending(os.environ.get("MOOT_API_KEY"))
    if spec.transport == "openai":
        key = os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ConfigError(f"missing API key for {spec.name}: set OPENAI_API_KEY")
        return sending(key)
    return None  # litellm providers read their own variables; see `check_environment`


def key_needs(spec: ModelSpec) -> str:
    """What calling `spec` needs from the environment, and whether it is set (never its value).

    A dry run's plan says it instead of checking it (`resolve_api_key` is the check).
    """
    if spec.transport in ("embedded", "hf"):
        return "no key (runs on this machine)"

    def state(var: str) -> str:
        return f"{var} ({'set' if os.environ.get(var) else 'not set'})"

    if spec.router is not None and len(spec.router.secrets()) == len(spec.router.deployments):
        return f"the keys in {spec.router.path} (read, set)"
    if spec.api_key_env:
        return state(spec.api_key_env)
    if spec.api_base:
        return f"{state('MOOT_API_KEY')}, if the server wants a key"
    if spec.transport == "openai":
        return state("OPENAI_API_KEY")
    missing = missing_litellm_keys(spec)
    return ", ".join(f"{var} (not set)" for var in missing) or "its provider's key (set)"


def missing_litellm_keys(spec: ModelSpec) -> list[str]:
    """Environment variables litellm needs for `spec` that are not set (imports litellm)."""
    from moot.core.llm.litellm_import import litellm

    report = litellm.validate_environment(model=spec.name, api_base=spec.api_base)
    return list(report.get("missing_keys", []))


@functools.cache
def _litellm_providers() -> frozenset[str]:
    """Provider names litellm knows, read from its bundled data (importing litellm costs ~3 s)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return frozenset(OPENAI_COMPATIBLE)
    path = (
        Path(next(iter(spec.submodule_search_locations))) / "provider_endpoints_support_backup.json"
    )
    try:
        providers = json.loads(path.read_text(encoding="utf-8"))["providers"]
    except (OSError, KeyError, ValueError):
        return frozenset(OPENAI_COMPATIBLE)
    return frozenset(providers) | frozenset(OPENAI_COMPATIBLE)
