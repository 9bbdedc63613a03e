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

What moot layers on the Router, and why: litellm pins a session before its first request is
sent and keeps the pin whatever happens to that request, so a debate whose first request went to
an endpoint that then failed would wander from endpoint to endpoint for the pin's whole life (an
hour), its prefix cache lost on each. `repin` moves the pin to the endpoint that answered, and
`unpin` drops it when a request failed, so the retry is routed afresh. ``least-busy`` routing
was tried and left: it counts requests in flight only once they are sent, so the first requests
of a burst of debates all saw every endpoint idle and were all pinned to the first one.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

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
    endpoint out) instead of queueing it; `ModelClient` bounds the model's requests itself.

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
    deployments = []
    for index, (url, own) in enumerate(zip(spec.endpoints, given, strict=True)):
        params: dict[str, Any] = {"model": spec.name, "api_key": api_key or "EMPTY", **own}
        params.update(api_base=url, timeout=spec.timeout, max_retries=0)
        params.pop("num_retries", None)  # 0 if given: the Router's is 0
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


def _pin_key(spec: ModelSpec, session: str) -> str:
    from litellm.router_utils.pre_call_checks.deployment_affinity_check import (
        DeploymentAffinityCheck,
    )

    return DeploymentAffinityCheck.get_session_affinity_cache_key(spec.name, session, None)


def repin(router: Any, spec: ModelSpec, deployment: str) -> None:
    """Pin the current session to `deployment`, the endpoint that just answered it."""
    from litellm.caching.affinity_cache import set_local_affinity_pin

    session = SESSION.get()
    if session is not None:
        value = {"model_id": deployment}
        set_local_affinity_pin(router.cache, _pin_key(spec, session), value, PIN_SECONDS)


def unpin(router: Any, spec: ModelSpec) -> None:
    """Forget the current session's endpoint: its request failed there; the retry is re-routed."""
    session = SESSION.get()
    if session is not None:
        router.cache.in_memory_cache.delete_cache(_pin_key(spec, session))


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
