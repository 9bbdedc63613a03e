"""Reading a server's reply, the one place every remote reply enters moot."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterator, Mapping
from typing import Any, NamedTuple

from moot.core.llm.failures import Transient, classify, where
from moot.core.llm.limits import HEADER_PREFIXES
from moot.core.llm.spec import ModelSpec, Reply
from moot.core.llm.structured import mended
from moot.core.redaction import without_sent_keys


class Answered(NamedTuple):
    """A response body, with the rate-limit headers of its response (`rate_limit_headers`)."""

    body: Any
    limits: dict[str, str] | None


async def request(
    sent: Awaitable[Any], spec: ModelSpec, api_base: str | None, key: str | None
) -> Reply:
    """Await one request and read its reply; a failure is classified (`classify`).

    `sent` gives the body, or an `Answered` body with its rate-limit headers.
    """
    try:
        response = await sent
    except Exception as exc:  # what the server caused is retried; a bug surfaces as itself
        raise classify(exc, spec, api_base, key) from None
    if isinstance(response, Answered):
        return read_reply(response.body, where(spec, api_base), response.limits)
    return read_reply(response, where(spec, api_base))


def rate_limit_headers(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The rate-limit headers of a response, lower-cased (`moot.core.llm.limits`); None: none."""
    found = {
        name.lower(): value
        for name, value in headers.items()
        if name.lower().startswith(HEADER_PREFIXES)
    }
    return found or None


def litellm_rate_limits(response: Any) -> dict[str, str] | None:
    """The rate-limit headers litellm kept of a response (`rate_limit_headers`); None: none.

    litellm keeps them in ``_hidden_params["additional_headers"]``: OpenAI's bare, and every
    header the provider sent as ``llm_provider-<name>`` (Anthropic's ``anthropic-ratelimit-*``).
    """
    kept = (getattr(response, "_hidden_params", None) or {}).get("additional_headers") or {}
    return rate_limit_headers({name.removeprefix("llm_provider-"): v for name, v in kept.items()})


def read_reply(response: Any, shown: str, limits: dict[str, str] | None = None) -> Reply:
    """The reply in a response body, read without trusting its shape.

    The body is the decoded JSON (the OpenAI transport) or the SDK's parsed object (litellm).
    A body without choices or a message (the SDKs parse any JSON without checking) is the
    server's fault, so retried. A lone surrogate is replaced by U+FFFD here, where every reply
    enters: it cannot be encoded, so the cache, the result logs and every output file would fail
    on it. It is a bad character in a readable reply, like a bad byte a decoder replaces, not a
    malformed reply: refused, it would come back the same at temperature 0 and fail for good.
    A key moot sent, echoed by the server, is taken out here too (`without_sent_keys`), for the
    same reason: nothing written after this point can hold it.
    """
    choices = _field(response, "choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = _field(choice, "message")
    text = _field(message, "content")
    if message is None or not isinstance(text, str | None):
        raise Transient(f"malformed response from {shown}: no choices or no message")
    usage = _field(response, "usage")
    finish = _field(choice, "finish_reason")
    return Reply(
        without_sent_keys(mended(text or "")),  # a server may echo a key
        finish if isinstance(finish, str) else None,
        {
            "prompt_tokens": _field(usage, "prompt_tokens"),
            "completion_tokens": _field(usage, "completion_tokens"),
            # prompt tokens a provider read from its prompt cache, at its cached-input price
            "cached_tokens": _field(_field(usage, "prompt_tokens_details"), "cached_tokens"),
        },
        limits=limits,
    )


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a JSON object, or ``value.name`` of a parsed one; None if missing."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file a server sent (a batch's results), one per line.

    A line that is not a JSON object is skipped, never trusted: its request then has no answer,
    and is asked again.
    """
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record
