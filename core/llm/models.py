"""The model layer: every LLM call in moot goes through `ModelClient.complete`.

One path gives every call the same guarantees: a per-model concurrency bound, retries on
429 / 5xx / timeouts / malformed bodies that honour ``Retry-After`` (never on other 4xx), an
on-disk cache keyed by the request's identity, a token and cost ledger per role and stage, and
context-window checks.

Transports: OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, the embedded model) go through
langchain-openai's ``ChatOpenAI``, which resolves the client configuration; the hot path calls its
underlying async OpenAI client directly, because ``ChatOpenAI.ainvoke`` adds about 2 ms of callback
machinery per call (measured against the raw SDK on loopback). Other providers go through
``litellm.acompletion``. Both run with their own retries off, so there is exactly one retry loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from moot.core.errors import (
    ConfigError,
    ContextWindowExceeded,
    EndpointError,
    ModelCallError,
    MootError,
)
from moot.core.llm.cache import RequestCache, request_key
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.spec import ModelSpec, Role, missing_litellm_keys, public_url, resolve_api_key
from moot.core.llm.structured import (
    OutputParseError,
    ParseFailure,
    Structured,
    json_schema_format,
    parse_structured,
)
from moot.core.llm.tokens import count_message_tokens

T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry a transient failure (429, 5xx, timeout, malformed body).

    Args:
        attempts: Total attempts per call, the first included.
        initial_wait: Base of the randomised exponential backoff, in seconds.
        max_wait: Cap of the backoff, in seconds.
        max_retry_after: Cap on a server's ``Retry-After``, in seconds.
    """

    attempts: int = 6
    initial_wait: float = 1.0
    max_wait: float = 60.0
    max_retry_after: float = 300.0


@dataclass(frozen=True)
class Completion:
    """One model reply and what it cost."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached: bool = False
    latency: float = 0.0
    retries: int = 0


class _Transient(Exception):
    """A failure worth retrying; `retry_after` is the server's requested wait, if any."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


