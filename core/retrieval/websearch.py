"""Web search behind the `Retriever` interface, through the Brave Search API.

``GET {api_base}/web/search?q=QUERY&count=N`` with the header ``X-Subscription-Token: KEY``
(https://api-dashboard.search.brave.com/docs); the reply's ``web.results`` are ``{title, url,
description}`` records, at most 20 per request. Each result becomes one `Chunk` (id ``<url>#0``,
text = the snippet with its HTML tags removed) scored by reciprocal rank (1, 1/2, 1/3, ...).

The key comes from an environment variable (``MOOT_SEARCH_API_KEY`` by default) and never
appears in errors or outputs. 429, 5xx, timeouts and connection errors are retried a few times.
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
import time
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from moot.core.data.corpus import Chunk
from moot.core.errors import ConfigError, EndpointError
from moot.core.redaction import public_url, redact, sending
from moot.core.retrieval.index import Hit, is_trusted

BRAVE_API_BASE = "https://api.search.brave.com/res/v1"
DEFAULT_KEY_ENV = "MOOT_SEARCH_API_KEY"
MAX_RESULTS = 20  # Brave's largest ``count``
#: The largest reply read, in bytes: 20 results are a few tens of kilobytes.
MAX_REPLY = 10 * 2**20
#: A web result as a dry run counts it, unfetched: a 300-character snippet (Brave's are
#: shorter), a 100-character title and URL.
STAND_IN = Chunk(
    "https://example.org/result#0",
    "https://example.org/result",
    "word " * 60,
    "word " * 20,
    "https://example.org/" + "x" * 80,
)
_TAG = re.compile(r"<[^>]+>")


class _Transient(Exception):
    """A failure worth retrying (429, 5xx, timeout, connection error)."""


class WebSearchRetriever:
    """Brave web search as a `Retriever`.

    Args:
        api_key_env: Environment variable holding the subscription key.
        api_base: The API root (tests point it at a local server).
        trusted_domains: Keep only results whose URL is trusted (`is_trusted`); the filter
            applies to the 20 results of one request.
        timeout: Seconds each request may take, from connecting to its last byte.
        attempts: Tries per query, the first included.
        initial_wait: Base of the randomised exponential backoff between tries, in seconds.

    Raises:
        ConfigError: The environment variable is unset or empty.
    """

    name = "web:brave"

    def __init__(
        self,
        *,
        api_key_env: str = DEFAULT_KEY_ENV,
        api_base: str = BRAVE_API_BASE,
        trusted_domains: bool = False,
        timeout: float = 20.0,
        attempts: int = 3,
        initial_wait: float = 1.0,
    ) -> None:
        key = os.environ.get(api_key_env, "").strip()
        if not key:
            raise ConfigError(f"web search needs an API key: set {api_key_env}")
        self._key, self.api_key_env = key, api_key_env
        sending(key)  # never written, even where a reply echoes it
        self.url = api_base.rstrip("/") + "/web/search"
        self._shown = public_url(self.url)  # what messages name: no embedded credentials
        self.trusted_domains = trusted_domains
        self.timeout, self.attempts, self.initial_wait = timeout, attempts, initial_wait

    def search(self, query: str, k: int) -> list[Hit]:
        """The first `k` web results for `query` (fewer when the filter or the API leave fewer).

        Raises:
            ConfigError: `k` above 20, or the key is refused (401/403).
            EndpointError: The API failed for good.
        """
        if k > MAX_RESULTS:
            raise ConfigError(f"web search returns at most {MAX_RESULTS} results per query")
        count = MAX_RESULTS if self.trusted_domains else k
        results = self._request(query, count).get("web", {}).get("results", [])
        hits, seen = [], set()
        for result in results:
            url = result.get("url")
            if not url or url in seen or (self.trusted_domains and not is_trusted(url)):
                continue
            seen.add(url)
            text = redact(_plain(result.get("description") or ""))  # a reply may echo the key
            title = redact(_plain(result.get("title") or "")) or None
            chunk = Chunk(f"{url}#0", url, text or (title or url), title, url)
            hits.append(Hit(chunk, 1.0 / (len(hits) + 1)))
        return hits[:k]

    def _request(self, query: str, count: int) -> dict[str, Any]:
        headers = {"Accept": "application/json", "X-Subscription-Token": self._key}
        params: dict[str, str | int] = {"q": query, "count": count}
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_random_exponential(multiplier=self.initial_wait, max=30),
            retry=retry_if_exception_type(_Transient),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(headers, params)
        except _Transient as exc:
            raise EndpointError(
                f"web search failed after {self.attempts} tries: {self._clean(str(exc))}"
            ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, headers: dict[str, str], params: dict[str, Any]) -> dict[str, Any]:
        try:
            status, reply = self._get(headers, params)
        except httpx.TimeoutException:
            raise _Transient(f"no reply within {self.timeout:g}s from {self._shown}") from None
        except httpx.TransportError as exc:
            raise _Transient(f"{type(exc).__name__} for {self._shown}") from None
        if status == 429 or status >= 500:
            raise _Transient(f"HTTP {status} from {self._shown}")
        if status in (401, 403):
            raise ConfigError(f"web search refused the key in {self.api_key_env} (HTTP {status})")
        if status != 200:
            text = reply[:200].decode("utf-8", "replace")
            raise EndpointError(
                f"web search: HTTP {status} from {self._shown}: {self._clean(text)}"
            )
        try:
            body = json.loads(reply)
        except ValueError:  # UnicodeDecodeError is one
            raise _Transient(f"malformed JSON from {self._shown}") from None
        if not isinstance(body, dict):
            raise EndpointError(f"web search: unexpected reply from {self._shown}")
        return body

    def _get(self, headers: dict[str, str], params: dict[str, Any]) -> tuple[int, bytes]:
        """The reply's status and body, whole within `timeout` seconds and `MAX_REPLY` bytes.

        httpx's timeout bounds each read: a server that drips its headers or its body a byte at
        a time would hold the search for ever, and one that never stops would fill the memory.
        The request runs in a thread of its own, a daemon (it never holds the process's exit),
        left to end on its own if the deadline passes first.

        Raises:
            httpx.ReadTimeout: The deadline passed.
            EndpointError: The reply (unpacked, if the server packed it) is over `MAX_REPLY`.
        """
        done: dict[str, Any] = {}

        def fetch() -> None:
            try:
                done["reply"] = self._read(headers, params, time.monotonic() + self.timeout)
            except BaseException as exc:  # raised again in the caller's thread, below
                done["error"] = exc

        worker = threading.Thread(target=fetch, name="moot-web-search", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise httpx.ReadTimeout(f"no reply within {self.timeout:g}s")
        if "error" in done:
            raise done["error"]
        return done["reply"]

    def _read(
        self, headers: dict[str, str], params: dict[str, Any], deadline: float
    ) -> tuple[int, bytes]:
        body = bytearray()
        with httpx.stream(
            "GET", self.url, headers=headers, params=params, timeout=self.timeout
        ) as response:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_REPLY:
                    raise EndpointError(
                        f"web search: a reply over {MAX_REPLY} bytes from {self._shown}"
                    )
                if time.monotonic() > deadline:  # left behind: stop reading
                    raise httpx.ReadTimeout(f"no reply within {self.timeout:g}s")
        return response.status_code, bytes(body)

    def _clean(self, text: str) -> str:
        return redact(text, [self._key])


def _plain(text: str) -> str:
    """Snippet text without the API's highlight tags and entities."""
    return " ".join(html.unescape(_TAG.sub("", text)).split())
