"""core/redaction.py: what moot never writes."""

from __future__ import annotations

import pytest

from moot.core.llm.spec import endpoint_list
from moot.core.redaction import REDACTED, redact, sending, without_sent_keys


def test_a_reply_loses_the_keys_sent_and_keeps_words_that_are_some_variable_s_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DB_PASSWORD", "password")  # a secret's name, an ordinary word's value
    sending("sk-sent-0123456789")
    sending("sk-sent-0123456789-longer")  # a key holding another goes out whole
    reply = "Bearer sk-sent-0123456789-longer, then sk-sent-0123456789; a password is a word."
    assert without_sent_keys(reply) == f"Bearer {REDACTED}, then {REDACTED}; a password is a word."
    assert "password" not in redact("the password")  # pages: every environment secret too


def test_the_password_of_an_endpoint_s_url_is_a_key_sent() -> None:
    endpoint_list("openai/m", "http://user:pw-in-the-url-42@gpu-0:8000/v1")
    assert without_sent_keys("echo pw-in-the-url-42") == f"echo {REDACTED}"
