"""Several endpoints for one model: litellm's Router spreads the requests, moot keeps debates put.

A model served by several replicas (``--api-base A,B,C``) is one litellm ``Router`` model group,
one deployment per endpoint; a ``--router`` file (`moot.core.llm.router_file`) gives the
deployments and the Router's settings instead. The Router picks an endpoint for each request
(``simple-shuffle``: at random, weighted by each deployment's ``weight``), takes an endpoint out
for `COOLDOWN_SECONDS` once it failed `MAX_FAILS` times, each within the cooldown of the one
before (``--endpoint-cooldown``, ``--endpoint-max-fails``), and tries it again after that.
Its ``session_affinity`` check sends every request of one session to the endpoint the session's
first request went to, so the server's prefix cache keeps the session's transcript.

A session is one work item of the run engine (`moot.core.runs.run_items` sets `SESSION` to the
item's id around its task), so one debate stays on one endpoint.

Requests to OpenAI-compatible servers are sent by moot itself
(`moot.core.llm.transports.router.Router`): the Router only picks the endpoint (`choose`, which
pins the session there) and is told of a failure (`failed`). Through the Router's own call
(`complete`, for any other provider), litellm pins a session before its first request is sent
and keeps the pin whatever happens to that request, so a debate whose first request went to an
endpoint that then failed would wander from endpoint to endpoint for the pin's whole life (an
hour), its prefix cache lost on each. `repin` moves the pin to the endpoint that answered, and
(either way) `elsewhere` to another endpoint when a request failed, so the retry does not go
back to it. A passed deadline is a failure of the endpoint that did not answer in time
(`complete`): litellm counts only what its own call raised. ``least-busy`` routing was tried
and left: it counts requests in flight only once they are sent, so the first requests of a
burst of debates all saw every endpoint idle and were all pinned to the first one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import random
from collections.abc import Iterator
from typing import Any

from moot.core.llm.failures import Transient
from moot.core.llm.spec import ModelSpec
from moot.core.redaction import public_url

#: The work item (its id) whose requests are being sent: requests of one item share an endpoint.
SESSION: contextvars.ContextVar[str | None] = contextvars.ContextVar("moot_session", default=None)

#: Failures that take an endpoint out, each within the cooldown of the one before (litellm counts
#: them with the cooldown as time to live, and takes it out once the count passes its
#: ``allowed_fails``, this less one).
MAX_FAILS = 2

#: Seconds an endpoint that failed stays out before requests are sent to it again.
COOLDOWN_SECONDS = 30.0

#: What litellm is told each request costs: nothing. moot's ledger prices every call itself
#: (`moot.core.llm.prices`); litellm's own cost tracking is not read, and for a model it cannot
#: price (any self-hosted replica) it scanned its cost map on every request to explain the $0.
FREE = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}

#: How long a session stays pinned to its endpoint after its last request, in seconds.
PIN_SECONDS = 3600


@contextlib.contextmanager
def sticky(key: str) -> Iterator[None]:
    """Send the requests made inside to one endpoint per model: the session `key`'s."""
    token = SESSION.set(key)
    try:
        yield
    finally:
        SESSION.reset(token)


