"""What moot never writes: the keys it sends, the environment's keys, the credentials in URLs.

Two cleaners, one for each kind of text moot writes:

- `redact` takes every known secret out of text: the value of every key moot sends (each is
  registered by `sending` where it is read: a model's API key, whatever its variable's name, the
  password of an endpoint's URL, a ``--router`` file's keys, the web search key, the Hub token)
  and of the environment's keys and tokens. Every page `moot view` writes goes through it. Model
  replies go through `without_sent_keys`, the keys moot sent alone, where they enter
  (`moot.core.llm.models`): a server that echoes its key puts it in no log, cache, dataset or
  page, and a reply's ordinary words are never taken for the value of some environment variable
  (``DB_PASSWORD=password``). It costs a substring test per key sent, on every reply.
- `scrub` is the one scrubber of records of options (a `moot run` manifest, a folder's claim, a
  card's command line, the CLI's error and retry lines): every URL in them shown as `public_url`
  shows it (no ``user:password@``, query values masked), then `redact`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse

#: What a secret becomes.
REDACTED = "[redacted]"
#: Values shorter than this are not taken for secrets: replacing them would garble ordinary text.
MIN_SECRET = 8
#: Environment variables whose values are secrets, by the end of their names.
SECRET_NAMES = ("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")
#: A URL inside text: a scheme, ``://``, and what follows up to a space, a comma or a quote,
#: without the punctuation that may end a sentence after it.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s,'\"<>]*[^\s,'\"<>.:;!?)]")

_sent: tuple[str, ...] = ()  # longest first, so a key holding another goes out whole


def sending(key: str | None) -> str | None:
    """`key`, remembered as a key this process sends: from now on `redact` takes it out.

    Called where a key is read to be sent, whatever the variable or file that held it.
    """
    global _sent
    if key and len(key) >= MIN_SECRET and key not in _sent:
        _sent = tuple(sorted({*_sent, key}, key=len, reverse=True))
    return key


def without_sent_keys(text: str) -> str:
    """`text` with every key this process sent as ``[redacted]`` (a model's reply)."""
    for key in _sent:
        if key in text:
            text = text.replace(key, REDACTED)
    return text


def known_secrets() -> list[str]:
    """Every key this process sent, and the environment's keys and tokens, longest first."""
    found = {v for k, v in os.environ.items() if k.upper().endswith(SECRET_NAMES)}
    return sorted({s for s in found | {*_sent} if len(s) >= MIN_SECRET}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each of `secrets` and of `known_secrets` as ``[redacted]``."""
    for secret in sorted({*filter(None, secrets), *known_secrets()}, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub(value: Any) -> Any:
    """A record of options (JSON-like) as moot may write it: URLs shown, secrets redacted.

    Every URL in a string (several in one, ``A,B``, too) becomes its `public_url`, then every
    known secret is redacted (`redact`); mappings and lists are scrubbed throughout, keys too.
    """
    secrets = known_secrets()
    return _scrubbed(value, secrets)


def _scrubbed(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        text = _URL.sub(lambda match: public_url(match.group()), value)
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text
    if isinstance(value, dict):
        return {_scrubbed(k, secrets): _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(item, secrets) for item in value]
    return value


def public_url(url: str) -> str:
    """`url` without the credentials a URL may embed.

    Its user and password (``https://user:password@host/...``) are dropped, its query's values
    (``?api-key=...``) masked. Every message, record, ledger and manifest that names an
    endpoint shows this form.
    """
    if "@" not in url and "?" not in url:
        return url
    try:
        parts = urlparse(url)
    except ValueError:  # an unclosed ``[`` of an IPv6 host: cut by hand
        scheme, _, rest = url.partition("://")
        host = rest.split("/", 1)[0].rpartition("@")[2]
        path = rest[len(rest.split("/", 1)[0]) :].split("?", 1)[0]
        return f"{scheme}://{host}{path}" + ("?***" if "?" in url else "")
    query = parse_qsl(parts.query, keep_blank_values=True)
    return parts._replace(
        netloc=parts.netloc.rpartition("@")[2],
        query=urlencode([(name, "***") for name, _ in query], safe="*"),
    ).geturl()


def url_secrets(url: str) -> list[str]:
    """What in `url` may be a credential (its password, its query's values), to scrub."""
    try:
        parts = urlparse(url)
    except ValueError:
        return [url]
    values = [value for _, value in parse_qsl(parts.query) if len(value) > 3]
    return [secret for secret in (parts.password, *values) if secret]
