"""OpenAI-compatible servers (``openai/...``, ``hosted_vllm/...``): the chat API over HTTP.

One HTTP client per endpoint and event loop (`transports.http`), requests as the OpenAI SDK sends
them and errors as it raises them, and no retries of its own (`ModelClient` retries). Neither the
SDK's client nor a LangChain chat model carries the calls: ``ChatOpenAI.ainvoke`` adds about 2 ms
of callback machinery per call, ``chat.completions.create`` about 1.5 ms walking the body against
the SDK's types and parsing the reply into pydantic models (issue 19), and the SDK's ``post``
about 0.4 ms of httpx models (issue 33). The embedded model's server is reached the same way
(`moot.core.llm.transports.embedded`).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import urllib.parse
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, Reply, Transport, register_transport, resolve_api_key
from moot.core.llm.transports import router
from moot.core.llm.transports.batches import OpenAIBatches
from moot.core.llm.transports.replies import Answered, rate_limit_headers, request

if TYPE_CHECKING:
    from moot.core.llm.transports.http import Response

#: Where the SDK sends requests when neither ``api_base`` nor ``OPENAI_BASE_URL`` is set.
OPENAI_API = "https://api.openai.com/v1"


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
        self._post: Callable[[dict[str, Any]], Awaitable[Answered]] | None = None
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

    def _connect(self) -> Callable[[dict[str, Any]], Awaitable[Answered]]:
        """A fresh HTTP client's request: ``POST /chat/completions`` with a body, its JSON back.

        Sent as the OpenAI SDK sends it, over moot's own HTTP client (`transports.http`:
        aiohttp, each request within ``spec.timeout``; its connections die with the event loop
        that opened them): the endpoint is ``api_base``, else ``OPENAI_BASE_URL``, else
        OpenAI's; the key goes as ``Authorization: Bearer`` (credentials in the URL instead as
        basic auth, as the SDK's httpx did), with ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID``
        as the SDK's headers. An error status is raised as the SDK's ``APIStatusError``, built
        as the SDK builds it, so `classify` reads every OpenAI-compatible failure one way.
        """
        from moot.core.llm.transports.http import HttpClient

        url, headers = self._address()
        http = HttpClient(self.spec.timeout)

        async def post(body: dict[str, Any]) -> Answered:
            sent = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            response = await http.post(url, headers, sent)
            if not 200 <= response.status < 300:
                raise _status_error(url, response)
            # not JSON: `classify` calls it malformed
            return Answered(json.loads(response.content), rate_limit_headers(response.headers))

        return post

    def _address(self) -> tuple[str, dict[str, str]]:
        """The chat completions URL and the headers of every request to it."""
        base = self.api_base or os.environ.get("OPENAI_BASE_URL") or OPENAI_API
        parts = urllib.parse.urlsplit(base.rstrip("/") + "/chat/completions")
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": "moot",
            "Authorization": f"Bearer {self.key or 'EMPTY'}",  # a server without keys wants one
        }
        if parts.username or parts.password:  # sent as basic auth, not in the URL
            credentials = f"{parts.username or ''}:{parts.password or ''}"
            token = base64.b64encode(urllib.parse.unquote(credentials).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        for variable, header in (
            ("OPENAI_ORG_ID", "OpenAI-Organization"),
            ("OPENAI_PROJECT_ID", "OpenAI-Project"),
        ):
            if os.environ.get(variable):
                headers[header] = os.environ[variable]
        return urllib.parse.urlunsplit(parts), headers

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


def _status_error(url: str, response: Response) -> Exception:
    """An error response as the SDK raises it: ``APIStatusError``, with the error's body."""
    import httpx
    import openai

    text = response.content.decode(errors="replace").strip()
    try:
        body: Any = json.loads(text)
        message = f"Error code: {response.status} - {body}"
    except ValueError:
        body, message = text, text or f"Error code: {response.status}"
    error = body.get("error", body) if isinstance(body, dict) else body
    raw = httpx.Response(
        response.status,
        headers=list(response.headers.items()),
        content=response.content,
        request=httpx.Request("POST", url),
    )
    return openai.APIStatusError(message, response=raw, body=error)