def build_router(spec: ModelSpec, api_key: str | None) -> Any:
    """A litellm ``Router`` with one deployment per endpoint of `spec`, deployment ids 0, 1, ...

    The deployments are `spec`'s endpoints, or its ``--router`` file's (`ModelSpec.router`),
    whose own keys and parameters they keep. Each sends its requests with no retries of its own
    (moot's retry loop is the one) and with its key: the file's, else `api_key`, else the
    placeholder ``EMPTY`` (never a provider's own key, which litellm would otherwise send). No
    ``max_parallel_requests``: litellm refuses a request over it (a 429, which also takes the
    endpoint out) instead of queueing it; `ModelClient` bounds the model's requests itself. No
    ``rpm``/``tpm`` either, for the same reason: the file's are moot's limit for the model
    (`RouterGroup.limit`); litellm's spread by them is kept, as weights.

    The cooldown is `spec`'s, else the file's, else `COOLDOWN_SECONDS` and `MAX_FAILS`. The
    failures allowed are set on each deployment as well as on the Router: litellm reads a
    Router-wide value equal to its own default (3) as unset, and then applies another rule.
    """
    from moot.core.llm.litellm_import import litellm

    group = spec.router
    settings: dict[str, Any] = {"routing_strategy": "simple-shuffle"}
    settings.update(group.settings if group is not None else {})
    filed = settings.pop("allowed_fails", None)
    max_fails = spec.max_fails or (filed + 1 if filed is not None else MAX_FAILS)
    settings["cooldown_time"] = spec.cooldown or settings.get("cooldown_time") or COOLDOWN_SECONDS
    given = group.deployments if group is not None else [{} for _ in spec.endpoints]
    # litellm spreads requests by the first of these a deployment gives, as weights
    spread = next((m for m in ("weight", "rpm", "tpm") if any(d.get(m) for d in given)), None)
    deployments = []
    for index, (url, own) in enumerate(zip(spec.endpoints, given, strict=True)):
        params: dict[str, Any] = {"model": spec.name, "api_key": api_key or "EMPTY", **own}
        params.update(api_base=url, timeout=spec.timeout, max_retries=0)
        params.pop("num_retries", None)  # 0 if given: the Router's is 0
        for name in ("rpm", "tpm"):  # moot's limit (`RouterGroup.limit`), litellm's would refuse
            params.pop(name, None)
        if spread is not None:
            params["weight"] = own.get(spread) or 0
        info = {"id": str(index), "allowed_fails": max_fails - 1, **FREE}
        deployments.append({"model_name": spec.name, "litellm_params": params, "model_info": info})
    return litellm.Router(
        model_list=deployments,
        **settings,
        num_retries=0,
        retry_after=0,
        allowed_fails=max_fails - 1,
        optional_pre_call_checks=["session_affinity"],
        deployment_affinity_ttl_seconds=PIN_SECONDS,
    )


def session_metadata() -> dict[str, Any]:
    """The request metadata that keeps the current session on its endpoint (none outside one)."""
    session = SESSION.get()
    return {"session_id": session} if session is not None else {}


async def choose(router: Any, spec: ModelSpec, messages: Any) -> str:
    """The deployment (its id) the current session's next request goes to, pinned there.

    The Router's own pick (its weights, its cooldowns, the session's pin), for a request moot
    then sends itself (`moot.core.llm.transports.router.Router`). The session is pinned here,
    as the request leaves, not after it is answered: litellm pins inside its own call, which
    this path skips, and a session's requests sent meanwhile must follow the first.

    Raises:
        RouterRateLimitError: Every endpoint is out (`all_out`).
    """
    picked = await router.async_get_available_deployment(
        model=spec.name, messages=messages, request_kwargs={"metadata": session_metadata()}
    )
    deployment = str(picked["model_info"]["id"])
    repin(router, spec, deployment)
    return deployment


async def complete(router: Any, spec: ModelSpec, messages: Any, params: dict[str, Any]) -> Any:
    """One request through `router` within `spec`'s deadline; a failure moves the session away.

    The deadline (``--timeout``) is moot's, around the Router's call, so that it bounds a reply
    dripped a byte at a time too. litellm counts an endpoint's failures (and takes it out) only
    for what its own call raised: cancelled by moot's deadline, an endpoint that accepts
    connections and never answers was never taken out, and took its share of every request's
    retries. So a deadline is recorded here as a failure of the endpoint the Router chose (which
    it writes into the request's metadata, a dict it updates in place) through the Router's own
    failure count and cooldown, and the exception names that endpoint (``failed_deployment_id``,
    as the Router's own errors do). After any failure at a known endpoint the session is pinned
    to another one that is not out (`elsewhere`), so the retry does not go back to it.

    Raises:
        Exception: What the Router raised, or `TimeoutError` when the deadline passed.
    """
    metadata = session_metadata()
    request = router.acompletion(
        model=spec.name, messages=messages, metadata=metadata, drop_params=True, **params
    )
    try:
        return await asyncio.wait_for(request, spec.timeout)
    except Exception as exc:
        failed = getattr(exc, "failed_deployment_id", None)
        if isinstance(exc, TimeoutError):
            failed = (metadata.get("model_info") or {}).get("id")
            if failed is not None:
                _count(router, spec, str(failed), 408)
                exc.failed_deployment_id = str(failed)  # type: ignore[attr-defined]
        elsewhere(router, spec, None if failed is None else str(failed))
        raise