class ModelClient:
    """The one path for every LLM call.

    Args:
        cache: Response cache; None disables caching.
        ledger: Token and cost ledger updated by every call.
        retry: Retry policy for transient failures.

    Example:
        >>> client = ModelClient(cache=RequestCache(path))  # doctest: +SKIP
        >>> role = Role("debater_a", parse_spec("local/smollm2"), temperature=0.7)  # doctest: +SKIP
        >>> hi = [{"role": "user", "content": "Hi"}]
        >>> reply = await client.complete(role, hi, stage="demo")  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        cache: RequestCache | None = None,
        ledger: UsageLedger | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.cache = cache
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.retry = retry or RetryPolicy()
        # One transport per spec for the client's life (an hf/ model loads its weights once);
        # semaphores belong to one event loop, so a new loop gets fresh ones, as a transport's
        # HTTP client does.
        self._transports: dict[ModelSpec, _Transport] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits: dict[tuple[str, str | None], asyncio.Semaphore] = {}

    def prepare(self, spec: ModelSpec) -> None:
        """Check credentials and reachability of `spec` now, before any work starts.

        Raises:
            ConfigError: A needed key is missing.
            EndpointError: The endpoint does not accept connections.
        """
        transport = self._transport(spec)
        if spec.transport == "litellm" and not spec.api_base and not spec.api_key_env:
            missing = missing_litellm_keys(spec)
            if missing:
                raise ConfigError(f"missing API key for {spec.name}: set {', '.join(missing)}")
        if transport.api_base:
            check_reachable(transport.api_base)

    def context_window(self, spec: ModelSpec) -> int | None:
        """The model's context window: the spec's, else what its server reports (embedded)."""
        return spec.context_window or self._transport(spec).context_window

    async def complete(
        self,
        role: Role,
        messages: Messages,
        *,
        stage: str,
        max_tokens: int | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
        stop: list[str] | None = None,
        max_length: int | None = None,
    ) -> Completion:
        """Send one chat request for `role` and return the reply.

        Args:
            role: Who is speaking (model spec, temperature, ledger name).
            messages: OpenAI-format chat messages.
            stage: Ledger label for this step (``opening``, ``conclusion`` ...).
            max_tokens: Completion budget; clamped to what the context window leaves.
            max_length: Instead of `max_tokens`, a budget counting the prompt's tokens too, as
                transformers' ``generate(max_length=...)``; local (``hf/``) models only, whose
                tokenizer counts the prompt exactly.
            seed: Sampling seed, part of the cache key.
            response_format: OpenAI ``response_format`` (JSON schema for structured output).
            stop: Stop sequences.

        Raises:
            ContextWindowExceeded: The prompt cannot fit the model's context window.
            ModelCallError: The call failed for good (non-retryable, or retries exhausted).
        """
        spec = role.spec
        if max_length is not None and (max_tokens is not None or spec.transport != "hf"):
            raise ConfigError(f"{spec.name}: max_length is for local models, without max_tokens")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._limits = loop, {}
        transport = self._transport(spec)
        window = self.context_window(spec)
        if window:
            used = count_message_tokens(messages)
            if used >= window:
                self.ledger.record(spec, role.name, stage, failed=True)
                raise ContextWindowExceeded(
                    f"{spec.name}: prompt of about {used} tokens does not fit its "
                    f"{window}-token context window"
                )
            max_tokens = min(max_tokens or window - used, window - used)
        params: dict[str, Any] = {}
        for name, value in (
            ("temperature", role.temperature),  # None: the model's own default
            ("max_tokens", max_tokens),
            ("max_length", max_length),
            ("seed", seed),
            ("stop", stop),
        ):
            if value is not None:
                params[name] = value
        if response_format is not None:
            params["response_format"] = response_format

        key = None
        if self.cache is not None:
            identity = {
                "model": transport.identity,
                "api_base": spec.api_base,
                "messages": messages,
            }
            key = request_key({**identity, "params": params})
            hit = self.cache.get(key)
            if hit is not None:
                reply = Completion(**hit, cached=True)
                self.ledger.record(
                    spec,
                    role.name,
                    stage,
                    cached=True,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                )
                return reply

        reply = await self._send(transport, role, stage, messages, params)
        if key is not None and self.cache is not None and reply.text.strip():
            # an empty reply is never cached: a rerun asks again
            self.cache.put(
                key,
                {
                    "text": reply.text,
                    "finish_reason": reply.finish_reason,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                },
            )
        return reply

    async def complete_structured(
        self,
        role: Role,
        messages: Messages,
        schema: type[T],
        *,
        stage: str,
        max_tokens: int | None = None,
        seed: int | None = None,
        constrained: bool = True,
    ) -> Structured[T]:
        """Ask for a reply matching `schema`: constrained output, tolerant parse, one repair round.

        A reply that still does not parse is returned as an explicit `ParseFailure`, never as a
        default value.

        Args:
            role: Who is answering.
            messages: The request.
            schema: The pydantic model the reply must validate against.
            stage: Ledger label; the repair round is labelled ``<stage>:repair``.
            max_tokens: Completion budget.
            seed: Sampling seed.
            constrained: Send the schema as ``response_format`` (servers that support it decode
                only valid JSON).
        """
        from moot.prompts import render

        fmt = json_schema_format(schema) if constrained else None
        schema_text = json.dumps(schema.model_json_schema())
        return await self.complete_parsed(
            role,
            messages,
            lambda text: parse_structured(text, schema),
            lambda error: render("core/repair.j2", error=error, schema=schema_text),
            stage=stage,
            max_tokens=max_tokens,
            seed=seed,
            response_format=fmt,
        )

    async def complete_parsed(
        self,
        role: Role,
        messages: Messages,
        parse: Callable[[str], V],
        repair: Callable[[str], str],
        *,
        stage: str,
        **params: Any,
    ) -> Structured[V]:
        """Ask, and read the reply with `parse`; if it fails, one repair round, then a failure.

        The repair round shows the model its reply and ``repair(error)``; a reply that still
        does not parse is an explicit `ParseFailure`, never a default value.

        Args:
            role: Who is answering.
            messages: The request.
            parse: Reads a reply; raises `OutputParseError` (or a subclass) naming the problem.
            repair: The repair turn's text, given the parse error.
            stage: Ledger label; the repair round is labelled ``<stage>:repair``.
            **params: Request parameters, as `complete` takes them.
        """
        first = await self.complete(role, messages, stage=stage, **params)
        try:
            return Structured(parse(first.text), None, first.text, (first,))
        except OutputParseError as exc:
            error = str(exc)
        retry_messages = [
            *messages,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": repair(error)},
        ]
        second = await self.complete(role, retry_messages, stage=f"{stage}:repair", **params)
        calls = (first, second)
        try:
            return Structured(parse(second.text), None, second.text, calls)
        except OutputParseError as exc:
            failure = ParseFailure(second.text, str(exc), repaired=True)
            return Structured(None, failure, second.text, calls)

    async def _send(
        self, transport: _Transport, role: Role, stage: str, messages: Messages, params: dict
    ) -> Completion:
        spec, policy = role.spec, self.retry
        key = (transport.identity, spec.api_base)
        if spec.max_concurrency is not None:  # else the run's own concurrency is the bound
            self._limits.setdefault(key, asyncio.Semaphore(spec.max_concurrency))
        limit = self._limits.get(key) or contextlib.nullcontext()
        backoff = wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait)

        def wait(state: Any) -> float:
            exc = state.outcome.exception()
            if isinstance(exc, _Transient) and exc.retry_after is not None:
                return min(exc.retry_after, policy.max_retry_after)
            return backoff(state)

        attempts = 0
        start = time.perf_counter()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(policy.attempts),
                wait=wait,
                retry=retry_if_exception_type(_Transient),
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    async with limit:
                        reply = await transport.send(messages, params)
        except _Transient as exc:
            self.ledger.record(spec, role.name, stage, failed=True, retries=attempts - 1)
            raise ModelCallError(
                f"{spec.name}: {exc} (gave up after {attempts} attempts)",
                status=exc.status,
                retryable=True,
            ) from None
        except (ModelCallError, MootError):
            self.ledger.record(spec, role.name, stage, failed=True, retries=attempts - 1)
            raise
        latency = time.perf_counter() - start
        self.ledger.record(
            spec,
            role.name,
            stage,
            retries=attempts - 1,
            latency=latency,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
        return Completion(
            reply.text,
            reply.finish_reason,
            reply.prompt_tokens,
            reply.completion_tokens,
            latency=latency,
            retries=attempts - 1,
        )

    def _transport(self, spec: ModelSpec) -> _Transport:
        transport = self._transports.get(spec)
        if transport is None:
            transport = self._transports[spec] = _make_transport(spec)
        return transport


@dataclass(frozen=True)
class _Reply:
    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


class _Transport:
    """Sends one request; raises `_Transient` or `ModelCallError` on failure."""

    identity: str
    api_base: str | None
    context_window: int | None = None

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        raise NotImplementedError


class _OpenAITransport(_Transport):
    def __init__(self, spec: ModelSpec, api_base: str | None, api_key: str | None, identity: str):
        self.spec, self.api_base, self.identity, self._key = spec, api_base, identity, api_key
        self._create = self._connect()  # now: a bad client configuration fails in prepare()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `_create` is bound to

    def _connect(self) -> Callable[..., Any]:
        """A fresh async client's ``chat.completions.create``."""
        import httpx
        from langchain_openai import ChatOpenAI

        # Our own HTTP client: langchain-openai otherwise shares one per endpoint process-wide,
        # whose pooled connections die with the event loop that opened them.
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        chat_model = ChatOpenAI(
            model=self.spec.model,
            base_url=self.api_base,
            api_key=self._key or "EMPTY",
            max_retries=0,
            timeout=self.spec.timeout,
            http_async_client=httpx.AsyncClient(limits=limits, timeout=self.spec.timeout),
        )
        return chat_model.async_client.create

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._loop is not None:  # pooled connections die with the loop that opened them
                self._create = self._connect()
            self._loop = loop
        try:
            response = await self._create(model=self.spec.model, messages=messages, **params)
            choice = response.choices[0]
            usage = response.usage
            return _Reply(
                choice.message.content or "",
                choice.finish_reason,
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
            )
        except Exception as exc:  # classified below; anything unknown is re-raised as a bug
            raise _classify(exc, self.spec, self.api_base, self._key) from None


