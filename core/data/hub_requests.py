"""Requests to the Hugging Face Hub, each step bounded in time.

huggingface_hub's shared HTTP client has no timeout of its own: a Hub, or a proxy, that accepted
the connection and never answered held a push, or a hub dataset's download, for ever (a finished
run's push hung past the run). Every place moot reaches the Hub calls `bound_hub_requests` first.
"""

from __future__ import annotations

import os

from moot.core.errors import ConfigError

#: Seconds a request to the Hub may go without progress, by default (``MOOT_HUB_TIMEOUT``).
HUB_TIMEOUT = 60.0


def hub_timeout() -> float:
    """Seconds a request to the Hub may go without progress: ``MOOT_HUB_TIMEOUT``, else 60.

    Raises:
        ConfigError: The variable is not a positive number.
    """
    value = os.environ.get("MOOT_HUB_TIMEOUT", "")
    try:
        seconds = float(value) if value else HUB_TIMEOUT
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"MOOT_HUB_TIMEOUT must be a positive number of seconds, got {value!r}")
    return seconds


def bound_hub_requests() -> None:
    """Give each step of every request of huggingface_hub's client `hub_timeout` seconds.

    A step is connecting, sending a part of the body or reading one, so a large transfer that
    keeps moving is never cut short. huggingface_hub retries a step that timed out a few times.

    Raises:
        ConfigError: A bad ``MOOT_HUB_TIMEOUT``.
    """
    import httpx
    from huggingface_hub.utils import get_session

    get_session().timeout = httpx.Timeout(hub_timeout())