def failed(router: Any, spec: ModelSpec, deployment: str, exc: Exception) -> None:
    """Count `exc`, raised by a request sent to `deployment` itself, as litellm counts its own.

    What the server caused counts (`Transient`: no reply in time, no connection, a malformed
    reply, 408/409/429/5xx; a `ModelCallError` with its HTTP status), by litellm's own rule on
    its status (``_is_cooldown_required``: 401, 402, 404, 408, 429 and 5xx), one without a
    status as a 500, as litellm counts a refused connection. Then the session moves
    (`elsewhere`).
    """
    status = getattr(exc, "status", None)
    if isinstance(exc, Transient) or status is not None:
        _count(router, spec, deployment, status or 500, getattr(exc, "retry_after", None))
    elsewhere(router, spec, deployment)


def _count(
    router: Any, spec: ModelSpec, deployment: str, status: int, retry_after: float | None = None
) -> None:
    """A failure of `deployment` with HTTP `status`, through the Router's own failure count.

    A server's ``Retry-After`` (`retry_after`) is how long the endpoint stays out once taken
    out, as litellm reads it from a failure's headers.
    """
    from moot.core.llm.litellm_import import litellm

    failure = litellm.APIError(status, f"HTTP {status}", spec.provider, spec.name)
    if retry_after is not None:
        failure.headers = {"retry-after": str(math.ceil(retry_after))}  # type: ignore[attr-defined]
    params = {"model_info": {"id": deployment}, "metadata": {"model_group": spec.name}}
    router.deployment_callback_on_failure(
        {"exception": failure, "litellm_params": params}, None, None, None
    )


def _pin_key(spec: ModelSpec, session: str) -> str:
    from litellm.router_utils.pre_call_checks.deployment_affinity_check import (
        DeploymentAffinityCheck,
    )

    return DeploymentAffinityCheck.get_session_affinity_cache_key(spec.name, session, None)


def _pins(router: Any) -> Any:
    """The cache the Routers' ``session_affinity`` check reads its pins from.

    litellm keeps one such check per process (in ``litellm.callbacks``): the first Router's,
    with that Router's cache. A later Router's own cache (another model's, or one built for a
    later event loop) is never read for pins.
    """
    from litellm.router_utils.pre_call_checks.deployment_affinity_check import (
        DeploymentAffinityCheck,
    )

    from moot.core.llm.litellm_import import litellm

    checks = (c for c in litellm.callbacks if isinstance(c, DeploymentAffinityCheck))
    return next(checks, router).cache


def repin(router: Any, spec: ModelSpec, deployment: str) -> None:
    """Pin the current session to `deployment`: the one picked for it, or the one that answered."""
    from litellm.caching.affinity_cache import set_local_affinity_pin

    session = SESSION.get()
    if session is not None:
        value = {"model_id": deployment}
        set_local_affinity_pin(_pins(router), _pin_key(spec, session), value, PIN_SECONDS)


def elsewhere(router: Any, spec: ModelSpec, failed: str | None) -> None:
    """Pin the current session to an endpoint other than `failed` that is not out, if one is.

    Else (or when which endpoint failed is unknown) the session's pin is dropped, and the
    retry is routed afresh.
    """
    from litellm.router_utils.cooldown_handlers import get_cooldown_deployments

    session = SESSION.get()
    if session is None:
        return
    out = {failed, *get_cooldown_deployments(router, None)}
    others = [str(i) for i in range(len(spec.endpoints)) if str(i) not in out]
    if failed is not None and others:
        repin(router, spec, random.choice(others))
    else:
        _pins(router).in_memory_cache.delete_cache(_pin_key(spec, session))


def endpoint_of(spec: ModelSpec, deployment: object) -> str | None:
    """The endpoint (as shown: no credentials) of a deployment id of `build_router`'s Router."""
    try:
        return public_url(spec.endpoints[int(str(deployment))])
    except (ValueError, IndexError):
        return None


def all_out(exc: Exception) -> float | None:
    """Seconds until an endpoint is back, if `exc` says every endpoint is out (cooling down)."""
    from litellm.types.router import RouterRateLimitError

    if isinstance(exc, RouterRateLimitError):
        return float(exc.cooldown_time)
    return None
