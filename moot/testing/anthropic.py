"""Anthropic's Messages API shapes, as the scripted server speaks them.

The server answers an Anthropic request (``POST /v1/messages``, a Message Batches request's
``params``) as the chat request with the same contents (`chat_body`), then writes that answer
in Anthropic's shape: a message (`message`) or an error (`error`). So rules, faults and the
derived replies apply to both APIs alike.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

JSON = dict[str, Any]

#: Anthropic's error type for an HTTP status (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
#: The tool litellm asks for when a request wants JSON (its ``RESPONSE_FORMAT_TOOL_NAME``).
JSON_TOOL = "json_tool_call"


def chat_body(params: JSON | None) -> JSON | None:
    """The chat request with the same contents as an Anthropic request (None: not one).

    The system prompt comes first; text blocks are joined; ``stop_sequences`` is ``stop``;
    ``output_format`` or litellm's JSON tool is a ``json_schema`` response format.
    """
    if not isinstance(params, dict) or not isinstance(params.get("messages"), list):
        return None
    system = params.get("system")
    messages = [{"role": "system", "content": _text(system)}] if system else []
    for message in params["messages"]:
        if isinstance(message, dict):
            messages.append({"role": message.get("role"), "content": _text(message.get("content"))})
    body: JSON = {"model": params.get("model"), "messages": messages}
    for name in ("temperature", "max_tokens"):
        if name in params:
            body[name] = params[name]
    if params.get("stop_sequences"):
        body["stop"] = params["stop_sequences"]
    schema = (params.get("output_format") or {}).get("schema")
    tool = _json_tool(params)
    if schema is None and tool is not None:
        schema = tool.get("input_schema") or {}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
    return body


def message(completion: JSON, params: JSON) -> JSON:
    """A chat completion's reply to Anthropic request `params` as an Anthropic message."""
    choices = completion.get("choices") or [{}]
    text = (choices[0].get("message") or {}).get("content") or ""
    content: list[JSON] = [{"type": "text", "text": text}] if choices[0] else []
    if content and _json_tool(params) is not None:  # litellm's JSON tool: the reply is its input
        content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": JSON_TOOL}]
        content[0]["input"] = json.loads(text)
    finish = choices[0].get("finish_reason")
    reply: JSON = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": content,
        "stop_reason": "max_tokens" if finish == "length" else "end_turn",
        "stop_sequence": None,
    }
    usage = completion.get("usage")
    if usage is not None:
        reply["usage"] = {
            "input_tokens": usage["prompt_tokens"],
            "output_tokens": usage["completion_tokens"],
        }
    return reply


def error(status: int, body: JSON) -> JSON:
    """An OpenAI-style error body as Anthropic's."""
    message = (body.get("error") or {}).get("message") or "error"
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _json_tool(params: JSON) -> JSON | None:
    tools = [t for t in params.get("tools") or [] if isinstance(t, dict)]
    return next((t for t in tools if t.get("name") == JSON_TOOL), None)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return content if isinstance(content, str) else ""
