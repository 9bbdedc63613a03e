"""LangChain interop: a moot model spec as a LangChain chat model.

moot's own calls never go through it: `ModelClient` talks to OpenAI-compatible servers through
``openai.AsyncOpenAI`` with one retry loop, the request cache, the ledger and the budget. Users
who compose their own LangGraph graphs over the same servers get a ``ChatOpenAI`` built from the
same spec (endpoint, key, timeout), so one spec string names a model everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from moot.core.errors import ConfigError
from moot.core.llm.spec import ModelSpec, resolve_api_key

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI


def chat_model(spec: ModelSpec, **options: Any) -> ChatOpenAI:
    """A LangChain ``ChatOpenAI`` for an OpenAI-compatible model spec.

    Args:
        spec: An ``openai/...`` (or other OpenAI-compatible) spec with one endpoint, e.g.
            ``parse_spec("openai/llama3", api_base="http://127.0.0.1:8000/v1")``.
        **options: Further ``ChatOpenAI`` fields (``temperature``, ``max_tokens``, ...).

    Returns:
        A chat model whose key comes from the spec's key variable, as moot's own calls do.

    Raises:
        ConfigError: The spec is not an OpenAI-compatible server with one endpoint, or its key
            variable is missing.
    """
    if not spec.transport_class.openai_api or len(spec.endpoints) > 1 or spec.router is not None:
        raise ConfigError(
            f"{spec.name}: chat_model needs an OpenAI-compatible model with one endpoint"
        )
    from langchain_openai import ChatOpenAI

    settings: dict[str, Any] = {"timeout": spec.timeout, **options}
    return ChatOpenAI(
        model=spec.model,
        base_url=spec.api_base,
        api_key=resolve_api_key(spec) or "EMPTY",  # a server without keys still wants the header
        **settings,
    )
