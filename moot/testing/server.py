"""Scripted OpenAI-compatible HTTP server for tests (moot's and its users') and benchmarks.

Serves ``POST /v1/chat/completions`` (non-streaming), ``GET /v1/models`` and ``GET /health``
on 127.0.0.1 with scripted replies (`Rule`), injected failures (`Fault`), a simulated context
window and artificial latency. Replies that no rule scripts are derived from a hash of the
request, so the same request gets the same reply in every process.

It also serves OpenAI's Files and Batches API for chat completions (``POST /v1/files``,
``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``,
``GET /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``;
`moot.testing.batches`): each line of a batch is answered as a live request with its body is,
rules and faults included (no latency, no rate limits), so a batch run's replies are a live run's.

It speaks Anthropic's Messages API as well, for ``anthropic/...`` models with this api_base:
``POST /v1/messages`` and the Message Batches (``/v1/messages/batches...``), each request
answered as the chat request with the same contents, in Anthropic's shape
(`moot.testing.anthropic`).

Run it in its own process with ``python -m moot.testing.server --latency 0.5``;
it prints ``READY http://127.0.0.1:PORT/v1`` once listening and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import random
import re
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from moot.core.llm.tokens import count_message_tokens, count_tokens
from moot.testing import anthropic
from moot.testing.batches import Answer, Batches, BatchLine, Refusal
from moot.testing.limits import RateLimits

__all__ = [
    "BatchLine",
    "Fault",
    "FaultKind",
    "LoggedRequest",
    "Rule",
    "ScriptedServer",
    "ServerConfig",
    "main",
    "refused_url",
]

FaultKind = Literal[
    "429",
    "500",
    "503",
    "hang",
    "malformed",
    "truncated",
    "no_choices",
    "drip",
    "400",
    "negative_usage",
    "inflated_usage",
    "batch_expired",
]
_LIVE_ONLY = frozenset({"hang", "drip", "malformed", "truncated"})  # faults of the transport
_BATCH_ONLY = frozenset({"batch_expired"})
JSON = dict[str, Any]
_CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})  # never logged

_WORDS = (
    "argument claim evidence premise rebuttal point debate motion judge round position "
    "because therefore however indeed clearly the a this our their strong weak valid sound "
    "reason case proposal opponent context logic data shows suggests supports undermines"
)
_VOCABULARY = _WORDS.split()  # fixed forever: replies must stay stable across versions
_SERVER_ERRORS = {
    "500": "The server had an error while processing your request.",
    "503": "The engine is currently overloaded, please try again later.",
}


@dataclass(frozen=True)
class Rule:
    """A scripted reply; the first rule whose pattern matches a request wins.

    Attributes:
        pattern: Regex searched (with ``re.S``) in the request's message contents, joined by
            newlines.
        reply: Reply text; ``{n}`` is replaced by how many times this rule matched before
            (0-based). Other braces are left alone, so JSON replies need no escaping.
        role: Search only messages with this role; ``"last"`` searches only the last message
            and None searches all messages.
        model: Match only requests for this model (the body's ``model``: ``juror-a`` of
            ``openai/juror-a``); None matches any.
    """

    pattern: str
    reply: str
    role: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class Fault:
    """A failure injected into the first ``times`` matching chat requests.

    Attributes:
        kind: ``"429"``, ``"500"``, ``"503"`` and ``"400"`` answer with that OpenAI-style
            error; ``"hang"`` waits ``hang_seconds`` and then replies normally;
            ``"malformed"`` answers 200 with a non-JSON body; ``"truncated"`` answers 200
            with a valid reply body cut in half; ``"no_choices"`` answers 200 with a JSON
            body whose ``choices`` list is empty; ``"drip"`` sends a valid reply one byte
            every ``drip_seconds``, so no single read waits long but the whole reply does;
            ``"negative_usage"`` and ``"inflated_usage"`` answer a normal reply whose ``usage``
            cannot be true: -400,000,000 prompt and -1 completion tokens, or 10,000,000
            completion tokens. ``"batch_expired"`` applies only to batch lines: the line is not
            run and ends in the error file as ``batch_expired``, and its batch ``expired``.
            The 4xx/5xx kinds and the usage ones apply to batch lines as to live requests (a
            4xx/5xx line goes to the error file with that status and body); ``"hang"``,
            ``"drip"``, ``"malformed"`` and ``"truncated"`` only to live requests.
        times: How many matching requests get the fault.
        match: Regex searched in the joined message contents; None matches any request.
        retry_after: Seconds sent as the ``Retry-After`` header on 429 and 503.
        hang_seconds: How long a ``"hang"`` waits before replying.
        rate: Share of matching requests that get the fault (1: every one). Whether one does
            is drawn from `seed`, the request body and how many times that body came before, so
            a run gets the same faults whatever order its concurrent requests arrive in.
        seed: Seed of those draws.
        drip_seconds: The pause before each byte of a ``"drip"`` reply's body.
    """

    kind: FaultKind
    times: int = 1
    match: str | None = None
    retry_after: float | None = None
    hang_seconds: float = 30.0
    rate: float = 1.0
    seed: int = 0
    drip_seconds: float = 0.1

    def __post_init__(self) -> None:
        if self.kind not in get_args(FaultKind):
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate {self.rate!r} is not between 0 and 1")


@dataclass
class ServerConfig:
    """Behaviour of a `ScriptedServer`; JSON-serialisable so a subprocess can receive it.

    Attributes:
        latency: Seconds slept before answering each chat request.
        rules: Scripted replies, tried in order.
        faults: Injected failures, tried in order.
        context_window: If set, requests whose prompt tokens plus ``max_tokens`` (or
            ``max_completion_tokens``) exceed it fail with ``context_length_exceeded``.
        model: Model name listed by ``/v1/models``.
        api_key: If set, requests to ``/v1/*`` need ``Authorization: Bearer <api_key>``.
        cached_prompt_tokens: Report up to this many of each reply's prompt tokens as read from
            a prompt cache (``usage.prompt_tokens_details.cached_tokens``), as OpenAI does.
        slots: If set, at most this many chat requests are answered at once (each taking
            `latency`); the others wait for a slot, as on a server with a finite batch.
        report_usage: Whether replies carry ``usage``; many proxies and self-hosted servers
            send none.
        rpm: Requests per `limit_window` a client may send; one more is refused with a 429
            that says how long to wait (`moot.testing.limits`). None: no limit.
        tpm: Tokens per `limit_window`: each request is charged its prompt tokens and its
            ``max_tokens`` when admitted. None: no limit.
        limit_window: The limits' window in seconds (60: per minute; a test scales it down).
        batch_polls: Retrieves a batch stays ``in_progress`` for (after the one that ends its
            ``validating``, a share of its lines answered at each) before the next ends it.
    """

    latency: float = 0.0
    rules: list[Rule] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    context_window: int | None = None
    model: str = "scripted"
    api_key: str | None = None
    cached_prompt_tokens: int = 0
    slots: int | None = None
    report_usage: bool = True
    rpm: int | None = None
    tpm: int | None = None
    limit_window: float = 60.0
    batch_polls: int = 2

    def to_json(self) -> str:
        """Serialise the configuration to a JSON string."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerConfig:
        """Build a configuration from `to_json` output (missing keys take their defaults)."""
        data = json.loads(text)
        data["rules"] = [Rule(**rule) for rule in data.get("rules", [])]
        data["faults"] = [Fault(**fault) for fault in data.get("faults", [])]
        return cls(**data)


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server saw it; credentials are never recorded.

    Attributes:
        path: Request path without the query string.
        body: Parsed JSON body, or None if there was none or it was not a JSON object.
        status: HTTP status of the response.
        outcome: ``"ok"``, a fault kind (``"429"``, ``"hang"``, ...) or an error such as
            ``"context_length_exceeded"``, ``"unauthorized"`` or ``"not_found"``.
        authorized: Whether the request carried the configured API key (always True
            when none is configured; ``/health`` is served either way).
        time: Arrival time (``time.time()``).
        headers: The request's headers, names lower-cased, but for those that carry credentials
            (``authorization``, ``x-api-key``, ``api-key``), which are left out.
    """

    path: str
    body: JSON | None
    status: int
    outcome: str
    authorized: bool
    time: float
    headers: dict[str, str] = field(default_factory=dict)


def _error(message: str, kind: str, code: str | None = None, param: str | None = None) -> JSON:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _joined_contents(messages: list[JSON], role: str | None = None) -> str:
    """Join message contents (text parts only for multi-part content) for regex matching."""
    if role == "last":
        messages = messages[-1:]
    elif role is not None:
        messages = [m for m in messages if m.get("role") == role]
    texts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        texts.append(content if isinstance(content, str) else "")
    return "\n".join(texts)


def _max_tokens(body: JSON) -> int | None:
    value = body.get("max_tokens")
    value = body.get("max_completion_tokens") if value is None else value
    return value if isinstance(value, int) else None


def _request_rng(body: JSON) -> random.Random:
    """Seed a generator from a stable hash of the reply-relevant request fields."""
    keys = ("model", "messages", "temperature", "seed")
    canonical = {key: body.get(key) for key in keys} | {"max_tokens": _max_tokens(body)}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest(), "big"))


def _draw(seed: int, digest: str, arrival: int) -> float:
    """A number in [0, 1) fixed by a seed, a request body's digest and its arrival count."""
    key = hashlib.sha256(f"{seed}:{digest}:{arrival}".encode()).digest()
    return int.from_bytes(key[:8], "big") / 2**64


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_VOCABULARY) for _ in range(count))


def _sentence(rng: random.Random, max_words: int | None) -> tuple[str, str]:
    """Return a deterministic sentence and its finish reason ("length" if cut to max_words)."""
    count = rng.randint(8, 40)
    if max_words is not None and count > max_words:
        return _words(rng, max(max_words, 0)), "length"
    return _words(rng, count).capitalize() + ".", "stop"


def _example(schema: JSON, rng: random.Random, root: JSON) -> Any:
    """Build a minimal value satisfying a simple JSON schema."""
    ref = schema.get("$ref", "")
    if ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        return _example(target, rng, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        if schema.get(combinator):
            return _example(schema[combinator][0], rng, root)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: _example(properties.get(name, {}), rng, root) for name in properties}
    if kind == "array":
        items = schema.get("items", {})
        return [_example(items, rng, root) for _ in range(max(schema.get("minItems", 1), 1))]
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        low = math.ceil(low) if low is not None else min(0, math.floor(high or 0))
        return rng.randint(low, math.floor(high) if high is not None else low + 9)
    if kind == "boolean":
        return rng.random() < 0.5
    return None if kind == "null" else _words(rng, rng.randint(1, 3))


def _context_error(window: int, prompt: int, completion: int) -> JSON:
    """The error OpenAI returns when a request does not fit the context window."""
    if completion == 0:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    else:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    return _error(message, "invalid_request_error", "context_length_exceeded", "messages")


class _Reply(Exception):
    """Raised to answer a request early with a status, JSON body and log outcome."""

    def __init__(self, status: int, body: JSON, outcome: str, headers: JSON | None = None):
        super().__init__(outcome)
        self.status, self.body, self.outcome, self.headers = status, body, outcome, headers or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
    disable_nagle_algorithm = True  # otherwise Nagle + delayed ACK add ~40 ms per response
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr log; requests are recorded in the request log."""

    def do_GET(self) -> None:  # noqa: D102 - http.server dispatch
        self.server.owner._handle(self, "GET")

    def do_POST(self) -> None:  # noqa: D102 - http.server dispatch
        self.server.owner._handle(self, "POST")

    def send(
        self, status: int, body: bytes, headers: JSON | None = None, drip: float = 0.0
    ) -> None:
        """Write a complete response (its body a byte each `drip` seconds, if set).

        A client that hung up is not an error.
        """
        headers = dict(headers or {})
        try:
            self.send_response(status)
            self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.end_headers()
            if not drip:
                self.wfile.write(body)
                return
            for index in range(len(body)):
                if self.server.owner._stopping.wait(drip):
                    break
                self.wfile.write(body[index : index + 1])
                self.wfile.flush()
        except OSError:
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for idle keep-alive or hanging handlers
    request_queue_size = 256  # benchmarks open 64+ connections at once
    owner: ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client goes away mid-request (timeouts, killed processes)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """An OpenAI-compatible server on 127.0.0.1 that answers from a `ServerConfig`.

    Use as a context manager (``with ScriptedServer(latency=0.1) as server: ...``) or call
    `start` and `stop`. Rules and faults can be added while it runs.
    """

    def __init__(self, config: ServerConfig | None = None, *, port: int = 0, **overrides: Any):
        """Create a stopped server.

        Args:
            config: Server behaviour; defaults to ``ServerConfig()``.
            port: Port to listen on; 0 lets the OS pick a free one.
            **overrides: `ServerConfig` fields replacing those of ``config``.
        """
        config = replace(config or ServerConfig(), **overrides)
        self.config = replace(config, rules=list(config.rules), faults=list(config.faults))
        self._port = port
        self._lock = threading.Lock()
        self._fault_uses = [0] * len(self.config.faults)
        self._rule_matches = [0] * len(self.config.rules)
        self._body_arrivals: dict[str, int] = {}  # chat bodies' digests: seeded fault draws
        self._log: list[tuple[int, LoggedRequest]] = []
        self._arrivals = 0
        self._in_flight = self._peak = 0
        slots = self.config.slots
        self._slots = threading.BoundedSemaphore(slots) if slots else contextlib.nullcontext()
        limited = self.config.rpm is not None or self.config.tpm is not None
        window = self.config.limit_window
        self._limits = RateLimits(self.config.rpm, self.config.tpm, window) if limited else None
        self._batches = Batches(self.config.batch_polls, self._batch_line, self._message_line)
        self._handling = 0  # requests inside _handle: stop() waits for them to be logged
        self._handled = threading.Condition(self._lock)
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL of the API, ``http://127.0.0.1:PORT/v1``."""
        if self._httpd is None:
            raise RuntimeError("server is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def requests(self) -> list[LoggedRequest]:
        """Snapshot of the answered requests, in arrival order."""
        with self._lock:
            return [entry for _, entry in sorted(self._log, key=lambda item: item[0])]

    @property
    def batch_lines(self) -> list[BatchLine]:
        """Every request line of every batch created, in creation order (run or not)."""
        return self._batches.lines

    @property
    def peak_in_flight(self) -> int:
        """The most chat requests the server has held at once (arrived and not yet answered)."""
        with self._lock:
            return self._peak

    @property
    def arrivals(self) -> int:
        """Requests that arrived so far, answered or still in the server's hands (a hang)."""
        with self._lock:
            return self._arrivals

    def start(self) -> ScriptedServer:
        """Start listening and serving in a background thread; returns self."""
        if self._httpd is not None:
            raise RuntimeError("server is already running")
        self._stopping.clear()
        httpd = _HTTPServer(("127.0.0.1", self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._batches.origin = f"http://127.0.0.1:{httpd.server_address[1]}"
        # A short poll interval keeps stop() fast: shutdown() waits for the next poll.
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, interrupt sleeping handlers and close open connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # wakes handler threads blocked on keep-alive reads
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        with self._handled:  # a woken hang logs itself: the log is whole once stop() returns
            self._handled.wait_for(lambda: self._handling == 0, timeout=5)
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def add_fault(self, fault: Fault) -> None:
        """Append a fault; it applies to requests arriving from now on."""
        with self._lock:
            self.config.faults.append(fault)
            self._fault_uses.append(0)

    def add_rule(self, rule: Rule) -> None:
        """Append a rule, tried after the existing ones."""
        with self._lock:
            self.config.rules.append(rule)
            self._rule_matches.append(0)

    def clear_log(self) -> None:
        """Forget all logged requests."""
        with self._lock:
            self._log.clear()

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def _handle(self, handler: _Handler, method: str) -> None:
        """Answer one request and log it."""
        arrived = time.time()
        with self._lock:
            self._arrivals += 1
            self._handling += 1
            sequence = self._arrivals
        try:
            self._serve(handler, method, arrived, sequence)
        finally:
            with self._handled:
                self._handling -= 1
                self._handled.notify_all()

    def _serve(self, handler: _Handler, method: str, arrived: float, sequence: int) -> None:
        """Read, route, log and send one request."""
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""  # always drain: keep-alive
        url = urlsplit(handler.path)
        path = url.path.rstrip("/")
        key = self.config.api_key
        authorized = key is None or key in (
            handler.headers.get("Authorization", "").removeprefix("Bearer "),
            handler.headers.get("x-api-key"),  # Anthropic's
        )
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else None
        try:
            request = raw, handler.headers.get("Content-Type", ""), url.query
            status, payload, headers, outcome = self._route(method, path, body, authorized, request)
        except _Reply as reply:
            status, headers, outcome = reply.status, reply.headers, reply.outcome
            payload = json.dumps(reply.body).encode()
        except Exception as exc:  # e.g. a bad regex in a rule: answer instead of dropping
            status, headers, outcome = 500, {}, "internal_error"
            payload = json.dumps(_error(f"scripted server error: {exc!r}", "server_error")).encode()
        received = {
            name.lower(): value
            for name, value in handler.headers.items()
            if name.lower() not in _CREDENTIAL_HEADERS
        }
        entry = LoggedRequest(path, body, status, outcome, authorized, arrived, received)
        with self._lock:
            self._log.append((sequence, entry))
        drip = float(headers.pop("X-Drip-Seconds", 0.0))
        handler.send(status, payload, headers, drip)

    def _route(
        self,
        method: str,
        path: str,
        body: JSON | None,
        authorized: bool,
        request: tuple[bytes, str, str] = (b"", "", ""),
    ) -> tuple[int, bytes, JSON, str]:
        """Dispatch by path; returns status, body bytes, extra headers and log outcome.

        `request` is the raw body, its content type and the query string (files, batches).
        """
        if (method, path) == ("GET", "/health"):
            return 200, b'{"status": "ok"}', {}, "ok"
        known = {("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/messages")}
        batch = self._batches.serves(method, path)
        if (method, path) not in known and not batch:
            message = f"Unknown request URL: {method} {path}."
            raise _Reply(404, _error(message, "invalid_request_error", "unknown_url"), "not_found")
        if not authorized:
            message = "Incorrect API key provided."
            raise _Reply(
                401, _error(message, "invalid_request_error", "invalid_api_key"), "unauthorized"
            )
        if batch:
            raw, content_type, query = request
            try:
                return (*self._batches.route(method, path, query, body, raw, content_type), "ok")
            except Refusal as no:
                error = _error(no.message, "invalid_request_error", no.code, no.param)
                raise _Reply(no.status, error, "invalid_request") from None
        if path == "/v1/models":
            model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "moot"}
            return 200, json.dumps({"object": "list", "data": [model]}).encode(), {}, "ok"
        if path == "/v1/messages":
            return self._messages(body)
        return self._chat(body)

    @staticmethod
    def _check_chat(body: JSON | None) -> JSON:
        """The body of a chat request this server answers; a 400 for any other."""
        if body is None or not isinstance(body.get("messages"), list):
            message = "We could not parse the JSON body of your request, or 'messages' is missing."
            raise _Reply(400, _error(message, "invalid_request_error"), "invalid_request")
        if body.get("stream"):
            message = "streaming not supported"
            raise _Reply(
                400, _error(message, "invalid_request_error", param="stream"), "invalid_request"
            )
        return body

    def _chat(self, body: JSON | None) -> tuple[int, bytes, JSON, str]:
        """Answer a chat completion request, applying latency, faults and the context window."""
        body = self._check_chat(body)
        limits = self._admit(body)
        with self._lock:
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
        try:
            status, payload, headers, outcome = self._answer(body)
            return status, payload, {**limits, **headers}, outcome
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, body: JSON) -> tuple[int, bytes, JSON, str]:
        with self._slots:
            self._stopping.wait(self.config.latency)  # an Event, so stop() cuts the sleep short
        fault = self._take_fault(body, batch=False)
        if fault is not None and fault.kind == "hang":
            self._stopping.wait(fault.hang_seconds)
        payload = json.dumps(self._reply(body, fault)).encode()
        if fault is None or fault.kind not in ("drip", "malformed", "truncated"):
            return 200, payload, {}, fault.kind if fault else "ok"
        if fault.kind == "drip":
            return 200, payload, {"X-Drip-Seconds": fault.drip_seconds}, "drip"
        if fault.kind == "malformed":
            return 200, b"<html>upstream proxy error: not JSON", {}, "malformed"
        return 200, payload[: len(payload) // 2], {}, "truncated"

    def _batch_line(self, body: JSON | None) -> Answer:
        """Answer a batch line's body as a live request (no latency, no limits) or expire it."""
        try:
            checked = self._check_chat(body)
            fault = self._take_fault(checked, batch=True)
            if fault is not None and fault.kind == "batch_expired":
                return None
            return 200, self._reply(checked, fault)
        except _Reply as reply:
            return reply.status, reply.body

    def _messages(self, params: JSON | None) -> tuple[int, bytes, JSON, str]:
        """Anthropic's ``POST /v1/messages``: the chat route's answer, in Anthropic's shape."""
        body = anthropic.chat_body(params)
        try:
            status, payload, headers, outcome = self._chat(body)
        except _Reply as reply:
            error = anthropic.error(reply.status, reply.body)
            raise _Reply(reply.status, error, reply.outcome, reply.headers) from None
        try:
            completion = json.loads(payload)
        except ValueError:  # a fault's broken body stays broken
            return status, payload, headers, outcome
        message = json.dumps(anthropic.message(completion, params or {})).encode()
        return status, message, headers, outcome

    def _message_line(self, params: JSON) -> Answer:
        """A message batch request's answer, as `_messages` would give it, or None (expired)."""
        answer = self._batch_line(anthropic.chat_body(params))
        if answer is None:
            return None
        status, body = answer
        if status >= 300:
            return status, anthropic.error(status, body)
        return status, anthropic.message(body, params)

    def _reply(self, body: JSON, fault: Fault | None) -> JSON:
        """The chat.completion for `body` under `fault`; a `_Reply` for an error."""
        if fault is not None and fault.kind in ("429", "500", "503", "400"):
            raise self._fault_reply(fault)
        self._check_context(body)
        completion = self._completion(body)
        if fault is not None and fault.kind == "no_choices":
            completion["choices"] = []
        if fault is not None and fault.kind == "negative_usage":
            completion["usage"].update(prompt_tokens=-400_000_000, completion_tokens=-1)
        if fault is not None and fault.kind == "inflated_usage":
            completion["usage"]["completion_tokens"] = 10_000_000
        if not self.config.report_usage:
            del completion["usage"]
        return completion

    def _admit(self, body: JSON) -> JSON:
        """The rate-limit headers of an admitted request; a 429 for one over the limits."""
        if self._limits is None:
            return {}
        tokens = count_message_tokens(body["messages"]) + (_max_tokens(body) or 0)
        wait, headers = self._limits.admit(tokens)
        if not wait:
            return headers
        if math.isinf(wait):
            message = f"Request too large: {tokens} tokens asked, the limit is {self.config.tpm}."
        else:
            message = f"Rate limit reached (scripted). Please try again in {wait:.3f}s."
        error = _error(message, "rate_limit_error", "rate_limit_exceeded")
        raise _Reply(429, error, "rate_limited", headers)

    def _take_fault(self, body: JSON, *, batch: bool) -> Fault | None:
        """Consume one use of the first matching fault that has uses left (and is drawn).

        Only faults that apply to a live request, or to a batch line (`batch`), match.
        """
        skipped = _LIVE_ONLY if batch else _BATCH_ONLY
        contents = _joined_contents(body["messages"])
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            arrival = self._body_arrivals.get(digest, 0)
            self._body_arrivals[digest] = arrival + 1
            for index, fault in enumerate(self.config.faults):
                if fault.kind in skipped:
                    continue
                matches = fault.match is None or re.search(fault.match, contents, re.S)
                drawn = fault.rate >= 1.0 or _draw(fault.seed, digest, arrival) < fault.rate
                if matches and drawn and self._fault_uses[index] < fault.times:
                    self._fault_uses[index] += 1
                    return fault
        return None

    @staticmethod
    def _fault_reply(fault: Fault) -> _Reply:
        headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
        if fault.kind == "429":
            message = "Rate limit reached for requests (scripted fault)."
            return _Reply(
                429, _error(message, "rate_limit_error", "rate_limit_exceeded"), "429", headers
            )
        if fault.kind == "400":
            message = "Invalid request (scripted fault)."
            return _Reply(400, _error(message, "invalid_request_error"), "400")
        body = _error(_SERVER_ERRORS[fault.kind], "server_error")
        return _Reply(int(fault.kind), body, fault.kind, headers if fault.kind == "503" else {})

    def _check_context(self, body: JSON) -> None:
        window = self.config.context_window
        if window is None:
            return
        prompt, completion = count_message_tokens(body["messages"]), _max_tokens(body) or 0
        if prompt + completion > window:
            raise _Reply(400, _context_error(window, prompt, completion), "context_length_exceeded")

    def _completion(self, body: JSON) -> JSON:
        """Build the chat.completion response for a request that gets a normal reply."""
        content, finish_reason = self._reply_text(body)
        prompt_tokens = count_message_tokens(body["messages"])
        completion_tokens = count_tokens(content)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.config.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {
                    "cached_tokens": min(self.config.cached_prompt_tokens, prompt_tokens)
                },
            },
        }

    def _reply_text(self, body: JSON) -> tuple[str, str]:
        """Pick the reply: first matching rule, else JSON for a response_format, else a hash."""
        messages = body["messages"]
        with self._lock:
            for index, rule in enumerate(self.config.rules):
                if rule.model not in (None, body.get("model")):
                    continue
                if re.search(rule.pattern, _joined_contents(messages, rule.role), re.S):
                    self._rule_matches[index] += 1
                    return rule.reply.replace("{n}", str(self._rule_matches[index] - 1)), "stop"
        rng = _request_rng(body)
        response_format = body.get("response_format") or {}
        if response_format.get("type") == "json_object":
            return json.dumps({"answer": _words(rng, 3)}), "stop"
        if response_format.get("type") == "json_schema":
            schema = response_format.get("json_schema", {}).get("schema", {})
            return json.dumps(_example(schema, rng, schema)), "stop"
        return _sentence(rng, _max_tokens(body))


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """The base URL of a local port that refuses every connection while the context lasts.

    The port is bound and never listened on, so no other process can take it meanwhile (a port
    bound, released and then connected to can be another test's server by then).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def main(argv: list[str] | None = None) -> int:
    """Run a scripted server until SIGTERM or SIGINT.

    Args:
        argv: Command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The process exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--latency", type=float, help="seconds slept before each reply")
    parser.add_argument("--config", type=Path, help="JSON file written by ServerConfig.to_json")
    parser.add_argument("--port", type=int, default=0, help="port (0: let the OS pick)")
    parser.add_argument("--slots", type=int, help="chat requests answered at once (default: all)")
    args = parser.parse_args(argv)
    config = ServerConfig.from_json(args.config.read_text()) if args.config else ServerConfig()
    if args.latency is not None:
        config.latency = args.latency
    if args.slots is not None:
        config.slots = args.slots
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    with ScriptedServer(config, port=args.port) as server:
        print(f"READY {server.url}", flush=True)
        while not done.wait(0.5):  # periodic wake-ups keep the main thread responsive
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
