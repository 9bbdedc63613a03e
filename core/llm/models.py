"""The model layer: every LLM call in moot goes through `ModelClient.complete`.

One path gives every call the same guarantees: a per-model concurrency bound, a deadline per
request, retries on 429 / 5xx / timeouts / malformed or empty replies that honour ``Retry-After``
(never on other 4xx, never on our own bugs: `moot.core.llm.failures`), an on-disk cache keyed by
the request's identity, a token and cost ledger per role and stage, context-window checks, and an
optional budget (`ModelClient` refuses a paid call that could pass it: `BudgetReached`).

Transports: OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, the embedded model) go through
the OpenAI SDK's ``AsyncOpenAI`` client, one per endpoint, with an HTTP transport of ours that is
the request's deadline (no LangChain chat model: ``ChatOpenAI.ainvoke`` adds about 2 ms of
callback machinery per call, and building one also builds a sync client moot never uses). Other
providers go through ``litellm.acompletion``, and a model with several endpoints (or a
``--router`` file) through a litellm ``Router`` (`moot.core.llm.endpoints`: spread, one debate
per endpoint, failing endpoints taken out for a while). All run with their own retries off, so
there is exactly one retry loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from moot.core.errors import (
    BudgetReached,
    ConfigError,
    ContextWindowExceeded,
    EndpointError,
    ModelCallError,
    MootError,
    machine_failure,
)
from moot.core.llm import endpoints
from moot.core.llm.billing import bill
from moot.core.llm.cache import RequestCache, request_key
from moot.core.llm.failures import Transient, classify, where
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec, Role, missing_litellm_keys, resolve_api_key
from moot.core.llm.structured import (
    OutputParseError,
    ParseFailure,
    Structured,
    json_schema_format,
    mended,
    parse_structured,
    schema_text,
)
from moot.core.llm.tokens import count_message_tokens
from moot.core.redaction import public_url, without_sent_keys

log = logging.getLogger(__name__)  # one line per retry, shown by the CLI's --verbose
T = TypeVar("T", bound=BaseModel)
V = TypeVar("V")
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class RetryPolicy:
    """When to retry a transient failure (429, 5xx, timeout, malformed or empty reply).

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
    cached_prompt_tokens: int = 0


