"""Web search against a scripted Brave-shaped HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from moot.core.errors import ConfigError, EndpointError
from moot.core.retrieval.websearch import WebSearchRetriever

KEY = "sk-secret-search-key-123"
RESULTS = [
    {
        "title": "<strong>UBI</strong> study",
        "url": "https://econ.edu/ubi",
        "description": "A <strong>basic</strong> income trial &amp; results.",
    },
    {"title": "Blog", "url": "https://blog.com/ubi", "description": "Opinion piece."},
    {"title": "Dup", "url": "https://econ.edu/ubi", "description": "Same page again."},
    {"title": "Agency", "url": "https://agency.gov/report", "description": ""},
]


class SearchServer:
    """Answers ``GET /res/v1/web/search`` with `RESULTS`; `statuses` are served first."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.statuses: list[int] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlsplit(self.path)
                server.requests.append(
                    {"path": url.path, "query": parse_qs(url.query), "headers": dict(self.headers)}
                )
                status = server.statuses.pop(0) if server.statuses else 200
                body = {"web": {"results": RESULTS}} if status == 200 else {"error": KEY}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/res/v1"

    def __enter__(self) -> SearchServer:
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch) -> Iterator[SearchServer]:
    monkeypatch.setenv("MOOT_SEARCH_API_KEY", KEY)
    with SearchServer() as running:
        yield running


def retriever(server: SearchServer, **options: object) -> WebSearchRetriever:
    return WebSearchRetriever(api_base=server.url, initial_wait=0.01, **options)


def test_results_become_hits_and_the_key_goes_in_the_header(server):
    hits = retriever(server).search("universal basic income", 3)
    request = server.requests[0]
    assert request["path"] == "/res/v1/web/search"
    assert request["query"] == {"q": ["universal basic income"], "count": ["3"]}
    assert request["headers"]["X-Subscription-Token"] == KEY
    assert [h.chunk.url for h in hits] == [
        "https://econ.edu/ubi",
        "https://blog.com/ubi",
        "https://agency.gov/report",
    ]  # the repeated URL is skipped
    first = hits[0].chunk
    assert (first.id, first.title, first.text) == (
        "https://econ.edu/ubi#0",
        "UBI study",
        "A basic income trial & results.",
    )
    assert hits[2].chunk.text == "Agency"  # no snippet: the title stands in
    assert [h.score for h in hits] == pytest.approx([1, 1 / 2, 1 / 3])


def test_trusted_filter_asks_for_twenty_and_keeps_trusted(server):
    hits = retriever(server, trusted_domains=True).search("ubi", 5)
    assert server.requests[0]["query"]["count"] == ["20"]
    assert [h.chunk.url for h in hits] == ["https://econ.edu/ubi", "https://agency.gov/report"]


def test_transient_errors_are_retried(server):
    server.statuses = [503, 429]
    assert len(retriever(server).search("ubi", 2)) == 2
    assert len(server.requests) == 3


def test_failures_never_show_the_key(server):
    server.statuses = [500, 500, 500]
    with pytest.raises(EndpointError, match="after 3 tries") as info:
        retriever(server).search("ubi", 2)
    server.statuses = [401]
    with pytest.raises(ConfigError, match="refused the key in MOOT_SEARCH_API_KEY") as refused:
        retriever(server).search("ubi", 2)
    server.statuses = [400]
    with pytest.raises(EndpointError, match="HTTP 400") as bad:
        retriever(server).search("ubi", 2)
    server.statuses = [400]
    with_password = server.url.replace("http://", "http://user:URL-SECRET@")
    with pytest.raises(EndpointError, match="HTTP 400") as credentials:
        WebSearchRetriever(api_base=with_password, initial_wait=0.01).search("ubi", 2)
    for error in (info.value, refused.value, bad.value, credentials.value):
        assert KEY not in str(error) and "URL-SECRET" not in str(error)


def test_missing_key_and_too_many_results(server, monkeypatch):
    with pytest.raises(ConfigError, match="k above|at most 20"):
        retriever(server).search("ubi", 21)
    monkeypatch.delenv("MOOT_SEARCH_API_KEY")
    with pytest.raises(ConfigError, match="set MOOT_SEARCH_API_KEY"):
        retriever(server)
    assert server.requests == []
