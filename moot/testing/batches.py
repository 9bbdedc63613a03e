"""OpenAI's Files and Batches API, as the scripted server serves it.

A client uploads a JSONL file (``POST /v1/files``, ``purpose=batch``), creates a batch of it
(``POST /v1/batches``) and polls it (``GET /v1/batches/{id}``) until it ends, then downloads its
output and error files (``GET /v1/files/{id}/content``). Each retrieve advances a batch one step:
``validating``, then ``in_progress`` for `polls` retrieves (its lines answered a share at a time,
in file order, so ``request_counts`` grow), then an end: ``completed``; ``expired`` when a line
expired; ``failed`` when the file did not validate (``errors.data``, no output); ``cancelled``
after a cancel (``cancelling`` until the next retrieve), its unanswered lines ``batch_cancelled``.
The server answers each line through a callback, as a live request with the line's body.

It serves Anthropic's Message Batches too: ``POST /v1/messages/batches`` with the requests inline
(``[{custom_id, params}]``), ``GET /v1/messages/batches/{id}`` (``in_progress`` for `polls`
retrieves, a share of its requests answered at each, then ``ended``; its ``request_counts``
stay 0 but ``processing`` until then, as Anthropic's do), ``GET .../{id}/results`` (JSONL,
``succeeded``, ``errored`` or ``expired`` per request) and ``POST .../{id}/cancel``
(``canceling`` until the next retrieve; its unanswered requests ``canceled``).
"""

from __future__ import annotations

import email.parser
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

JSON = dict[str, Any]
Answer = tuple[int, JSON] | None
"""A line's HTTP status and response body; None when the line expired (was not run)."""

ENDPOINT = "/v1/chat/completions"  # the one endpoint the scripted server answers
_ENDED = ("completed", "expired", "failed", "cancelled")
_CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Anthropic's rule for a custom_id
_NOT_RUN = {
    "batch_expired": "This request could not be executed before the completion window expired.",
    "batch_cancelled": "This request was not executed because the batch was cancelled.",
}


class Refusal(Exception):
    """An API call refused with an OpenAI-style ``invalid_request_error``."""

    def __init__(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param


@dataclass(frozen=True)
class BatchLine:
    """One request line of a created batch, as the client submitted it.

    Attributes:
        batch_id: The batch the line was submitted in.
        custom_id: The line's ``custom_id`` (None if it had none).
        body: The line's request ``body`` (None if it had none).
    """

    batch_id: str
    custom_id: Any
    body: JSON | None


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def object(self) -> JSON:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None,
            "status_details": None,
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    completion_window: str
    metadata: JSON | None
    created_at: int
    lines: list[JSON]  # the file's lines once validated
    errors: list[JSON]  # validation errors: the batch fails at its first retrieve
    status: str = "validating"
    polls: int = 0  # retrieves while in_progress
    outputs: list[JSON] = field(default_factory=list)  # answered lines, 2xx
    failures: list[JSON] = field(default_factory=list)  # the other answered lines
    times: dict[str, int] = field(default_factory=dict)  # e.g. "in_progress_at"
    output_file_id: str | None = None
    error_file_id: str | None = None

    def object(self) -> JSON:
        started = self.status not in ("validating", "failed")
        stamps = ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling")
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": ENDPOINT,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "created_at": self.created_at,
            "expires_at": self.created_at + 24 * 3600,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "metadata": self.metadata,
            "request_counts": {
                "total": len(self.lines) if started else 0,
                "completed": len(self.outputs),
                "failed": len(self.failures),
            },
            **{f"{name}_at": self.times.get(name) for name in (*stamps, "cancelled")},
        }


@dataclass
class _MessageBatch:
    """An Anthropic message batch."""

    id: str
    requests: list[JSON]
    created_at: str
    status: str = "in_progress"  # then "canceling", "ended"
    polls: int = 0
    results: list[JSON] = field(default_factory=list)  # answered requests, in request order
    cancelled_at: str | None = None
    ended_at: str | None = None

    def object(self, origin: str) -> JSON:
        counts = dict.fromkeys(("succeeded", "errored", "canceled", "expired"), 0)
        if self.status == "ended":
            for result in self.results:
                counts[result["result"]["type"]] += 1
        ended = self.status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": {"processing": 0 if ended else len(self.requests), **counts},
            "created_at": self.created_at,
            "expires_at": self.created_at,
            "ended_at": self.ended_at,
            "cancel_initiated_at": self.cancelled_at,
            "archived_at": None,
            "results_url": f"{origin}/v1/messages/batches/{self.id}/results" if ended else None,
        }


