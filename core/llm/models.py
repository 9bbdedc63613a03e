"""The model layer: every LLM call in moot goes through `ModelClient.complete`.

One path gives every call the same guarantees: a per-model concurrency bound, a deadline per
request, retries on 429 / 5xx / timeouts / malformed or empty replies that honour ``Retry-After``
(never on other 4xx, never on our own bugs: `moot.core.llm.failures`), an on-disk cache keyed by
the request's identity, a token and cost ledger per role and stage, context-window checks, and an
optional budget (`ModelClient` refuses a paid call that could pass it: `BudgetReached`).

How a request reaches its model is the spec's transport (`moot.core.llm.spec.Transport`, one
module each in `moot.core.llm.transports`): OpenAI-compatible servers and the embedded model
through the OpenAI SDK, other providers through litellm, several endpoints through a litellm
Router, ``hf/`` models in process. All run with their own retries off, so there is exactly one
retry loop, here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
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
from moot.core.llm.batch import BatchQueue
from moot.core.llm.billing import bill
from moot.core.llm.cache import RequestCache, request_key
from moot.core.llm.failures import Transient, where
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.limits import Gate, RateLimit, state_file
from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec, Reply, Role, Transport, key_variable
from moot.core.llm.structured import (
    FreshRepair,
    OutputParseError,
    ParseFailure,
    Structured,
    json_schema_format,
    parse_structured,
    schema_text,
)
from moot.core.llm.tokens import count_message_tokens
from moot.core.redaction import public_url, without_sent_keys

if TYPE_CHECKING:
    from moot.core.llm.stand_in import StandIn

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
        limits: The folder where a paced model's rate limit is shared with the other processes
            calling it with the same key (`moot.core.llm.limits.state_file`); None: this
            client's alone.
        batches: Batch mode (``--batch``): requests that miss the cache go to their provider's
            batch API through this queue, not live (`moot.core.llm.batch`).

    Example:
        >>> client = ModelClient(cache=RequestCache(path))  # doctest: +SKIP
        >>> role = Role("debater_a", parse_spec("local/smollm2"), temperature=0.7)  # doctest: +SKIP
        >>> hi = [{"role": "user", "content": "Hi"}]
        >>> reply = await client.complete(role, hi, stage="demo")  # doctest: +SKIP
    """

    #: Whether a request waits for its model's ``--rpm``/``--tpm`` (a dry run's sends nothing).
    paces: ClassVar[bool] = True

    def __init__(
        self,
        *,
        cache: RequestCache | None = None,
        ledger: UsageLedger | None = None,
        retry: RetryPolicy | None = None,
        prices: Prices | None = None,
        budget: float | None = None,
        concurrency: int | None = None,
        limits: Path | None = None,
        batches: BatchQueue | None = None,
    ) -> None:
        self.cache = cache
        self.limits = limits
        self.batches = batches
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
        self._transports: dict[ModelSpec, Transport] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limits: dict[tuple[str, str | None], asyncio.Semaphore] = {}
        # each model's rate limit (`--rpm`/`--tpm`, or a reply's headers) and, after a 429, how
        # many of its requests go at once (`moot.core.llm.limits`); loop-bound as the semaphores
        self._rates: dict[tuple[str, str | None], RateLimit] = {}
        self._gates: dict[tuple[str, str | None], Gate] = {}
        self._sending: dict[tuple[str, str | None], int] = {}  # requests in flight, per model

    def prepare(self, spec: ModelSpec) -> list[str]:
        """Check credentials and reachability of `spec` now, before any work starts.

        Returns:
            Notes on endpoints of a model with several that refuse connections now: the others
            take their requests, and they are tried again later.

        Raises:
            ConfigError: A needed key is missing, a budget is set and `spec` is unpriced, or
                batch mode and `spec` has no batch API.
            EndpointError: The endpoint does not accept connections (with several, none does).
        """
        if self.budget is not None and self.ledger.prices.price(spec) is None:
            raise ConfigError(
                f"--budget needs the price of {spec.name}, which is unknown: give it with "
                "--prices FILE (or prices: in --config)"
            )
        transport = self._transport(spec)
        if self.batches is not None and (spec.transport_class.free or transport.batches() is None):
            raise ConfigError(
                f"--batch: {spec.name} has no batch API (OpenAI's or an OpenAI-compatible "
                "server's /v1/batches, or Anthropic's Message Batches, at one endpoint: "
                "docs/cli.md, Batches)"
            )
        if not spec.api_base and not spec.api_key_env:
            missing = spec.transport_class.missing_keys(spec)
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
        stand_in: StandIn | None = None,
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
            stand_in: What a dry run takes the reply to be, if its caller's parser wants a
                shape (`moot.core.llm.planning`); a real call never reads it.

        Raises:
            ContextWindowExceeded: The prompt cannot fit the model's context window.
            ModelCallError: The call failed for good (non-retryable, or retries exhausted).
        """
        spec = role.spec
        if max_length is not None and (
            max_tokens is not None or not spec.transport_class.takes_max_length
        ):
            raise ConfigError(f"{spec.name}: max_length is for local models, without max_tokens")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._limits, self._rates, self._gates = loop, {}, {}, {}
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
        if self.cache is not None or self.batches is not None:  # a batch's lines are keyed too
            identity = {
                "model": transport.identity,
                "api_base": spec.api_base,
                "messages": messages,
            }
            key = request_key({**identity, "params": params})
        if key is not None and self.cache is not None:
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

        worst = self._worst_case(spec, used, max_tokens, batch=self.batches is not None)
        reply = await self._send(transport, role, stage, messages, params, worst, key)
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

    def _follow(
        self,
        model: tuple[str, str | None],
        limits: Any,
        messages: Messages,
        params: dict,
        shared: Path | None,
    ) -> None:
        """Take a reply's rate-limit headers (`RateLimit.follow`).

        The first reply to carry them makes the model's `RateLimit`, which charges the
        requests still out (sent before any limit was known, so uncharged) as many of this one:
        the headers were written when this one was admitted, before them.
        """
        rate = self._rates.get(model)
        if rate is not None:
            rate.follow(limits)
            return
        rate = self._rates[model] = RateLimit(shared=shared)
        rate.follow(limits)
        size = count_message_tokens(messages) + (params.get("max_tokens") or 0)
        rate.charge(self._sending.get(model, 0), size)

    async def _sent(
        self, model: tuple[str, str | None], transport: Transport, messages: Messages, params: dict
    ) -> Reply:
        """`transport.send`, through the model's `Gate` once it has had a 429."""
        gate = self._gates.get(model)
        self._sending[model] = self._sending.get(model, 0) + 1
        try:
            async with gate or contextlib.nullcontext():
                reply = await transport.send(messages, params)
        except Transient as exc:
            if exc.status == 429:  # fewer at once: as many as were in flight, halved
                gate = self._gates.setdefault(model, Gate(ceiling=self._sending[model]))
                gate.throttled(self._sending[model])
            raise
        finally:
            self._sending[model] -= 1
        if gate is not None:
            gate.succeeded()
        return reply

    def _worst_case(
        self, spec: ModelSpec, prompt_tokens: int, max_tokens: int | None, batch: bool = False
    ) -> float:
        """The most one request can cost: what `budget` reserves before sending it (0 free).

        `batch`: the request goes through the provider's batch API, priced at its batch rates.

        Raises:
            ConfigError: A budget is set and the request's completion has no known bound (no
                ``max_tokens``, no context window, no output limit in the cost map).
        """
        if self.budget is None:
            return 0.0
        price = self.ledger.prices.price(spec, batch)
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
        stand_in: StandIn | None = None,
        repair: FreshRepair | None = None,
        parse: Callable[[str], T] | None = None,
    ) -> Structured[T]:
        """Ask for a reply matching `schema`: constrained output, tolerant parse, a repair.

        A reply that still does not parse is returned as an explicit `ParseFailure`, never as a
        default value.

        Args:
            role: Who is answering.
            messages: The request.
            schema: The pydantic model the reply must validate against.
            stage: Ledger label; a repair round is labelled ``<stage>:repair``.
            max_tokens: Completion budget.
            seed: Sampling seed.
            constrained: Send the schema as ``response_format`` (servers that support it decode
                only valid JSON).
            stand_in: What a dry run takes the reply to be: a JSON value of `schema`.
            repair: How a reply that does not parse is asked again (default: moot's one
                follow-up turn, ``core/repair.j2``).
            parse: Reads a reply into `schema` where `parse_structured` is not enough (a judge
                whose prompt asks for a bare number); raises `OutputParseError`.
        """
        from moot.prompts import render

        fmt = json_schema_format(schema) if constrained else None
        return await self.complete_parsed(
            role,
            messages,
            parse or (lambda text: parse_structured(text, schema)),
            repair
            or (lambda error: render("core/repair.j2", error=error, schema=schema_text(schema))),
            stage=stage,
            max_tokens=max_tokens,
            seed=seed,
            response_format=fmt,
            stand_in=stand_in,
        )

    async def complete_parsed(
        self,
        role: Role,
        messages: Messages,
        parse: Callable[[str], V],
        repair: Callable[[str], str] | FreshRepair,
        *,
        stage: str,
        **params: Any,
    ) -> Structured[V]:
        """Ask, and read the reply with `parse`; if it fails, repair rounds, then a failure.

        A `repair` function is one round: the model sees its reply and ``repair(error)`` as the
        next turn of the conversation. A `FreshRepair` is up to ``tries`` rounds, each one new
        message about the last reply alone. A reply that still does not parse is an explicit
        `ParseFailure` of the last reply, never a default value.

        Args:
            role: Who is answering.
            messages: The request.
            parse: Reads a reply; raises `OutputParseError` (or a subclass) naming the problem.
            repair: The repair turn's text, given the parse error; or a `FreshRepair`.
            stage: Ledger label; a repair round is labelled ``<stage>:repair``.
            **params: Request parameters, as `complete` takes them.
        """
        reply = await self.complete(role, messages, stage=stage, **params)
        calls = [reply]
        tries = repair.tries if isinstance(repair, FreshRepair) else 1
        for attempt in range(tries + 1):
            try:
                return Structured(parse(reply.text), None, reply.text, tuple(calls))
            except OutputParseError as exc:
                error = str(exc)
            if attempt == tries:
                break
            if isinstance(repair, FreshRepair):
                asked = [{"role": "user", "content": repair.prompt(reply.text, error)}]
            else:
                asked = [
                    *messages,
                    {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": repair(error)},
                ]
            reply = await self.complete(role, asked, stage=f"{stage}:repair", **params)
            calls.append(reply)
        failure = ParseFailure(reply.text, error, repaired=len(calls) > 1)
        return Structured(None, failure, reply.text, tuple(calls))

    async def _send(
        self,
        transport: Transport,
        role: Role,
        stage: str,
        messages: Messages,
        params: dict,
        worst: float = 0.0,
        key: str | None = None,
    ) -> Completion:
        spec, policy = role.spec, self.retry
        # batch mode: each attempt is asked in a batch (a failed one in the next), or live once
        # a batch failed it with --batch-fallback live
        queue = self.batches
        api = transport.batches() if queue is not None and key is not None else None
        model = (transport.identity, spec.api_base)
        if spec.max_concurrency is not None:  # else the run's own concurrency is the bound
            # several endpoints: N each on average, held here for all of them together, because
            # litellm's per-endpoint limit refuses a request over it (a 429) instead of queueing it
            bound = spec.max_concurrency * max(1, len(spec.api_bases))
            self._limits.setdefault(model, asyncio.Semaphore(bound))
        limit = self._limits.get(model) or contextlib.nullcontext()
        paced = spec.rpm is not None or spec.tpm is not None
        shared = state_file(self.limits, *model, key_variable(spec)) if self.limits else None
        if self.paces and paced and model not in self._rates:
            self._rates[model] = RateLimit(spec.rpm, spec.tpm, shared)
        backoff = wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait)

        def wait(state: Any) -> float:
            exc = state.outcome.exception()
            if api is not None:  # the next batch: it waits for its own round anyway
                return 0.0
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
        batched = False  # the last attempt was asked in a batch (priced at batch rates)
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
                    rate, prompt = self._rates.get(model), 0
                    batched = api is not None
                    if api is not None and queue is not None and key is not None:
                        try:
                            reply = await queue.answer(api, key, api.body(messages, params))
                        except Transient:
                            if queue.live_fallback:
                                api = None
                            raise
                    else:
                        if rate is not None:  # each attempt is a request: each is paid for
                            prompt = count_message_tokens(messages)
                            await rate.acquire(prompt + (params.get("max_tokens") or 0))
                        async with limit:
                            reply = await self._sent(model, transport, messages, params)
                    billed = bill(reply.usage, messages, reply.text, params.get("max_tokens"))
                    if rate is not None and prompt:
                        rate.settle(prompt, billed.prompt)
                    if reply.limits:  # after `settle`: the provider's count has the last word
                        self._follow(model, reply.limits, messages, params, shared)
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
                        if spec.transport_class.repeats_on_retry:  # it would say it again
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
                    spec, role.name, stage, failed=True, retries=attempts - 1, batch=batched, **paid
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
            batch=batched,
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

    def _transport(self, spec: ModelSpec) -> Transport:
        transport = self._transports.get(spec)
        if transport is None:
            connect = spec.transport_class.connect
            transport = self._transports[spec] = connect(spec, self.concurrency)
        return transport


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
