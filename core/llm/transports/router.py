"""Several endpoints of one model, through a litellm Router (`moot.core.llm.endpoints`).

Not a transport of its own prefix: the remote transports (`openai`, `litellm`) send through it
when their spec has several endpoints or a ``--router`` file.
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

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """One request through the Router; the session moves off an endpoint that failed."""
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
        reply = read_reply(response, shown or where(self.spec, None))
        return replace(reply, endpoint=shown)
