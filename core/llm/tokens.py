"""Offline token counting with tiktoken's ``cl100k_base`` encoding.

The encoding file is never downloaded: litellm ships tiktoken's cache files, so we point
``TIKTOKEN_CACHE_DIR`` at that folder (unless the user already chose a cache directory) and
only ask tiktoken for the encoding when its cached file is present. Otherwise we fall back to a
deterministic approximation, so counting works everywhere and never touches the network.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tiktoken

__all__ = ["count_message_tokens", "count_tokens", "encoding_available"]

ENCODING_NAME = "cl100k_base"
# tiktoken names cache files by the SHA-1 of the URL it would download the encoding from.
_ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_TOKENS_PER_MESSAGE = 3  # <|start|>{role/name}\n{content}<|end|>\n
_TOKENS_PER_NAME = 1
_REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>


def _litellm_tokenizer_dir() -> Path | None:
    """Find litellm's bundled tiktoken cache without importing litellm (slow, may go online)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


@functools.cache
def _encoding() -> tiktoken.Encoding | None:
    """Load ``cl100k_base`` once, or return None when it is not available offline."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        bundled = _litellm_tokenizer_dir()
        if bundled is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if not cache_dir:
        return None  # no cache (or caching disabled): tiktoken would download the file
    cached = Path(cache_dir) / hashlib.sha1(_ENCODING_URL.encode()).hexdigest()
    if not cached.is_file():
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING_NAME)
    except Exception:  # any failure (missing package, corrupt file) means "approximate"
        return None


def encoding_available() -> bool:
    """Tell whether exact ``cl100k_base`` counts are used.

    Returns:
        True if the tiktoken encoding loaded, False if counts are approximations.
    """
    return _encoding() is not None


# cached: a prompt is counted where it is built (a judge's window check) and again where it is
# sent; a hit costs a hash and a compare, encoding ~1 ms per thousand tokens
@functools.lru_cache(maxsize=256)
def count_tokens(text: str) -> int:
    """Count the tokens of ``text`` with the ``cl100k_base`` encoding.

    Special-token strings such as ``<|endoftext|>`` are counted as ordinary text. If the
    encoding cannot be loaded offline, the count is the deterministic approximation
    ``ceil(len(text) / 4)`` instead.

    Args:
        text: The text to count.

    Returns:
        The number of tokens.
    """
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return math.ceil(len(text) / 4)
    return len(encoding.encode(text, disallowed_special=()))


def _content_text(content: Any) -> Iterable[str]:
    """Yield the countable text of a message field (string, content parts, or other JSON)."""
    if content is None:
        return
    if isinstance(content, str):
        yield content
    elif isinstance(content, list) and all(isinstance(part, dict) for part in content):
        yield from (part["text"] for part in content if isinstance(part.get("text"), str))
    else:
        yield json.dumps(content, sort_keys=True)


def count_message_tokens(messages: list[dict[str, Any]]) -> int:
    """Count the prompt tokens of a chat request the way OpenAI bills chat models.

    Each message costs 3 tokens of framing plus the tokens of its fields (role, content,
    name, ...; a ``name`` costs one extra token), and the reply priming costs 3 more. Content
    given as a list of parts counts its text parts only. Counts are approximate when the
    encoding is unavailable (see `count_tokens`).

    Args:
        messages: OpenAI-style chat messages, e.g. ``[{"role": "user", "content": "Hi"}]``.

    Returns:
        The number of prompt tokens.
    """
    total = _REPLY_PRIMING
    for message in messages:
        total += _TOKENS_PER_MESSAGE
        for key, value in message.items():
            total += sum(count_tokens(text) for text in _content_text(value))
            if key == "name":
                total += _TOKENS_PER_NAME
    return total
