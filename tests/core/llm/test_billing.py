"""What a reply is billed: reported usage checked, or counted by moot (issue 29)."""

from __future__ import annotations

from moot.core.llm.billing import TEMPLATE_SLACK, bill
from moot.core.llm.tokens import count_message_tokens, count_tokens

MESSAGES = [{"role": "user", "content": "Should zoos be banned? Answer in a sentence."}]
TEXT = "Zoos should not be banned, because they fund conservation."


def usage(prompt: object = 20, completion: object = 12, cached: object = None) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": cached}


def test_plain_usage_is_billed_as_reported() -> None:
    billed = bill(usage(cached=5), MESSAGES, TEXT, 64)
    assert (billed.prompt, billed.completion, billed.cached_prompt) == (20, 12, 5)
    assert not billed.counted and billed.problem is None and not billed.longer_than_asked


def test_no_usage_and_half_usage_are_counted_by_moot() -> None:
    none = bill({}, MESSAGES, TEXT, 64)
    assert (none.prompt, none.completion) == (count_message_tokens(MESSAGES), count_tokens(TEXT))
    assert none.counted and none.problem is None
    half = bill(usage(completion=None), MESSAGES, TEXT, 64)
    assert (half.prompt, half.completion) == (20, count_tokens(TEXT)) and half.counted


def test_usage_that_cannot_be_true_is_counted_and_named() -> None:
    for reported, problem in [
        (usage(prompt=-400_000_000), "prompt_tokens -400000000"),
        (usage(completion=-1), "completion_tokens -1"),
        (usage(completion=2.5), "completion_tokens 2.5"),
        (usage(prompt=True), "prompt_tokens True"),
        (usage(prompt=10**9), "1000000000 prompt tokens"),
        (usage(completion=10_000_000), "10000000 completion tokens (max_tokens 64)"),
    ]:
        billed = bill(reported, MESSAGES, TEXT, 64)
        assert billed.counted and billed.problem is not None and problem in billed.problem
        assert billed.prompt == count_message_tokens(MESSAGES) and billed.completion > 0


def test_a_reply_longer_than_asked_is_billed_in_full_and_flagged() -> None:
    long_text = "evidence " * 500
    billed = bill(usage(completion=501), MESSAGES, long_text, 64)
    assert billed.completion == 501 and billed.longer_than_asked and billed.problem is None
    # reasoning tokens: above the visible text, within max_tokens, so possible
    hidden = bill(usage(completion=60 + TEMPLATE_SLACK), MESSAGES, TEXT, 64 + TEMPLATE_SLACK)
    assert hidden.problem is None and not hidden.longer_than_asked
    # counted by moot, whose tokenizer is not the server's: a quarter's leeway
    assert not bill({}, MESSAGES, "evidence " * 70, 64).longer_than_asked
    assert bill({}, MESSAGES, "evidence " * 90, 64).longer_than_asked