class ModelClient:
    """The one path for every LLM call.

    Args:
        cache: Response cache; None disables caching.
        ledger: Token and cost ledger updated by every call.
        retry: Retry policy for transient failures.
        prices: What calls cost (the ledger's prices); default litellm's cost map.
        budget: Most USD this client may spend. Before each paid request it reserves the
            request's worst case (counted prompt tokens at the input price plus its
            ``max_tokens``, else the model's most output tokens, at the output price); a request
            whose reservation, with what is spent and reserved, would pass the budget is
            refused with `BudgetReached`, and so is every paid request after it. Requests in
            flight finish; cache hits are free and never refused.
        concurrency: Requests the caller keeps in flight at once, when it knows (the run's
            ``--concurrency``): the embedded model's server gets one parallel slot per request
            (`moot.core.llm.embedded.slots_for`; a spec's ``max_concurrency`` comes first).

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
        prices: Prices | None = None,
        budget: float | None = None,
        concurrency: int | None = None,
    ) -> None:
        self.cache = cache
        self.concurrency = concurrency
        self.ledger = ledger if ledger is not None else UsageLedger()
        if prices is not None:
            self.ledger.prices = prices
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.budget_reached = False  # a request was refused: no paid request starts after it
        self._reserved = 0.0  # USD held by requests in flight
        # the longest reply of a model that answered longer than the max_tokens asked: its
        # later requests reserve at least that (`_worst_case`)
        self._longest: dict[ModelSpec, int] = {}
        # One transport per spec for the client's life (an hf/ model loads its weights once);
        # semaphores belong to one event loop, so a new loop gets fresh ones, as a transport's
        # HTTP client does.
        self._transports: dict[ModelSpec, _Transport] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits: dict[tuple[str, str | None], asyncio.Semaphore] = {}

    def prepare(self, spec: ModelSpec) -> list[str]:
        """Check credentials and reachability of `spec` now, before any work starts.

        Returns:
            Notes on endpoints of a model with several that refuse connections now: the others
            take their requests, and they are tried again later.

        Raises:
            ConfigError: A needed key is missing, or a budget is set and `spec` is unpriced.
            EndpointError: The endpoint does not accept connections (with several, none does).
        """
        if self.budget is not None and self.ledger.prices.price(spec) is None:
            raise ConfigError(
                f"--budget needs the price of {spec.name}, which is unknown: give it with "
                "--prices FILE (or prices: in --config)"
            )
        transport = self._transport(spec)
        if spec.transport == "litellm" and not spec.api_base and not spec.api_key_env:
            missing = missing_litellm_keys(spec)
            if missing:
                raise ConfigError(f"missing API key for {spec.name}: set {', '.join(missing)}")
        if spec.api_bases:
            refused = []
            for url in spec.api_bases:
                try:
                    check_reachable(url)
                except EndpointError as exc:
                    refused.append(exc)
            if len(refused) == len(spec.api_bases):
                raise refused[0]
            return [
                f"note: {exc}; the other endpoints of {spec.name} take its requests, and it is "
                "tried again later"
                for exc in refused
            ]
        if transport.api_base:
            check_reachable(transport.api_base)
        return []

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
        used = count_message_tokens(messages) if window or self.budget is not None else 0
        if window:
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
                # redacted as a new reply is: an earlier version cached replies unredacted
                reply = Completion(**{**hit, "text": without_sent_keys(hit["text"])}, cached=True)
                self.ledger.record(
                    spec,
                    role.name,
                    stage,
                    cached=True,
                    prompt_tokens=reply.prompt_tokens,
                    completion_tokens=reply.completion_tokens,
                )
                return reply

        worst = self._worst_case(spec, used, max_tokens)
        reply = await self._send(transport, role, stage, messages, params, worst)
        if key is not None and self.cache is not None:
            self.cache.put(
                key,
                {
                    "text": reply.text,
                    "finish_reason": reply.finish_reason,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "cached_prompt_tokens": reply.cached_prompt_tokens,
                },
            )
        return reply

    def _worst_case(self, spec: ModelSpec, prompt_tokens: int, max_tokens: int | None) -> float:
        """The most one request can cost: what `budget` reserves before sending it (0 free).

        Raises:
            ConfigError: A budget is set and the request's completion has no known bound (no
                ``max_tokens``, no context window, no output limit in the cost map).
        """
        if self.budget is None:
            return 0.0
        price = self.ledger.prices.price(spec)
        if price is None:  # `prepare` refuses it first; a spec it never saw lands here
            raise ConfigError(f"--budget needs the price of {spec.name}: give it with --prices")
        most = max_tokens or price.max_output
        longest = self._longest.get(spec)
        if longest is not None:  # it ignored max_tokens before: it may again
            most = max(most or 0, longest)
        if most is None and (price.input or price.output):
            raise ConfigError(
                f"--budget cannot bound a call to {spec.name}: it has no max_tokens and its "
                "largest reply is unknown; give --context-window"
            )
        return price.cost(prompt_tokens, most or 0)

    def _reserve(self, worst: float) -> float:
        """Hold `worst` USD for a request about to be sent, or refuse it (`BudgetReached`)."""
        if self.budget is None:
            return 0.0
        spent = self.ledger.spent() or 0.0  # every model is priced: `prepare` checked
        if self.budget_reached or spent + self._reserved + worst > self.budget:
            self.budget_reached = True
            raise BudgetReached(spent, self.budget)
        self._reserved += worst
        return worst

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
        return await self.complete_parsed(
            role,
            messages,
            lambda text: parse_structured(text, schema),
            lambda error: render("core/repair.j2", error=error, schema=schema_text(schema)),
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
        self,
        transport: _Transport,
        role: Role,
        stage: str,
        messages: Messages,
        params: dict,
        worst: float = 0.0,
    ) -> Completion:
        spec, policy = role.spec, self.retry
        key = (transport.identity, spec.api_base)
        if spec.max_concurrency is not None:  # else the run's own concurrency is the bound
            # several endpoints: N each on average, held here for all of them together, because
            # litellm's per-endpoint limit refuses a request over it (a 429) instead of queueing it
            bound = spec.max_concurrency * max(1, len(spec.api_bases))
            self._limits.setdefault(key, asyncio.Semaphore(bound))
        limit = self._limits.get(key) or contextlib.nullcontext()
        backoff = wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait)

        def wait(state: Any) -> float:
            exc = state.outcome.exception()
            if isinstance(exc, Transient) and exc.retry_after is not None:
                return min(exc.retry_after, policy.max_retry_after)
            if spec.api_bases and state.attempt_number == 1:  # another endpoint may take it now
                return 0.0
            return backoff(state)

        def told(state: Any) -> None:  # the messages are scrubbed of keys by `classify`
            log.info(
                "%s/%s (%s): retry %d of %d in %.1f s after %s",
                *(role.name, stage, spec.name, state.attempt_number, policy.attempts - 1),
                *(state.next_action.sleep, state.outcome.exception()),
            )

        attempts, tokens = 0, [0, 0, 0]  # every reply is paid for, an empty one too
        counted = longer = 0  # replies moot counted; replies longer than max_tokens asked
        held = 0.0  # each attempt is a paid request: each reserves its worst case
        start = time.perf_counter()
        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(policy.attempts),
                wait=wait,
                retry=retry_if_exception_type(Transient),
                before_sleep=told,
                reraise=True,
            ):
                with attempt:
                    attempts += 1
                    held += self._reserve(worst)
                    async with limit:
                        reply = await transport.send(messages, params)
                    billed = bill(reply.usage, messages, reply.text, params.get("max_tokens"))
                    tokens = [
                        tokens[0] + billed.prompt,
                        tokens[1] + billed.completion,
                        tokens[2] + billed.cached_prompt,
                    ]
                    counted += billed.counted
                    if billed.longer_than_asked:
                        longer += 1
                        most = max(self._longest.get(spec, 0), billed.completion)
                        self._longest[spec] = most
                    if billed.problem is not None:
                        raise Transient(f"{billed.problem}, from {where(spec, transport.api_base)}")
                    if not reply.text.strip():  # never a result, in any command
                        empty = f"empty reply from {where(spec, transport.api_base)}"
                        if spec.transport == "hf":  # it seeds each call: it would say it again
                            raise ModelCallError(f"{spec.name}: {empty}")
                        raise Transient(empty)
        except (Transient, ModelCallError, MootError, BudgetReached) as exc:
            paid = {
                "prompt_tokens": tokens[0],
                "completion_tokens": tokens[1],
                "cached_prompt_tokens": tokens[2],
                "counted": counted,
                "longer": longer,
            }
            if not isinstance(exc, BudgetReached) or attempts > 1:  # else: nothing was sent
                self.ledger.record(
                    spec, role.name, stage, failed=True, retries=attempts - 1, **paid
                )
            if not isinstance(exc, Transient):
                raise
            raise ModelCallError(
                f"{spec.name}: {exc} (gave up after {attempts} attempts)",
                status=exc.status,
                retryable=True,
            ) from None
        finally:
            self._reserved -= held
        latency = time.perf_counter() - start
        self.ledger.record(
            spec,
            role.name,
            stage,
            retries=attempts - 1,
            latency=latency,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            cached_prompt_tokens=tokens[2],
            counted=counted,
            longer=longer,
            endpoint=reply.endpoint,
        )
        return Completion(
            reply.text,
            reply.finish_reason,
            billed.prompt,
            billed.completion,
            latency=latency,
            retries=attempts - 1,
            cached_prompt_tokens=billed.cached_prompt,
        )

    def _transport(self, spec: ModelSpec) -> _Transport:
        transport = self._transports.get(spec)
        if transport is None:
            transport = self._transports[spec] = _make_transport(spec, self.concurrency)
        return transport


@dataclass(frozen=True)
class _Reply:
    text: str
    finish_reason: str | None
    # prompt_tokens, completion_tokens and cached_tokens as the server sent them (`bill`)
    usage: dict[str, Any]
    endpoint: str | None = None  # which of several endpoints answered (shown: no credentials)


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
        # made for the first request: a run with nothing left to send (a rerun of a finished
        # run) never imports the SDK, about half a second
        self._post: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `_post` is bound to

    def _connect(self) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        """A fresh async client's request: ``POST /chat/completions`` with a body, its JSON back.

        The OpenAI SDK's own client, with an HTTP client of our own per transport (pooled
        connections die with the event loop that opened them) whose transport is the deadline,
        and no retries of its own (`ModelClient` retries). With no ``api_base`` the SDK reads
        ``OPENAI_BASE_URL`` and ``OPENAI_ORG_ID`` as usual. The request goes through the
        client's ``post`` (its documented way to send a body as it is), not
        ``chat.completions.create``: the body is plain JSON already, and ``create``'s walk of
        it against the SDK's parameter types, and its parse of the reply into pydantic models,
        cost about 1.5 ms of CPU per call, as much as the rest of moot's per-call work. The
        client's headers, authentication, errors (``APIStatusError``, ...) and timeouts are
        the same.
        """
        import httpx
        import openai

        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
        client = openai.AsyncOpenAI(
            base_url=self.api_base,
            api_key=self._key or "EMPTY",  # a server without keys still wants the header
            max_retries=0,
            timeout=self.spec.timeout,
            http_client=httpx.AsyncClient(
                timeout=self.spec.timeout,
                transport=_deadline_transport(self.spec.timeout, limits),
            ),
        )

        async def post(body: dict[str, Any]) -> Any:
            response = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
            return json.loads(response.content)  # not JSON: `classify` calls it malformed

        return post

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        loop = asyncio.get_running_loop()
        if self._post is None or loop is not self._loop:  # connections die with their loop
            self._post, self._loop = self._connect(), loop
        body = {"model": self.spec.model, "messages": messages, **params}
        return await _request(self._post(body), self.spec, self.api_base, self._key)


class _LiteLLMTransport(_Transport):
    def __init__(self, spec: ModelSpec, api_key: str | None):
        self.spec, self.api_base, self.identity, self._key = spec, spec.api_base, spec.name, api_key
        if api_key is None and spec.api_base:
            # litellm would otherwise fall back to the provider's own key variable and send it
            # to a custom server
            self._key = "EMPTY"

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        from moot.core.llm.litellm_import import litellm

        # litellm's clients are its own: the deadline bounds the whole call, litellm's work too
        request = asyncio.wait_for(
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
        return await _request(request, self.spec, self.api_base, self._key)


class _RouterTransport(_Transport):
    """Several endpoints of one model, through a litellm Router (`moot.core.llm.endpoints`)."""

    def __init__(self, spec: ModelSpec, api_key: str | None):
        self.spec, self.api_base, self.identity, self._key = spec, spec.api_base, spec.name, api_key
        self._router: Any = None  # built by the first request: importing litellm takes seconds
        self._loop: asyncio.AbstractEventLoop | None = None  # its clients' loop

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # its pooled clients die with the loop that opened them
            self._router = endpoints.build_router(self.spec, self._key)
            self._loop = loop
        # within the deadline, which counts against the endpoint; a failure moves the session
        request = endpoints.complete(self._router, self.spec, messages, params)
        try:
            response = await request
        except Exception as exc:  # the endpoint that failed, when the Router says which
            resting = endpoints.all_out(exc)
            if resting is not None:  # every endpoint is out: wait for the first to come back
                raise Transient(
                    f"every endpoint of {self.spec.name} failed and is out for {resting:g}s",
                    retry_after=resting,
                ) from None
            failed = getattr(exc, "failed_deployment_id", None)
            url = self.spec.endpoints[int(failed)] if str(failed).isdigit() else None
            raise classify(exc, self.spec, url, self._key) from None
        deployment = (getattr(response, "_hidden_params", None) or {}).get("model_id")
        if deployment is not None:
            endpoints.repin(self._router, self.spec, str(deployment))
        shown = endpoints.endpoint_of(self.spec, deployment)
        reply = _read_reply(response, shown or where(self.spec, None))
        return replace(reply, endpoint=shown)


class _HFTransport(_Transport):
    """A model run in this process (``hf/<path>``): requests are batched by its `Batcher`."""

    def __init__(self, spec: ModelSpec):
        from moot.core.llm.local_hf import weights_identity

        self.spec, self.api_base = spec, None
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

    async def send(self, messages: Messages, params: dict[str, Any]) -> _Reply:
        # tokenizing may take a while: off the event loop; the reply comes from the batch
        future = await asyncio.to_thread(self._model.submit, messages, params)
        text, finish, prompt, completion = await asyncio.wrap_future(future)
        return _Reply(text, finish, {"prompt_tokens": prompt, "completion_tokens": completion})


def _make_transport(spec: ModelSpec, concurrency: int | None = None) -> _Transport:
    if spec.transport == "embedded":
        from moot.core.llm.embedded import cache_identity, slots_for, start_embedded

        endpoint = start_embedded(spec.model, slots_for(spec.max_concurrency or concurrency))
        transport = _OpenAITransport(
            spec, endpoint.api_base, endpoint.api_key, cache_identity(spec.model)
        )
        transport.context_window = endpoint.context_window
        return transport
    if spec.transport == "hf":
        return _HFTransport(spec)
    key = resolve_api_key(spec)
    if spec.api_bases or spec.router is not None:
        return _RouterTransport(spec, key)
    if spec.transport == "openai":
        return _OpenAITransport(spec, spec.api_base, key, spec.name)
    return _LiteLLMTransport(spec, key)


def _deadline_transport(deadline: float, limits: Any) -> Any:
    """An httpx transport that gives each request `deadline` seconds, connect to last byte.

    httpx's timeouts bound each connect, write and read, so a server that drips its body a byte
    at a time would hold a call for ever. Bounding it here, not around the SDK call, leaves out
    the client's own work (the first call in a process spends about a second building types).
    """
    import httpx

    class Deadline(httpx.AsyncHTTPTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            try:
                async with asyncio.timeout(deadline):
                    response = await super().handle_async_request(request)
                    await response.aread()  # the body too, within the deadline
            except TimeoutError:  # the SDK's APITimeoutError: a timeout like any other
                raise httpx.ReadTimeout(f"no reply within {deadline:g}s", request=request) from None
            return response

    return Deadline(limits=limits)


async def _request(
    request: Awaitable[Any], spec: ModelSpec, api_base: str | None, key: str | None
) -> _Reply:
    """Await one request and read its reply; a failure is classified (`classify`)."""
    try:
        response = await request
    except Exception as exc:  # what the server caused is retried; a bug surfaces as itself
        raise classify(exc, spec, api_base, key) from None
    return _read_reply(response, where(spec, api_base))


def _read_reply(response: Any, shown: str) -> _Reply:
    """The reply in a response body, read without trusting its shape.

    The body is the decoded JSON (the OpenAI transport) or the SDK's parsed object (litellm).
    A body without choices or a message (the SDKs parse any JSON without checking) is the
    server's fault, so retried. A lone surrogate is replaced by U+FFFD here, where every reply
    enters: it cannot be encoded, so the cache, the result logs and every output file would fail
    on it. It is a bad character in a readable reply, like a bad byte a decoder replaces, not a
    malformed reply: refused, it would come back the same at temperature 0 and fail for good.
    A key moot sent, echoed by the server, is taken out here too (`without_sent_keys`), for the
    same reason: nothing written after this point can hold it.
    """
    choices = _field(response, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = _field(choice, "message")
    text = _field(message, "content")
    if message is None or not isinstance(text, str | None):
        raise Transient(f"malformed response from {shown}: no choices or no message")
    usage = _field(response, "usage")
    finish = _field(choice, "finish_reason")
    return _Reply(
        without_sent_keys(mended(text or "")),  # a server may echo a key
        finish if isinstance(finish, str) else None,
        {
            "prompt_tokens": _field(usage, "prompt_tokens"),
            "completion_tokens": _field(usage, "completion_tokens"),
            # prompt tokens a provider read from its prompt cache, at its cached-input price
            "cached_tokens": _field(_field(usage, "prompt_tokens_details"), "cached_tokens"),
        },
    )


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object, or ``value.name`` of a parsed one; None if missing."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


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
        if machine_failure(exc):  # no file descriptor left: this machine's failure, not theirs
            raise
        reason = exc.strerror or type(exc).__name__
        raise EndpointError(f"cannot reach {public_url(api_base)}: {reason.lower()}") from None
