"""Several endpoints of one model, through a litellm Router (`moot.core.llm.endpoints`).

Not a transport of its own prefix: the remote transports (`openai`, `litellm`) send through it
when their spec has several endpoints or a ``--router`` file.

When every deployment is an OpenAI-compatible server (``openai/...``, ``hosted_vllm/...``) and
the Router spreads by weight (``simple-shuffle``), the Router is only asked which endpoint to
use (`endpoints.choose`), and moot's own OpenAI transport for that endpoint sends the request:
litellm's own call (its handler, logging and cost callbacks, response metadata) cost 3.5-3.9 ms
of client CPU per call, against 1.0 ms this way (`benchmarks/bench_endpoints.py`). Its failures are
counted through the Router's own failure count and cooldown (`endpoints.failed`). Any other
Router (another provider, a deployment's ``organization`` or ``api_version``, a routing
strategy that learns from litellm's own calls) sends through ``router.acompletion``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from moot.core.llm import endpoints
from moot.core.llm.failures import Transient, classify, where
from moot.core.llm.spec import ModelSpec, Reply, Transport
from moot.core.llm.transports.replies import read_reply


def routed(spec: ModelSpec) -> bool:
    """Whether `spec`'s requests go through a Router: several endpoints, or a ``--router`` file."""
    return bool(spec.api_bases) or spec.router is not None


class Router(Transport):
    """Requests spread over the spec's endpoints, each work item sticking to one.

    Args:
        spec: The model.
        api_key: The key sent to every endpoint without one of its own.
    """

    name = "router"
    prefixes = ()

    def __init__(self, spec: ModelSpec, api_key: str | None):
        self.spec, self.api_base, self.identity, self._key = spec, spec.api_base, spec.name, api_key
        self._router: Any = None  # built by the first request: importing litellm takes seconds
        self._loop: asyncio.AbstractEventLoop | None = None  # its clients' loop
        self._direct = direct(spec, api_key)

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """One request to the endpoint the Router picks; the session moves off one that failed."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # its pooled clients die with the loop that opened them
            self._router = endpoints.build_router(self.spec, self._key)
            self._loop = loop
        if self._direct is None:
            return await self._by_litellm(messages, params)
        try:
            deployment = await endpoints.choose(self._router, self.spec, messages)
        except Exception as exc:
            raise self._all_out(exc) from None
        try:
            reply = await self._direct[int(deployment)].send(messages, params)
        except Exception as exc:
            endpoints.failed(self._router, self.spec, deployment, exc)
            raise
        # one endpoint's rate-limit headers are not the model's limits: none are followed, as
        # litellm's path keeps none
        return replace(reply, endpoint=endpoints.endpoint_of(self.spec, deployment), limits=None)

    async def _by_litellm(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """The request sent by the Router itself (`endpoints.complete`)."""
        # within the deadline, which counts against the endpoint; a failure moves the session
        request = endpoints.complete(self._router, self.spec, messages, params)
        try:
            response = await request
        except Exception as exc:  # the endpoint that failed, when the Router says which
            failed = getattr(exc, "failed_deployment_id", None)
            url = self.spec.endpoints[int(failed)] if str(failed).isdigit() else None
            raise classify(self._all_out(exc), self.spec, url, self._key) from None
        deployment = (getattr(response, "_hidden_params", None) or {}).get("model_id")
        if deployment is not None:
            endpoints.repin(self._router, self.spec, str(deployment))
        shown = endpoints.endpoint_of(self.spec, deployment)
        reply = read_reply(response, shown or where(self.spec, None))
        return replace(reply, endpoint=shown)

    def _all_out(self, exc: Exception) -> Exception:
        """`exc`, or a `Transient` waiting for the first endpoint back if every one is out."""
        resting = endpoints.all_out(exc)
        if resting is None:
            return exc
        return Transient(
            f"every endpoint of {self.spec.name} failed and is out for {resting:g}s",
            retry_after=resting,
        )


def direct(spec: ModelSpec, api_key: str | None) -> tuple[Transport, ...] | None:
    """One OpenAI transport per deployment of `spec`, when moot can send every request itself.

    That is when each deployment's provider is served by the OpenAI transport (``openai/...``,
    ``hosted_vllm/...``: its class found through the registry, as `openai` imports this module),
    with nothing but a key of its own (its ``organization`` or ``api_version`` only litellm sends),
    and the Router spreads by weight alone: its other strategies learn from litellm's own calls.
    None otherwise.
    """
    group = spec.router
    if group is not None and group.settings.get("routing_strategy") not in (None, "simple-shuffle"):
        return None
    given = group.deployments if group is not None else [{} for _ in spec.endpoints]
    sends = []
    for url, own in zip(spec.endpoints, given, strict=True):
        provider, _, model = str(own.get("model", spec.name)).partition("/")
        deployment = replace(spec, provider=provider, model=model)  # the name its server knows
        openai = deployment.transport_class
        if not openai.openai_api or {"organization", "api_version"} & own.keys():
            return None
        key = own.get("api_key") or api_key
        sends.append(openai(deployment, url, key, spec.name))  # type: ignore[call-arg]
    return tuple(sends)
