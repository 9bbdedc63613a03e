"""What a failed model call was: the server's or the reply's fault (retried), or not.

`classify` sorts what a client raised. Only what the server or its reply caused is `Transient`
(timeouts, lost connections, 408/409/429/5xx, a body that is not JSON); other HTTP errors give up
at once; any other exception (a ``TypeError`` of our own, say) is a bug and is left as it is, so it
surfaces with its traceback instead of being retried as a "malformed reply".
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

from moot.core.errors import ConfigError, ContextWindowExceeded, ModelCallError, MootError
from moot.core.llm.spec import ModelSpec
from moot.core.redaction import public_url, redact, url_secrets


class Transient(Exception):
    """A failure worth retrying; `retry_after` is the server's requested wait, if any."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def where(spec: ModelSpec, api_base: str | None) -> str:
    """The endpoint as messages show it: its URL without credentials, else the provider."""
    return public_url(api_base) if api_base else spec.provider


def classify(exc: Exception, spec: ModelSpec, api_base: str | None, key: str | None) -> Exception:
    """Map a client exception to `Transient` (retry), a `MootError` (give up), or itself (a bug).

    Args:
        exc: What the client raised while sending a request or reading its response.
        spec: The model called.
        api_base: Its endpoint, if any.
        key: The API key sent, scrubbed from any message.
    """
    import aiohttp
    import openai

    shown = where(spec, api_base)
    urls = [*spec.endpoints, *([api_base] if api_base else [])]
    secrets = [key, *(secret for url in urls for secret in url_secrets(url))]
    secrets += spec.router.secrets() if spec.router is not None else []

    def clean(text: str) -> str:  # an SDK message must never carry a secret into a log
        return redact(" ".join(str(text).split())[:300], secrets)

    if isinstance(exc, ModelCallError | Transient | MootError):
        return exc
    if isinstance(exc, openai.APITimeoutError | TimeoutError):  # TimeoutError: our deadline
        return Transient(f"request to {shown} timed out after {spec.timeout:g}s")
    # aiohttp's: moot's own HTTP client (`transports.http`) refused, cut off or sent garbage
    if isinstance(exc, openai.APIConnectionError | aiohttp.ClientError):
        return Transient(f"cannot connect to {shown}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = clean(_error_message(exc))
        if status in (408, 409, 429) or status >= 500:
            return Transient(f"HTTP {status} from {shown}: {message}", status, _retry_after(exc))
        if _is_context_error(exc, message):
            return ContextWindowExceeded(f"{spec.name}: context window exceeded: {message}")
        if status in (401, 403):  # every later call would fail the same way: stop the run
            return ConfigError(
                f"{spec.name}: authentication failed at {shown} (HTTP {status}); check the API key"
            )
        return ModelCallError(f"{spec.name}: HTTP {status} from {shown}: {message}", status)
    # the SDK decodes the body with json.loads: a body cut short or not JSON at all
    if isinstance(
        exc, json.JSONDecodeError | UnicodeDecodeError | openai.APIResponseValidationError
    ):
        return Transient(f"malformed response from {shown}: {clean(type(exc).__name__)}")
    return exc


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", exc))


def _is_context_error(exc: Any, message: str) -> bool:
    code = getattr(exc, "code", None)
    if code == "context_length_exceeded" or type(exc).__name__ == "ContextWindowExceededError":
        return True
    lowered = message.lower()
    return "context length" in lowered or "context window" in lowered


def _retry_after(exc: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or HTTP date), if sent."""
    headers = getattr(exc, "litellm_response_headers", None)  # litellm keeps them here
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None
