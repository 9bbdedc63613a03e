"""moot's HTTP client: JSON bodies POSTed over aiohttp, each request within its deadline.

The OpenAI transport sends its requests here, not through the OpenAI SDK's client. Over the
SDK, each call paid for httpx's request and response models (URL parsing, header normalisation,
an encoding guess per header read) and the SDK's request options: about 0.4 ms of CPU per call
on top of the HTTP itself, a fifth of moot's whole CPU per debate call (issue 33,
`benchmarks/bench_debate_throughput.py`). aiohttp parses in C, and its pool does not walk every
connection per request as httpcore's does (encode/httpcore#1035).

A request gets `deadline` seconds, connect to last byte: per-phase timeouts bound each connect,
write and read, so a server that drips its body a byte at a time would hold a call for ever.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import NamedTuple

import aiohttp

#: Connections kept per client: the model's own bound on requests in flight (`ModelClient`) is
#: the one that counts.
CONNECTIONS = 1000


class Response(NamedTuple):
    """A whole HTTP response: its status, headers (case-insensitive) and body."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class HttpClient:
    """POSTs over one aiohttp session, each request within `deadline` seconds.

    The session is opened by the first request, in its event loop, and closed when that loop's
    `asyncio.run` ends (`_close_with_loop`): its connections cannot outlive the loop anyway, so a
    client serves one event loop. Proxies come from the environment (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), CA files too (``SSL_CERT_FILE``,
    ``SSL_CERT_DIR``).

    Raises (from `post`): ``TimeoutError`` when the deadline passed, and aiohttp's
    ``ClientError`` for a refused or unresolvable endpoint, a dropped connection or a malformed
    response: `moot.core.llm.failures.classify` reads both as the server's fault.
    """

    def __init__(self, deadline: float):
        self.deadline = deadline
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, str | None] = {}  # by URL

    async def post(self, url: str, headers: Mapping[str, str], body: bytes) -> Response:
        """POST `body` to `url`; the whole response, whatever its status."""
        if self._session is None:
            self._session = _open_session()
        try:
            async with asyncio.timeout(self.deadline):
                async with self._session.post(
                    url,
                    headers=headers,
                    data=body,
                    allow_redirects=False,
                    proxy=self._proxy(url),
                ) as response:
                    return Response(response.status, response.headers, await response.read())
        except TimeoutError:
            raise TimeoutError(f"no reply within {self.deadline:g}s") from None

    def _proxy(self, url: str) -> str | None:
        """The environment's proxy for `url`, if any, read once per URL (a client posts to one).

        Not aiohttp's ``trust_env``: it reads the proxy variables and ``~/.netrc`` again for
        every request, each in a thread of its own, and a ``.netrc`` entry for the host would
        clash with the key's ``Authorization`` header.
        """
        if url not in self._proxies:
            parts = urllib.parse.urlsplit(url)
            bypass = urllib.request.proxy_bypass_environment(parts.hostname or "")
            proxies = urllib.request.getproxies_environment()
            found = proxies.get(parts.scheme) or proxies.get("all")
            self._proxies[url] = None if bypass else found
        return self._proxies[url]


def _open_session() -> aiohttp.ClientSession:
    """An aiohttp session in the running loop, closed as that loop ends."""
    import httpx

    # CA files as the OpenAI SDK's client reads them: SSL_CERT_FILE, SSL_CERT_DIR, else certifi's
    connector = aiohttp.TCPConnector(limit=CONNECTIONS, ssl=httpx.create_ssl_context())
    session = aiohttp.ClientSession(connector=connector)
    _close_with_loop(session)
    return session


#: The tasks that close a session as its loop ends (the loop keeps only weak references).
_CLOSERS: set[asyncio.Task[None]] = set()


def _close_with_loop(session: aiohttp.ClientSession) -> None:
    """Close `session` when the running loop's `asyncio.run` ends.

    `asyncio.run` cancels the tasks still pending as it ends, and waits for them: this one waits
    for that, then closes the session, which would otherwise warn of itself as unclosed.
    """

    async def close_when_cancelled() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await session.close()

    task = asyncio.get_running_loop().create_task(close_when_cancelled())
    _CLOSERS.add(task)
    task.add_done_callback(_CLOSERS.discard)
