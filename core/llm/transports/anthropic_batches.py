"""Anthropic's Message Batches API, as `moot.core.llm.batch.BatchAPI` (``anthropic/...`` models).

Anthropic documents it as a REST API (https://platform.claude.com/docs/en/build-with-claude/batch-processing;
https://docs.anthropic.com/en/api/creating-message-batches, .../retrieving-message-batches and
.../retrieving-message-batch-results). litellm 1.106 cannot create Anthropic batches
(``NotImplementedError``; BerriAI/litellm#17265) and the ``anthropic`` SDK is not a dependency,
so moot speaks the REST API through httpx, with the headers litellm sends live (``x-api-key``,
``anthropic-version``, any ``anthropic-beta`` its request needs).

``POST /v1/messages/batches`` takes the requests inline, ``[{custom_id, params}]``: the custom id
is the request key (64 hex characters fit ``^[a-zA-Z0-9_-]{1,64}$``), the params are the body
litellm sends live for the same call (its own Anthropic request transformation), so a batch's
replies are a live run's. ``GET /v1/messages/batches/{id}`` polls it until its
``processing_status`` is ``ended``; its ``results_url`` then gives one JSONL line per request,
matched by custom id (the order is not kept) and read with litellm's own response
transformation (text, ``stop_reason`` as ``finish_reason``, usage), as a live reply is.

Anthropic batches carry no metadata, so `find` finds none: a kill between the journal's intent
and the create's reply may submit that batch again (the API has no idempotency key either).
"""

from __future__ import annotations

import asyncio
import copy
import os
from typing import Any

from moot.core.errors import ModelCallError
from moot.core.llm.batch import BatchState
from moot.core.llm.failures import Transient, classify, where
from moot.core.llm.spec import ModelSpec, Reply
from moot.core.llm.transports.replies import json_objects, read_reply
from moot.core.redaction import redact

#: Where litellm sends Anthropic requests without an ``api_base`` (``/v1/messages`` appended).
ANTHROPIC = "https://api.anthropic.com"
VERSION = "2023-06-01"
#: An ``errored`` result of these types was the provider's trouble: asked again (else final).
PASSING = ("api_error", "overloaded_error", "rate_limit_error")
#: Looks at a batch (retrieve, results) tried this often: they are safe to repeat.
READS = 3


