"""OpenAI-compatible servers (``openai/...``, ``hosted_vllm/...``) through the OpenAI SDK.

One ``AsyncOpenAI`` client per endpoint, with an HTTP transport of ours that is the request's
deadline (no LangChain chat model: ``ChatOpenAI.ainvoke`` adds about 2 ms of callback machinery
per call, and building one also builds a sync client moot never uses), and no retries of its own.
The embedded model's server is reached the same way (`moot.core.llm.transports.embedded`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, Reply, Transport, register_transport, resolve_api_key
from moot.core.llm.transports import router
from moot.core.llm.transports.batches import OpenAIBatches
from moot.core.llm.transports.replies import Answered, rate_limit_headers, request


@register_transport
class OpenAI(Transport):
    """Any server speaking the OpenAI chat API, at the spec's endpoint or OpenAI's own.

    Args:
        spec: The model.
        api_base: Its endpoint; None: the SDK's (``OPENAI_BASE_URL``, else OpenAI's).
        api_key: The key sent, if any.
        identity: The model's name in cache keys.
    """

    name = "openai"
    prefixes = ("openai", "hosted_vllm")
    openai_api = True
    key_env = "OPENAI_API_KEY"

    def __init__(self, spec: ModelSpec, api_base: str | None, api_key: str | None, identity: str):
        self.spec, self.api_base, self.identity, self.key = spec, api_base, identity, api_key
        self._batches: OpenAIBatches | None = None
        # made for the first request: a run with nothing left to send (a rerun of a finished
        # run) never imports the SDK, about half a second
        self._post: Callable[[dict[str, Any]], Awaitable[Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `_post` is bound to

    @classmethod
    def check(cls, text: str, provider: str, model: str, api_base: str | None) -> None:
        """A vLLM server has no address of its own: ``hosted_vllm/...`` needs ``--api-base``."""
        if provider == "hosted_vllm" and not api_base:
            raise ConfigError(f"model spec {text!r} needs --api-base (the vLLM server's URL)")

    @classmethod
    def connect(cls, spec: ModelSpec, concurrency: int | None = None) -> Transport:
        """The spec's one endpoint, or a Router over its several (`router.Router`)."""
        key = resolve_api_key(spec)
        if router.routed(spec):
            return router.Router(spec, key)
        return cls(spec, spec.api_base, key, spec.name)

    def _connect(self) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        """A fresh async client's request: ``POST /chat/completions`` with a body, its JSON back.

        The OpenAI SDK's own client, over aiohttp within the request's deadline
        (`transports.http`: pooled connections die with the event loop that opened them), and
        no retries of its own (`ModelClient` retries). With no ``api_base`` the SDK reads
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

        from moot.core.llm.transports.http import http_client

        client = openai.AsyncOpenAI(
            base_url=self.api_base,
            api_key=self.key or "EMPTY",  # a server without keys still wants the header
            max_retries=0,
            timeout=self.spec.timeout,
            http_client=http_client(self.spec.timeout),
        )

        async def post(body: dict[str, Any]) -> Any:
            response = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
            # not JSON: `classify` calls it malformed
            return Answered(json.loads(response.content), rate_limit_headers(response.headers))

        return post

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """POST the request to the server; its reply read by `replies.read_reply`."""
        loop = asyncio.get_running_loop()
        if self._post is None or loop is not self._loop:  # connections die with their loop
            self._post, self._loop = self._connect(), loop
        return await request(
            self._post(self.body(messages, params)), self.spec, self.api_base, self.key
        )

    def body(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        """The JSON body of one chat request."""
        return {"model": self.spec.model, "messages": messages, **params}

    def batches(self) -> OpenAIBatches:
        """The endpoint's Batch API (``--batch``)."""
        if self._batches is None:
            self._batches = OpenAIBatches(self)
        return self._batches
