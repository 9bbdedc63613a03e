"""Model specs: which model a role talks to, and how to reach it.

A spec string is litellm-style ``provider/model``: ``openai/gpt-4o-mini``,
``hosted_vllm/llama-3-8b`` (with ``api_base``), ``ollama_chat/llama3``, ``openai/<alias>`` plus
``api_base`` for any OpenAI-compatible server, or ``local/smollm2`` for the embedded default model.

The provider names the spec's transport: a `Transport` subclass registered for it
(`register_transport`); the built-in ones live in `moot.core.llm.transports`, registered when
`moot.core.llm` is imported.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlparse

from moot.core.errors import ConfigError
from moot.core.redaction import public_url, sending

#: What a spec looks like, for messages.
SPEC_HINT = "expected provider/model, e.g. openai/gpt-4o-mini or local/smollm2"


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

    def limit(self, name: str) -> int | None:
        """The deployments' ``rpm`` or ``tpm`` (`name`) together: the model's limit for moot.

        None when a deployment gives none (its requests are not limited).
        """
        each = [params.get(name) for params in self.deployments]
        return sum(each) if all(each) else None

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
        rpm: Requests per minute moot sends to this model at most (`moot.core.llm.limits`);
            None: no limit of its own, until a reply's rate-limit headers say one.
        tpm: Tokens per minute likewise: each request counts its prompt and its whole
            ``max_tokens`` until its reply's usage gives the unused part back.
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
    rpm: int | None = None
    tpm: int | None = None
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
    def transport_class(self) -> type[Transport]:
        """The registered transport of the spec's provider: what callers ask about the model."""
        return transport_for(self.provider)

    @property
    def transport(self) -> str:
        """Its transport's name: ``embedded``, ``hf``, ``openai``, ``litellm`` or a user's."""
        return self.transport_class.name

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


@dataclass(frozen=True)
class Reply:
    """One reply as a transport read it, before moot bills it (`moot.core.llm.billing.bill`).

    Args:
        text: The reply's text.
        finish_reason: Why it ended (``stop``, ``length`` ...), if the server said.
        usage: ``prompt_tokens``, ``completion_tokens`` and ``cached_tokens`` as the server
            sent them (missing or wrong ones are counted by moot).
        endpoint: Which of several endpoints answered (shown: no credentials).
        limits: The reply's rate-limit headers, if it had any (`moot.core.llm.limits`).
    """

    text: str
    finish_reason: str | None
    usage: dict[str, Any]
    endpoint: str | None = None
    limits: Mapping[str, str] | None = None


class Transport:
    """How moot reaches one kind of model: one subclass per transport, `register_transport`-ed.

    The class says which spec prefixes are its (`prefixes`), refuses spec texts it cannot
    serve (`check`), gives its defaults and its own `ModelSpec` fields (`options`), and answers
    what callers ask about a model (its class attributes: `in_process`, `free` ...). `connect`
    makes the object that sends one spec's requests, preparing what they need first (the
    embedded server starts there); `ModelClient` keeps one per spec and awaits its `send`.

    Attributes:
        name: The transport's name (`ModelSpec.transport`).
        prefixes: The spec providers it serves (``openai`` for ``openai/...``); ``*``: every
            provider no other transport claims (litellm's).
        in_process: It runs on this machine, in moot's process: no endpoint, no key.
        free: Its calls cost nothing (no price needed, even under ``--budget``).
        embedded: It is the embedded demo model (moot notes so, and its server's slots).
        decodes_schema: It decodes only JSON matching a request's schema (``--constrained`` is
            on by default).
        takes_max_length: It takes ``max_length`` (a budget counting the prompt, which its own
            tokenizer counts exactly).
        repeats_on_retry: A retried request gets the same reply (it seeds each call), so an
            empty reply fails at once instead of being retried.
        openai_api: Its spec's own endpoint speaks the OpenAI chat API (LangChain's
            ``ChatOpenAI`` can call it: `moot.core.llm.langchain.chat_model`).
        key_env: The environment variable holding the key for the provider's own endpoint;
            None: none, or the provider's SDK finds it (`missing_keys`).
        options: The `ModelSpec` fields that are this transport's alone (``--device`` ...).
        defaults: `ModelSpec` fields it sets before the user's options (a longer ``timeout``).
        identity: What the request cache names the model by (with the endpoint, the messages
            and the parameters: `moot.core.llm.cache.request_key`). Never change it for an
            existing transport: every cached reply would be lost.
        api_base: The endpoint requests go to; None in process.
        context_window: The context window its server reports, if it does.
    """

    name: ClassVar[str]
    prefixes: ClassVar[tuple[str, ...]]
    in_process: ClassVar[bool] = False
    free: ClassVar[bool] = False
    embedded: ClassVar[bool] = False
    decodes_schema: ClassVar[bool] = False
    takes_max_length: ClassVar[bool] = False
    repeats_on_retry: ClassVar[bool] = False
    openai_api: ClassVar[bool] = False
    key_env: ClassVar[str | None] = None
    options: ClassVar[tuple[str, ...]] = ()
    defaults: ClassVar[Mapping[str, object]] = {}

    identity: str
    api_base: str | None = None
    context_window: int | None = None

    @classmethod
    def check(cls, text: str, provider: str, model: str, api_base: str | None) -> None:
        """Refuse a spec text this transport cannot serve.

        Args:
            text: The spec as given, for messages.
            provider: Its provider (one of `prefixes`).
            model: Its model name.
            api_base: Its first endpoint, if any.

        Raises:
            ConfigError: The spec is wrong for this transport, in one line naming it.
        """

    @classmethod
    def missing_keys(cls, spec: ModelSpec) -> list[str]:
        """The environment variables calling `spec` needs that are not set (never their values).

        Checked before any work when the spec names no endpoint and no key variable.
        """
        return []

    @classmethod
    def connect(cls, spec: ModelSpec, concurrency: int | None = None) -> Transport:
        """The transport that sends `spec`'s requests, ready to send.

        Args:
            spec: The model.
            concurrency: Requests the caller keeps in flight at once, when it knows.

        Raises:
            ConfigError: A key it needs is missing, or the model cannot be prepared.
        """
        raise NotImplementedError

    def batches(self) -> Any:
        """Its provider's batch API (`moot.core.llm.batch.BatchAPI`, ``--batch``); None: none."""
        return None

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """Send one chat request and read its reply.

        Args:
            messages: OpenAI-format chat messages.
            params: Request parameters (``temperature``, ``max_tokens``, ``seed``, ``stop``,
                ``response_format``, ``max_length`` where `takes_max_length`).

        Raises:
            Transient: The server or its reply failed in a way worth retrying
                (`moot.core.llm.failures`).
            ModelCallError: The call failed for good.
        """
        raise NotImplementedError


