import json
import os
import subprocess
import sys

import pytest

from moot.core.llm import tokens
from moot.core.llm.tokens import count_message_tokens, count_tokens, encoding_available

needs_encoding = pytest.mark.skipif(
    not encoding_available(), reason="cl100k_base not available offline"
)


@needs_encoding
def test_count_tokens_matches_cl100k() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens("<|endoftext|>") > 1  # special tokens are plain text, not an error


@needs_encoding
def test_count_message_tokens_follows_openai_accounting() -> None:
    # 3 framing + "user" (1) + "hello world" (2) + 3 reply priming
    assert count_message_tokens([{"role": "user", "content": "hello world"}]) == 9
    named = [{"role": "user", "content": "hello world", "name": "bob"}]
    assert count_message_tokens(named) == 9 + count_tokens("bob") + 1
    assert count_message_tokens([]) == 3


@needs_encoding
def test_content_parts_and_missing_content() -> None:
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}]
    as_parts = count_message_tokens([{"role": "user", "content": parts}])
    assert as_parts == 3 + 1 + count_tokens("hello") + count_tokens(" world") + 3
    assert count_message_tokens([{"role": "assistant", "content": None}]) == 3 + 1 + 3


def test_fallback_approximation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_encoding", lambda: None)
    count_tokens.cache_clear()  # counts are cached per text: none made with the encoding
    try:
        assert not encoding_available()
        assert count_tokens("abcdefghi") == 3  # ceil(9 / 4)
        assert count_tokens("") == 0
        assert count_message_tokens([{"role": "user", "content": "abcd"}]) == 3 + 1 + 1 + 3
    finally:
        count_tokens.cache_clear()  # nor approximations kept for later tests


def _probe(env: dict[str, str]) -> dict[str, object]:
    code = (
        "import json, os\n"
        "from moot.core.llm.tokens import count_tokens, encoding_available\n"
        "n = count_tokens('abcdefghi')\n"
        "print(json.dumps({'available': encoding_available(), 'n': n,"
        " 'dir': os.environ.get('TIKTOKEN_CACHE_DIR')}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@needs_encoding
def test_uses_litellm_bundled_cache_when_unset() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    result = _probe(env)
    assert result["available"] is True
    assert str(result["dir"]).endswith(os.path.join("litellm_core_utils", "tokenizers"))


def test_user_cache_dir_is_respected_and_never_downloaded(tmp_path) -> None:
    result = _probe({**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)})
    assert result == {"available": False, "n": 3, "dir": str(tmp_path)}
    assert list(tmp_path.iterdir()) == []  # nothing fetched into the empty cache