class Batches:
    """The files and batches of one scripted server (thread-safe).

    Args:
        polls: Retrieves a batch stays ``in_progress`` for before it ends.
        answer: Answers one line's body as a live request would be answered.
        answer_message: Answers one Anthropic request's params as ``POST /v1/messages`` would.
    """

    def __init__(
        self,
        polls: int,
        answer: Callable[[JSON], Answer],
        answer_message: Callable[[JSON], Answer] | None = None,
    ) -> None:
        self._polls = polls
        self._answer = answer
        self._answer_message = answer_message
        self._files: dict[str, _File] = {}
        self._batches: dict[str, _Batch] = {}  # in creation order
        self._messages: dict[str, _MessageBatch] = {}
        self._lines: list[BatchLine] = []
        self._lock = threading.Lock()
        #: The server's ``http://host:port``, for a message batch's ``results_url``.
        self.origin = ""

    @staticmethod
    def serves(method: str, path: str) -> bool:
        """Whether `path` is one of this API's URLs for `method`."""
        parts = path.split("/")[2:]  # "/v1/batches/x" -> ["batches", "x"]
        if parts[:2] == ["messages", "batches"]:
            if method == "POST":
                return len(parts) == 2 or parts[3:] == ["cancel"]
            return len(parts) == 3 or parts[3:] == ["results"]
        if not parts or parts[0] not in ("files", "batches"):
            return False
        if method == "POST":
            return len(parts) == 1 or (parts[0] == "batches" and parts[2:] == ["cancel"])
        return len(parts) <= 2 or (parts[0] == "files" and parts[2:] == ["content"])

    @property
    def lines(self) -> list[BatchLine]:
        """Every line of every created batch, in creation order."""
        with self._lock:
            return list(self._lines)

    def route(
        self, method: str, path: str, query: str, body: JSON | None, raw: bytes, content_type: str
    ) -> tuple[int, bytes, JSON]:
        """Answer a call `serves` accepts: status, body bytes and extra headers.

        Raises:
            Refusal: For an unknown id, a bad upload or a bad batch.
        """
        parts = path.split("/")[2:]
        with self._lock:
            if parts[:2] == ["messages", "batches"]:
                return self._route_messages(method, parts[2:], body)
            if parts == ["files"]:
                reply = self._upload(raw, content_type)
            elif parts == ["batches"] and method == "POST":
                reply = self._create(body)
            elif parts == ["batches"]:
                reply = self._list(parse_qs(query))
            elif parts[0] == "files" and parts[2:] == ["content"]:
                content = self._file(parts[1]).content
                return 200, content, {"Content-Type": "application/octet-stream"}
            elif parts[0] == "files":
                reply = self._file(parts[1]).object()
            elif parts[2:] == ["cancel"]:
                reply = self._cancel(self._batch(parts[1]))
            else:
                reply = self._advance(self._batch(parts[1])).object()
        return 200, json.dumps(reply).encode(), {}

    def _route_messages(
        self, method: str, parts: list[str], body: JSON | None
    ) -> tuple[int, bytes, JSON]:
        """Anthropic's Message Batches: create, retrieve, results, cancel."""
        if not parts:
            return 200, json.dumps(self._create_messages(body)).encode(), {}
        batch = self._messages.get(parts[0])
        if batch is None:
            raise Refusal(404, f"No message batch with id '{parts[0]}'.", param="id")
        if parts[1:] == ["results"]:
            if batch.status != "ended":
                raise Refusal(400, f"Message batch {batch.id} has not ended yet.")
            content = "".join(json.dumps(result) + "\n" for result in batch.results).encode()
            return 200, content, {"Content-Type": "application/binary"}
        if parts[1:] == ["cancel"]:
            if batch.status == "in_progress":
                batch.status, batch.cancelled_at = "canceling", _now()
        else:
            self._advance_messages(batch)
        return 200, json.dumps(batch.object(self.origin)).encode(), {}

    def _create_messages(self, body: JSON | None) -> JSON:
        """A message batch of the body's requests, checked as Anthropic checks them."""
        requests = (body or {}).get("requests")
        if not isinstance(requests, list) or not requests:
            raise Refusal(400, "requests: Field required and must not be empty.", param="requests")
        seen: set[Any] = set()
        for request in requests:
            custom_id = request.get("custom_id") if isinstance(request, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
                raise Refusal(400, "custom_id must match ^[a-zA-Z0-9_-]{1,64}$")
            if custom_id in seen:
                raise Refusal(400, f"Duplicate custom_id: {custom_id}")
            if not isinstance(request.get("params"), dict):
                raise Refusal(400, "params: Field required.", param="params")
            seen.add(custom_id)
        batch = _MessageBatch(f"msgbatch_{uuid.uuid4().hex}", requests, _now())
        for request in requests:
            self._lines.append(BatchLine(batch.id, request["custom_id"], request["params"]))
        self._messages[batch.id] = batch
        return batch.object(self.origin)

    def _advance_messages(self, batch: _MessageBatch) -> None:
        """One retrieve's step: answer a share of the requests, or end."""
        if batch.status == "ended":
            return
        batch.polls += 1
        last = batch.status == "canceling" or batch.polls > self._polls
        upto = len(batch.requests) * (batch.polls - 1) // max(self._polls, 1)
        for request in batch.requests[len(batch.results) : len(batch.requests) if last else upto]:
            batch.results.append(
                {"custom_id": request["custom_id"], "result": self._result(batch, request)}
            )
        if last:
            batch.status, batch.ended_at = "ended", _now()

    def _result(self, batch: _MessageBatch, request: JSON) -> JSON:
        if batch.status == "canceling" or self._answer_message is None:
            return {"type": "canceled"}
        answer = self._answer_message(request["params"])
        if answer is None:
            return {"type": "expired"}
        status, body = answer
        if status < 300:
            return {"type": "succeeded", "message": body}
        return {"type": "errored", "error": {**body, "request_id": f"req_{uuid.uuid4().hex}"}}

    def _file(self, file_id: str) -> _File:
        if file_id not in self._files:
            raise Refusal(404, f"No such File object: {file_id}", param="id")
        return self._files[file_id]

    def _batch(self, batch_id: str) -> _Batch:
        if batch_id not in self._batches:
            raise Refusal(404, f"No batch found with id '{batch_id}'.", param="id")
        return self._batches[batch_id]

    def _store(self, filename: str, purpose: str, content: bytes) -> _File:
        stored = _File(f"file-{uuid.uuid4().hex}", filename, purpose, content, int(time.time()))
        self._files[stored.id] = stored
        return stored

    def _upload(self, raw: bytes, content_type: str) -> JSON:
        """Store a multipart upload's ``file`` part (``purpose`` must be ``batch``)."""
        if not content_type.startswith("multipart/form-data"):
            raise Refusal(400, "Uploads must be multipart/form-data.")
        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        message = email.parser.BytesParser().parsebytes(head + raw)
        parts = {
            part.get_param("name", header="content-disposition"): part
            for part in message.get_payload()
        }
        purpose, upload = parts.get("purpose"), parts.get("file")
        if purpose is None or purpose.get_payload(decode=True) != b"batch":
            raise Refusal(400, "The scripted server takes only purpose 'batch'.", param="purpose")
        if upload is None:
            raise Refusal(400, "Missing required parameter: 'file'.", param="file")
        content = upload.get_payload(decode=True)
        return self._store(upload.get_filename() or "upload.jsonl", "batch", content).object()

    def _create(self, body: JSON | None) -> JSON:
        """Create a batch of an uploaded file; its lines are checked at its first retrieve."""
        body = body or {}
        for name in ("input_file_id", "endpoint", "completion_window"):
            if not isinstance(body.get(name), str):
                raise Refusal(400, f"Missing required parameter: '{name}'.", param=name)
        if body["endpoint"] != ENDPOINT:
            raise Refusal(400, f"The scripted server batches only {ENDPOINT}.", param="endpoint")
        if body["completion_window"] != "24h":
            raise Refusal(400, "completion_window must be '24h'.", param="completion_window")
        batch_id = f"batch_{uuid.uuid4().hex}"
        stored = self._files.get(body["input_file_id"])
        lines, errors = _validate(stored.content) if stored else ([], [_no_file(body)])
        for line in lines:
            self._lines.append(BatchLine(batch_id, line.get("custom_id"), line.get("body")))
        batch = _Batch(
            batch_id,
            body["input_file_id"],
            body["completion_window"],
            body.get("metadata"),
            int(time.time()),
            lines=[] if errors else lines,
            errors=errors,
        )
        self._batches[batch_id] = batch
        return batch.object()

    def _list(self, query: dict[str, list[str]]) -> JSON:
        """Batches newest first, `limit` (default 20) of them after the batch `after`."""
        limit = int(query.get("limit", ["20"])[0])
        newest = list(reversed(self._batches.values()))
        after = query.get("after", [None])[0]
        ids = [batch.id for batch in newest]
        start = ids.index(after) + 1 if after in ids else 0
        page = newest[start : start + limit]
        return {
            "object": "list",
            "data": [batch.object() for batch in page],
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
            "has_more": start + limit < len(newest),
        }

    def _cancel(self, batch: _Batch) -> JSON:
        if batch.status in _ENDED:
            message = f"Cannot cancel a batch with status '{batch.status}'."
            raise Refusal(409, message, param="batch_id")
        if batch.status != "cancelling":
            batch.status = "cancelling"
            batch.times["cancelling"] = int(time.time())
        return batch.object()

    def _advance(self, batch: _Batch) -> _Batch:
        """One retrieve's step: validate, answer a share of the lines, or end."""
        now = int(time.time())
        if batch.status == "cancelling":
            for line in batch.lines[len(batch.outputs) + len(batch.failures) :]:
                batch.failures.append(_not_run(line, "batch_cancelled"))
            self._end(batch, "cancelled", now)
        elif batch.status == "validating" and batch.errors:
            self._end(batch, "failed", now)
        elif batch.status in ("validating", "in_progress"):
            if batch.status == "validating":
                batch.status, batch.times["in_progress"] = "in_progress", now
            batch.polls += 1
            done = len(batch.lines) * (batch.polls - 1) // max(self._polls, 1)
            self._answer_lines(batch, len(batch.lines) if batch.polls > self._polls else done)
            if batch.polls > self._polls:
                batch.times["finalizing"] = now
                expired = any(line["error"] for line in batch.failures)
                self._end(batch, "expired" if expired else "completed", now)
        return batch

    def _answer_lines(self, batch: _Batch, upto: int) -> None:
        for line in batch.lines[len(batch.outputs) + len(batch.failures) : upto]:
            answer = self._answer(line["body"])
            if answer is None:
                batch.failures.append(_not_run(line, "batch_expired"))
                continue
            status, body = answer
            request_id = f"req_{uuid.uuid4().hex}"
            (batch.outputs if status < 300 else batch.failures).append(
                {
                    "id": f"batch_req_{uuid.uuid4().hex}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": status, "request_id": request_id, "body": body},
                    "error": None,
                }
            )

    def _end(self, batch: _Batch, status: str, now: int) -> None:
        batch.status, batch.times[status] = status, now
        for kind, lines in (("output", batch.outputs), ("error", batch.failures)):
            if lines:
                content = "".join(json.dumps(line) + "\n" for line in lines).encode()
                stored = self._store(f"{batch.id}_{kind}.jsonl", "batch_output", content)
                setattr(batch, f"{kind}_file_id", stored.id)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _validate(content: bytes) -> tuple[list[JSON], list[JSON]]:
    """A batch file's lines that are JSON objects, and its validation errors (OpenAI's codes)."""
    lines: list[JSON] = []
    errors: list[JSON] = []
    seen: set[Any] = set()

    def error(code: str, number: int, message: str, param: str | None = None) -> None:
        errors.append({"code": code, "line": number, "message": message, "param": param})

    for number, text in enumerate(content.splitlines(), start=1):
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        if not isinstance(line, dict):
            error("invalid_json_line", number, "This line is not parseable as valid JSON.")
            continue
        if line.get("url") != ENDPOINT:
            message = f"The url of this request does not match the batch's endpoint {ENDPOINT}."
            error("url_mismatch", number, message, "url")
        elif line.get("custom_id") in seen:
            message = "The custom_id for this request is a duplicate of another request."
            error("duplicate_custom_id", number, message, "custom_id")
        elif not isinstance(line.get("custom_id"), str):
            error("invalid_request", number, "A request needs a custom_id string.", "custom_id")
        elif line.get("method") != "POST" or not isinstance(line.get("body"), dict):
            error("invalid_request", number, "A request needs method POST and a body.", "body")
        seen.add(line.get("custom_id"))
        lines.append(line)
    if not lines and not errors:
        error("empty_file", 0, "The batch input file is empty.")
    return lines, errors


def _no_file(body: JSON) -> JSON:
    message = f"No such File object: {body['input_file_id']}"
    return {"code": "file_not_found", "line": None, "message": message, "param": "input_file_id"}


def _not_run(line: JSON, code: str) -> JSON:
    """The error-file line of a request that was never executed."""
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": line["custom_id"],
        "response": None,
        "error": {"code": code, "message": _NOT_RUN[code]},
    }