class _LiteLLMTransport(_Transport):
    def __init__(self, spec: ModelSpec, api_key: str | None):
        self.spec, self.api_base, self.identity, self._key = spec, spec.api_base, spec.name, api_key
        if api_key is None and spec.api_base:
            # litellm would otherwise fall back to the provider's own key variable and send it
            # to a custom server
            self._key = "EMPTY"

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        from moot.core.llm.litellm_import import litellm

        try:
            response = await litellm.acompletion(
                model=self.spec.name,
                messages=messages,
                api_base=self.api_base,
                api_key=self._key,
                timeout=self.spec.timeout,
                num_retries=0,
                drop_params=True,
                **params,
            )
            choice, usage = response.choices[0], response.usage
            return _Reply(
                choice.message.content or "",
                choice.finish_reason,
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
            )
        except Exception as exc:
            raise _classify(exc, self.spec, self.api_base, self._key) from None


class _HFTransport(_Transport):
    """A local transformers model: generation in a worker thread, one request at a time."""

    def __init__(self, spec: ModelSpec):
        from moot.core.llm.local_hf import LocalModel, weights_identity

        self.spec, self.api_base = spec, None
        self.identity = weights_identity(spec.model) + (spec.chat_template or "")
        self._model = LocalModel(spec.model, spec.chat_template)

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        text, finish, prompt, completion = await asyncio.to_thread(
            self._model.generate, messages, params
        )
        return _Reply(text, finish, prompt, completion)


