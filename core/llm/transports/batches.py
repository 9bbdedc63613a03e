"""OpenAI's Batch API (and any server that speaks it), as `moot.core.llm.batch.BatchAPI`.

The requests go up as one JSONL file (``files.create(purpose="batch")``), then
``batches.create`` over it with a 24-hour window; ``batches.retrieve`` polls it; its output and
error files give each request's reply or failure, matched by ``custom_id`` (the request key:
64 hex characters), never by order, which is not kept. Every line's status is read: a batch's
counts may call a line completed whose status is not 200.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from moot.core.errors import ModelCallError
from moot.core.llm.batch import BatchState
from moot.core.llm.failures import Transient, classify, where
from moot.core.llm.spec import Reply
from moot.core.llm.transports.replies import json_objects, read_reply
from moot.core.redaction import redact

ENDPOINT = "/v1/chat/completions"
#: Statuses after which a batch changes no more (OpenAI's ``Batch.status``).
ENDED = ("completed", "failed", "expired", "cancelled")
#: A batch's validation failure that goes away by itself: ask its requests again later.
PASSING = ("token_limit_exceeded",)


class OpenAIBatches:
    """The Batch API of one OpenAI-compatible endpoint.

    Args:
        transport: The model's `OpenAI` transport: its endpoint, key and request bodies.
    """

    provider = "openai"

    def __init__(self, transport: Any) -> None:
        self.spec, self.api_base, self._key = transport.spec, transport.api_base, transport.key
        self.body = transport.body  # a batch line's body is the live request's, to the byte
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def submit(self, requests: dict[str, dict[str, Any]], intent: str) -> str:
        """Upload the requests as a JSONL file and create a batch over it; its id."""
        lines = (
            json.dumps({"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body})
            for key, body in requests.items()
        )
        data = ("\n".join(lines) + "\n").encode()
        client = self._sdk()
        try:
            uploaded = await client.files.create(file=("moot-batch.jsonl", data), purpose="batch")
            # no retry of its own: a create whose reply is lost is found by `find`, not made twice
            batch = await client.with_options(max_retries=0).batches.create(
                input_file_id=uploaded.id,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata={"moot_intent": intent},
            )
        except Exception as exc:
            raise self._failure(exc) from None
        return str(batch.id)

    async def find(self, intent: str) -> str | None:
        """The batch created with `intent` in its metadata, among the endpoint's batches."""
        try:
            async for batch in self._sdk().batches.list(limit=100):
                if (batch.metadata or {}).get("moot_intent") == intent:
                    return str(batch.id)
        except Exception as exc:
            raise self._failure(exc) from None
        return None

    async def state(self, batch_id: str) -> BatchState:
        """The batch as the provider describes it now."""
        try:
            batch = await self._sdk().batches.retrieve(batch_id)
        except Exception as exc:
            raise self._failure(exc) from None
        counts = batch.request_counts
        return BatchState(
            batch.id,
            batch.status,
            batch.status in ENDED,
            counts.total if counts else 0,
            counts.completed if counts else 0,
            counts.failed if counts else 0,
            batch,
        )

    async def results(self, state: BatchState, keys: list[str]) -> dict[str, Reply | Exception]:
        """Each request's reply or failure: its output and error files read line by line."""
        batch = state.detail
        if state.status == "failed":  # the file was refused as a whole: no request ran
            errors = list(batch.errors.data) if batch.errors and batch.errors.data else []
            said = "; ".join(f"{e.code}: {e.message}" for e in errors) or "no reason given"
            shown = f"batch {state.id} refused by {self._where}: {self._clean(said)}"
            if any(e.code in PASSING for e in errors):
                return dict.fromkeys(keys, Transient(shown))
            return dict.fromkeys(keys, ModelCallError(f"{self.spec.name}: {shown}"))
        outcomes: dict[str, Reply | Exception] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            try:
                content = await self._sdk().files.content(file_id)
            except Exception as exc:
                raise self._failure(exc) from None
            for line in json_objects(content.text):
                key, outcome = self._line(line, state.id)
                outcomes[key] = outcome
        return outcomes

    @property
    def _where(self) -> str:
        return where(self.spec, self.api_base)

    def _line(self, line: dict[str, Any], batch_id: str) -> tuple[str, Reply | Exception]:
        """One line of an output or error file: its request key and its reply or failure."""
        key, response, error = line.get("custom_id"), line.get("response"), line.get("error")
        status = (response or {}).get("status_code") or 0
        body = (response or {}).get("body")
        if status == 200:
            try:
                return key, read_reply(body, self._where)
            except Transient as exc:
                return key, exc
        inner = (body or {}).get("error") if isinstance(body, dict) else None
        said = (inner or error or {}).get("message") or (error or {}).get("code") or "no reason"
        code = (error or {}).get("code") or f"HTTP {status}"
        shown = f"{code} in batch {batch_id} from {self._where}: {self._clean(str(said))}"
        if not status or status in (408, 409, 429) or status >= 500:  # expired, cancelled, 5xx
            return key, Transient(shown, status or None)
        return key, ModelCallError(f"{self.spec.name}: {shown}", status)

    def _failure(self, exc: Exception) -> Exception:
        """An SDK failure of the batch endpoint, as a request's would be (`classify`)."""
        return classify(exc, self.spec, self.api_base, self._key)

    def _clean(self, text: str) -> str:
        return redact(" ".join(text.split())[:300], [self._key])

    def _sdk(self) -> Any:
        """The SDK's async client, one per event loop (connections die with their loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or loop is not self._loop:
            import openai

            self._client = openai.AsyncOpenAI(
                base_url=self.api_base,
                api_key=self._key or "EMPTY",
                max_retries=2,  # looking and reading are safe to repeat; creating is not
                timeout=self.spec.timeout,
            )
            self._loop = loop
        return self._client