T = TypeVar("T", bound=type[Transport])
_TRANSPORTS: dict[str, type[Transport]] = {}


def register_transport(transport: T) -> T:
    """Register a transport (a class decorator) for the spec providers in its `prefixes`.

    Registering a transport of the same name again replaces it (a notebook cell run twice).

    Raises:
        ValueError: Another transport already serves one of its prefixes.
    """
    for prefix in transport.prefixes:
        held = _TRANSPORTS.get(prefix)
        if held is not None and held.name != transport.name:
            raise ValueError(f"spec prefix {prefix!r} is {held.name}'s, not {transport.name}'s")
    for prefix in transport.prefixes:
        _TRANSPORTS[prefix] = transport
    return transport


def transport_for(provider: str) -> type[Transport]:
    """The transport registered for `provider`, else the one for every other provider.

    A provider no transport has registered yet is looked for first among the installed
    packages' transports (`PLUGINS`), so a transport of yours works on the command line too.
    """
    if provider not in _TRANSPORTS:
        _load_plugins()
    return _TRANSPORTS.get(provider) or _TRANSPORTS["*"]


#: The entry-point group through which an installed package adds transports: each entry is a
#: `Transport` class, registered the first time a spec names a provider moot does not know.
PLUGINS = "moot.transports"


@functools.cache
def _load_plugins() -> None:
    """Register the transports installed packages declare (`PLUGINS`), once.

    Raises:
        ConfigError: One cannot be loaded, or is not a `Transport` (naming its package's entry).
    """
    from importlib.metadata import entry_points

    for entry in entry_points(group=PLUGINS):
        try:
            transport = entry.load()
        except Exception as exc:  # noqa: BLE001 - whatever a package's import raises
            problem = f"transport {entry.name} ({entry.value}) cannot be loaded: {exc}"
            raise ConfigError(problem) from None
        if not (isinstance(transport, type) and issubclass(transport, Transport)):
            raise ConfigError(f"transport {entry.name} ({entry.value}) is not a Transport class")
        register_transport(transport)


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
    if not sep or not provider or not model:
        raise ConfigError(f"unknown model spec {text!r}: {SPEC_HINT}")
    transport = transport_for(provider)
    transport.check(text, provider, model, api_base)
    key_env = options.get("api_key_env")
    if key_env is not None and not _ENV_NAME.fullmatch(str(key_env)):  # a key pasted in, maybe
        raise ConfigError(
            f"--api-key-env for {text!r} takes the name of an environment variable (letters, "
            "digits and _), not a key: the value given is not shown"
        )
    spec = ModelSpec(
        provider=provider,
        model=model,
        api_base=api_base,
        api_bases=bases if len(bases) > 1 else (),
    )
    return spec.with_options(**transport.defaults).with_options(**options)


#: What an environment variable's name may be (`--api-key-env`).
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
    variable = spec.transport_class.key_env
    if variable:
        key = os.environ.get(variable)
        if not key:
            raise ConfigError(f"missing API key for {spec.name}: set {variable}")
        return sending(key)
    return None  # litellm providers read their own variables (`Transport.missing_keys`)


def key_variable(spec: ModelSpec) -> str:
    """The name of the variable `resolve_api_key` reads for `spec` ("": none); never its value."""
    if spec.api_key_env:
        return spec.api_key_env
    return "MOOT_API_KEY" if spec.api_base else spec.transport_class.key_env or ""


def key_needs(spec: ModelSpec) -> str:
    """What calling `spec` needs from the environment, and whether it is set (never its value).

    A dry run's plan says it instead of checking it (`resolve_api_key` is the check).
    """
    transport = spec.transport_class
    if transport.in_process:
        return "no key (runs on this machine)"

    def state(var: str) -> str:
        return f"{var} ({'set' if os.environ.get(var) else 'not set'})"

    if spec.router is not None and len(spec.router.secrets()) == len(spec.router.deployments):
        return f"the keys in {spec.router.path} (read, set)"
    if spec.api_key_env:
        return state(spec.api_key_env)
    if spec.api_base:
        return f"{state('MOOT_API_KEY')}, if the server wants a key"
    if transport.key_env:
        return state(transport.key_env)
    missing = transport.missing_keys(spec)
    return ", ".join(f"{var} (not set)" for var in missing) or "its provider's key (set)"
