"""The HTTP under the OpenAI SDK: aiohttp, each request within its deadline.

The SDK sends through an ``httpx.AsyncClient``; its default transport (httpcore over anyio)
cost about three times the CPU per request of aiohttp's (C-accelerated parsing, a connection
pool that does not walk every connection per request: encode/httpcore#1035), and that was the
largest part of moot's own CPU per call (issue 33; `benchmarks/bench_debate_throughput.py`). So
the client keeps httpx's interface, for the SDK's headers, authentication and errors, and
`AiohttpDeadline` carries its requests over aiohttp.

A request gets `deadline` seconds, connect to last byte: httpx's timeouts bound each connect,
write and read, so a server that drips its body a byte at a time would hold a call for ever.
Bounding it here, not around the SDK call, leaves out the client's own work (the first call in a
process spends about a second building types).
"""

from __future__ import annotations

import asyncio
import urllib.request

import aiohttp
import httpx

#: Connections kept per client, as httpx's pool was given: the model's own bound on requests in
#: flight (`ModelClient`) is the one that counts.
CONNECTIONS = 1000


def http_client(deadline: float) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for the SDK whose requests go over aiohttp within `deadline`.

    Proxies and CA files come from the environment, as httpx reads them (``HTTPS_PROXY``,
    ``ALL_PROXY``, ``NO_PROXY``; ``SSL_CERT_FILE``, ``SSL_CERT_DIR``).
    """
    return httpx.AsyncClient(timeout=deadline, transport=AiohttpDeadline(deadline), trust_env=False)


class AiohttpDeadline(httpx.AsyncBaseTransport):
    """An httpx transport over one aiohttp session, each request within `deadline` seconds.

    The session is opened by the first request, in its event loop, and closed when that loop's
    `asyncio.run` ends (`_close_with_loop`): its connections cannot outlive the loop anyway.
    aiohttp's failures are raised as httpx's, which the SDK maps to its own errors as for its
    default transport: a passed deadline a ``ReadTimeout`` (``APITimeoutError``), a refused or
    unresolvable endpoint a ``ConnectError`` and a dropped connection a ``RemoteProtocolError``
    (both ``APIConnectionError``).
    """

    def __init__(self, deadline: float):
        self.deadline = deadline
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}  # by scheme and host

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request`; its whole response, body read, or httpx's error."""
        if self._session is None or self._session.closed:
            self._session = _open_session()
        url = request.url
        if url.userinfo:  # in the request's headers already (httpx's basic auth): aiohttp
            url = url.copy_with(username=None, password=None)  # refuses both at once
        try:
            async with asyncio.timeout(self.deadline):
                async with self._session.request(
                    request.method,
                    str(url),
                    headers=request.headers.multi_items(),
                    data=request.content or None,
                    allow_redirects=False,
                    auto_decompress=False,  # httpx decodes, by the response's headers
                    proxy=self._proxy(request.url),
                ) as response:
                    content = await response.read()
        except TimeoutError:  # the SDK's APITimeoutError: a timeout like any other
            message = f"no reply within {self.deadline:g}s"
            raise httpx.ReadTimeout(message, request=request) from None
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except aiohttp.ClientError as exc:  # the connection dropped, a malformed response...
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        return httpx.Response(
            response.status, headers=response.raw_headers, content=content, request=request
        )

    def _proxy(self, url: httpx.URL) -> str | None:
        """The environment's proxy for `url`, if any, read once per scheme and host.

        Not aiohttp's ``trust_env``: it reads the proxy variables and ``~/.netrc`` again for
        every request, each in a thread of its own, and a ``.netrc`` entry for the host would
        clash with the key's ``Authorization`` header.
        """
        key = (url.scheme, url.host)
        if key not in self._proxies:
            bypass = urllib.request.proxy_bypass_environment(url.host)
            proxies = urllib.request.getproxies_environment()
            found = proxies.get(url.scheme) or proxies.get("all")
            self._proxies[key] = None if bypass else found
        return self._proxies[key]

    async def aclose(self) -> None:
        """Close the session and its connections."""
        if self._session is not None:
            await self._session.close()


def _open_session() -> aiohttp.ClientSession:
    """An aiohttp session in the running loop, closed as that loop ends."""
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