class AnthropicBatches:
    """The Message Batches API of one Anthropic endpoint.

    Args:
        spec: The ``anthropic/...`` model.
        api_base: Its endpoint as litellm is given it (None: ``ANTHROPIC_API_BASE`` or
            ``ANTHROPIC_BASE_URL``, else Anthropic's); a trailing ``/v1/messages`` is litellm's.
        key: The key litellm is given (None: litellm's own ``ANTHROPIC_API_KEY``).
    """

    provider = "anthropic"

    def __init__(self, spec: ModelSpec, api_base: str | None, key: str | None) -> None:
        self.spec, self.api_base = spec, api_base
        self._key = key or os.environ.get("ANTHROPIC_API_KEY")
        base = (
            api_base
            or os.environ.get("ANTHROPIC_API_BASE")
            or os.environ.get("ANTHROPIC_BASE_URL")
            or ANTHROPIC
        )
        self._url = base.rstrip("/").removesuffix("/v1/messages") + "/v1/messages/batches"
        self._betas: set[str] = set()  # ``anthropic-beta`` features its requests need
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def body(self, messages: list[dict[str, str]], params: dict[str, Any]) -> dict[str, Any]:
        """The body litellm sends live for this call: a batch line's ``params``.

        The steps of litellm's ``acompletion`` for Anthropic: its parameters mapped
        (``get_optional_params``, unsupported ones dropped), ``json_mode`` kept back (litellm
        reads replies with it, never sends it), then `AnthropicConfig`'s headers and request.
        """
        from moot.core.llm.litellm_import import litellm

        # isort: split
        from litellm.anthropic_beta_headers_manager import update_request_with_filtered_beta

        model = self.spec.model
        optional = litellm.get_optional_params(
            model=model,
            custom_llm_provider="anthropic",
            drop_params=True,
            messages=messages,
            **params,
        )
        optional.pop("json_mode", None)
        optional["is_vertex_request"] = False
        config = litellm.AnthropicConfig()
        sent = copy.deepcopy(messages)
        headers = config.validate_environment(
            headers={},
            model=model,
            messages=sent,
            optional_params=optional,
            litellm_params={},
            api_key=self._key or "",
            api_base=None,
        )
        body = config.transform_request(model, sent, optional, {}, headers)
        headers, body = update_request_with_filtered_beta(headers, body, "anthropic")
        self._betas.update(b for b in headers.get("anthropic-beta", "").split(",") if b)
        return body

    async def submit(self, requests: dict[str, dict[str, Any]], intent: str) -> str:
        """Create one batch of the requests (request key → params); its id."""
        lines = [{"custom_id": key, "params": params} for key, params in requests.items()]
        # no retry of its own: a create whose reply is lost would make a second batch
        batch = await self._call("POST", self._url, {"requests": lines}, tries=1)
        return str(batch.json()["id"])

    async def find(self, intent: str) -> str | None:
        """None: Anthropic batches carry no metadata to tell a batch by."""
        return None

    async def state(self, batch_id: str) -> BatchState:
        """The batch as Anthropic describes it now (its counts stay 0 until it ends)."""
        batch = (await self._call("GET", f"{self._url}/{batch_id}")).json()
        counts = batch.get("request_counts") or {}
        failed = sum(counts.get(name) or 0 for name in ("errored", "canceled", "expired"))
        succeeded = counts.get("succeeded") or 0
        status = str(batch.get("processing_status"))
        total = succeeded + failed + (counts.get("processing") or 0)
        return BatchState(batch_id, status, status == "ended", total, succeeded, failed, batch)

    async def results(self, state: BatchState, keys: list[str]) -> dict[str, Reply | Exception]:
        """Each request's reply or failure, from the batch's results file."""
        # always the endpoint's own results: a `results_url` elsewhere would be sent the key
        content = (await self._call("GET", f"{self._url}/{state.id}/results")).text
        return {
            record.get("custom_id"): self._result(record.get("result"), state.id)
            for record in json_objects(content)
        }

    @property
    def _where(self) -> str:
        return where(self.spec, self.api_base)

    def _result(self, result: Any, batch_id: str) -> Reply | Exception:
        """One request's result: its reply, or why it has none."""
        result = result if isinstance(result, dict) else {}
        kind = result.get("type")
        if kind == "succeeded":
            try:
                return read_reply(_as_litellm(result.get("message")), self._where)
            except Transient as exc:
                return exc
        if kind == "errored":
            error = (result.get("error") or {}).get("error") or {}
            code = str(error.get("type") or "error")
            said = self._clean(str(error.get("message") or "no reason given"))
            shown = f"{code} in batch {batch_id} from {self._where}: {said}"
            if code in PASSING:
                return Transient(shown)
            return ModelCallError(f"{self.spec.name}: {shown}")
        # expired or canceled: never run, asked again
        return Transient(f"{kind or 'no result'} in batch {batch_id} from {self._where}")

    async def _call(self, method: str, url: str, payload: Any = None, tries: int = READS) -> Any:
        """One request to the API; its failure as a live request's would be (`classify`)."""
        import httpx
        import openai

        headers = {"anthropic-version": VERSION, **({"x-api-key": self._key} if self._key else {})}
        if self._betas and method == "POST":
            headers["anthropic-beta"] = ",".join(sorted(self._betas))
        for attempt in range(tries):
            try:
                response = await self._http().request(method, url, json=payload, headers=headers)
            except httpx.TimeoutException:
                failure: Exception = Transient(
                    f"request to {self._where} timed out after {self.spec.timeout:g}s"
                )
            except httpx.TransportError:
                failure = Transient(f"cannot connect to {self._where}")
            else:
                if response.is_success:
                    return response
                try:
                    body = response.json()
                except ValueError:
                    body = None
                error = openai.APIStatusError(response.reason_phrase, response=response, body=body)
                failure = classify(error, self.spec, self.api_base, self._key)
            if not isinstance(failure, Transient) or attempt + 1 == tries:
                raise failure
            await asyncio.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")

    def _clean(self, text: str) -> str:
        return redact(" ".join(text.split())[:300], [self._key])

    def _http(self) -> Any:
        """An httpx client, one per event loop (connections die with their loop)."""
        loop = asyncio.get_running_loop()
        if self._client is None or loop is not self._loop:
            import httpx

            self._client = httpx.AsyncClient(timeout=self.spec.timeout)
            self._loop = loop
        return self._client


def _as_litellm(message: Any) -> Any:
    """An Anthropic message as litellm's live call reads it: its `ModelResponse`.

    JSON mode is on: litellm turns its ``json_tool_call`` tool use (moot sends no tools of its
    own) into the reply's text, as it does for a live call that asked for a response format.
    """
    import httpx

    from moot.core.llm.litellm_import import litellm

    if not isinstance(message, dict):
        return None
    try:
        return litellm.AnthropicConfig().transform_parsed_response(
            completion_response=dict(message),
            raw_response=httpx.Response(200),
            model_response=litellm.ModelResponse(),
            json_mode=True,
        )
    except (KeyError, TypeError, ValueError, AttributeError):  # not a message: read_reply says
        return None
