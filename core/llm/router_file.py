"""``--router FILE``: a litellm Router config naming the endpoints of a model, checked up front.

The file holds `litellm.Router`'s own arguments (the ``model_list`` of deployments, the routing
strategy, the cooldown), so a config written for litellm reads the same here. A model spec uses
the deployments whose ``model_name`` is the spec's name (``openai/llama-3-8b``); each must name
its server (``api_base``), which is how moot checks it, shows it and counts its calls.

What moot does itself is refused rather than silently overridden: retries (moot's retry loop is
the one: a retry count other than 0), deadlines (``--timeout``), caching (moot's request cache),
fallbacks to another model (the ledger would name a model that did not answer), per-deployment
parallel-request limits (litellm refuses a request over one with a 429 instead of queueing it)
and anything reaching another service (Redis). A deployment's ``rpm``/``tpm`` are taken, as
moot's limit for the model (`RouterGroup.limit`), not litellm's. Keys may be litellm's
``os.environ/NAME`` references; a referenced variable must be set, and no value is ever shown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from moot.core.errors import ConfigError, InputError
from moot.core.llm.spec import RouterGroup, endpoint_list
from moot.core.loader import Unreadable, load_yaml
from moot.core.redaction import sending

#: litellm's routing strategies that need nothing but this process.
STRATEGIES = Literal[
    "simple-shuffle",
    "least-busy",
    "usage-based-routing",
    "usage-based-routing-v2",
    "latency-based-routing",
    "cost-based-routing",
]

#: litellm's prefix for a value read from the environment.
ENV_PREFIX = "os.environ/"

#: Keys a litellm config may hold that moot refuses, and why.
REFUSED = {
    "num_retries": "moot retries each call itself (--max-retries): give 0 or leave it out",
    "max_retries": "moot retries each call itself (--max-retries): give 0 or leave it out",
    "retry_after": "moot's retry loop waits itself (Retry-After, backoff)",
    "timeout": "moot's --timeout is each request's deadline",
    "stream_timeout": "moot's --timeout is each request's deadline",
    "fallbacks": "another model would answer, and the ledger would name the wrong one",
    "context_window_fallbacks": "another model would answer, and the ledger would name the "
    "wrong one",
    "content_policy_fallbacks": "another model would answer, and the ledger would name the "
    "wrong one",
    "default_fallbacks": "another model would answer, and the ledger would name the wrong one",
    "cache_responses": "moot's request cache is the one (--cache, --no-cache)",
    "caching_groups": "moot's request cache is the one (--cache, --no-cache)",
    "max_parallel_requests": "litellm refuses a request over it (HTTP 429) instead of queueing "
    "it; use --max-concurrency",
    "default_max_parallel_requests": "litellm refuses a request over it (HTTP 429) instead of "
    "queueing it; use --max-concurrency",
    "model_info": "moot numbers the deployments itself",
}


class _Params(BaseModel):
    """A deployment's ``litellm_params``: where and how to send its requests."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1)
    api_base: str = Field(min_length=1)
    api_key: str | None = None
    api_version: str | None = None
    organization: str | None = None
    weight: float | None = Field(default=None, gt=0)
    rpm: int | None = Field(default=None, ge=1)
    tpm: int | None = Field(default=None, ge=1)
    max_retries: Literal[0] | None = None
    num_retries: Literal[0] | None = None


class _Deployment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model_name: str = Field(min_length=1)
    litellm_params: _Params


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model_list: list[_Deployment] = Field(min_length=1)
    routing_strategy: STRATEGIES = "simple-shuffle"
    routing_strategy_args: dict[str, Any] | None = None
    allowed_fails: int | None = Field(default=None, ge=0)
    cooldown_time: float | None = Field(default=None, gt=0)
    num_retries: Literal[0] | None = None


def load_router(path: Path, name: str) -> RouterGroup:
    """The deployments of model `name` in the Router config `path`, and its settings.

    Raises:
        InputError: The file cannot be read, holds a key moot does not accept (named, with
            why), a bad value, an unset ``os.environ/`` variable, or no deployment of `name`.
    """
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read router config: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:
        raise InputError(path, f"cannot read router config: {exc.problem}", exc.place) from None
    if not isinstance(raw, dict):
        raise InputError(path, "expected a litellm Router config: a mapping with model_list")
    try:
        config = _Config.model_validate(raw)
    except ValidationError as exc:
        raise InputError(path, _problem(exc)) from None
    deployments = []
    for index, deployment in enumerate(config.model_list):
        if deployment.model_name != name:
            continue
        params = deployment.litellm_params.model_dump(exclude_none=True)
        if "," in params["api_base"]:  # a list on the command line; here each has its own
            where = f"model_list.{index}.litellm_params.api_base"
            raise InputError(path, f"{where}: one URL per deployment (give each its own)")
        for key, value in params.items():
            if isinstance(value, str) and value.startswith(ENV_PREFIX):
                var = value.removeprefix(ENV_PREFIX)
                if not os.environ.get(var):
                    where = f"model_list.{index}.litellm_params.{key}"
                    raise InputError(path, f"{where}: {var} is not set")
                params[key] = os.environ[var]
        sending(params.get("api_key"))  # sent with its requests: never written
        deployments.append(params)
    if not deployments:
        known = ", ".join(sorted({d.model_name for d in config.model_list}))
        raise InputError(path, f"no deployment has model_name {name!r} (it has: {known})")
    try:
        endpoint_list(name, [str(params["api_base"]) for params in deployments], flag="api_base")
    except ConfigError as exc:  # not a URL, or one server twice (shown without credentials)
        raise InputError(path, str(exc)) from None
    settings = config.model_dump(exclude_none=True, exclude={"model_list", "num_retries"})
    return RouterGroup(str(path), name, tuple(deployments), settings)


def _problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as ``key.path: what is wrong`` (never the value)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "the file"
    key = str(error["loc"][-1]) if error["loc"] else ""
    if key in REFUSED:
        return f"{where}: not accepted: {REFUSED[key]}"
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key"
    if error["type"] == "missing":
        return f"{where}: missing"
    return f"{where}: {error['msg'].lower()}"