def _make_transport(spec: ModelSpec) -> _Transport:
    if spec.transport == "embedded":
        from moot.core.llm.embedded import cache_identity, start_embedded

        endpoint = start_embedded(spec.model)
        transport = _OpenAITransport(
            spec, endpoint.api_base, endpoint.api_key, cache_identity(spec.model)
        )
        transport.context_window = endpoint.context_window
        return transport
    if spec.transport == "hf":
        return _HFTransport(spec)
    key = resolve_api_key(spec)
    if spec.transport == "openai":
        return _OpenAITransport(spec, spec.api_base, key, spec.name)
    return _LiteLLMTransport(spec, key)


def _classify(exc: Exception, spec: ModelSpec, api_base: str | None, key: str | None) -> Exception:
    """Map a client exception to `_Transient` (retry) or `ModelCallError` (give up)."""
    import openai

    where = public_url(api_base) if api_base else spec.provider
    secrets = [key, urlparse(api_base).password if api_base else None]

    def clean(text: str) -> str:  # an SDK message must never carry a secret into a log
        text = " ".join(str(text).split())[:300]
        for secret in filter(None, secrets):
            text = text.replace(secret, "***")
        return text

    if isinstance(exc, ModelCallError | _Transient | MootError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return _Transient(f"request to {where} timed out after {spec.timeout:g}s")
    if isinstance(exc, openai.APIConnectionError):
        return _Transient(f"cannot connect to {where}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = clean(_error_message(exc))
        if status in (408, 409, 429) or status >= 500:
            return _Transient(f"HTTP {status} from {where}: {message}", status, _retry_after(exc))
        if _is_context_error(exc, message):
            return ContextWindowExceeded(f"{spec.name}: context window exceeded: {message}")
        if status in (401, 403):  # every later call would fail the same way: stop the run
            return ConfigError(
                f"{spec.name}: authentication failed at {where} (HTTP {status}); check the API key"
            )
        return ModelCallError(f"{spec.name}: HTTP {status} from {where}: {message}", status)
    malformed = (ValueError, TypeError, KeyError, IndexError, AttributeError)  # e.g. a cut body
    if isinstance(exc, (*malformed, openai.APIResponseValidationError)):
        return _Transient(f"malformed response from {where}: {clean(type(exc).__name__)}")
    return exc


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", exc))


def _is_context_error(exc: Any, message: str) -> bool:
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded" or type(exc).__name__ == "ContextWindowExceededError":
        return True
    lowered = message.lower()
    return "context length" in lowered or "context window" in lowered


def _retry_after(exc: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date), if sent."""
    headers = getattr(exc, "litellm_response_headers", None)  # litellm keeps them here
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def check_reachable(api_base: str, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to `api_base`'s host and port.

    Raises:
        EndpointError: Nothing accepts connections there.
    """
    url = urlparse(api_base)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise EndpointError(f"cannot reach {public_url(api_base)}: {reason.lower()}") from None
