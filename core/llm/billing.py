"""What one reply is billed: the usage its server reports, checked, or counted by moot.

The ledger and ``--budget`` are only as true as the token counts they are given. Servers get them
wrong in three ways (issue 29), and each is handled here, where every reply's usage is read:

- **No usage** (many proxies and self-hosted servers): the prompt and the reply are counted with
  moot's tokenizer (`moot.core.llm.tokens`, the one the budget's reservation counts with), and the
  reply is marked as counted, so the ledger says so and the budget still holds.
- **Usage that cannot be true**: counts that are not whole numbers of at least 0, a prompt of more
  tokens than its text has bytes, or a reply above ``max_tokens`` of more tokens than its text has
  bytes (no tokenizer makes more tokens than bytes; a chat template adds some, hence the slack).
  The tokens are counted by moot, and the reply is a failed attempt (retried, then a failure).
- **A reply longer than ``max_tokens`` asked**: billed as reported, and flagged, so the summary
  says so and the model layer reserves the longest such reply for that model's later requests.

Counting costs a tokenizer pass, so it happens only on those paths; a reply whose usage is plain
and within bounds costs a few comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moot.core.llm.tokens import count_message_tokens, count_tokens

#: Tokens a chat template and a server's own system prompt may add to a prompt (Llama-2's default
#: system prompt alone is about 100), on top of one token per byte of the messages.
TEMPLATE_SLACK = 1024


@dataclass(frozen=True)
class Bill:
    """The tokens one reply is billed for.

    Attributes:
        prompt: Prompt tokens.
        completion: Completion tokens.
        cached_prompt: Of the prompt tokens, those read from the provider's prompt cache.
        counted: moot counted the tokens: the server reported none, or none that could be true.
        problem: Why the reported usage cannot be true; the reply is then a failed attempt.
        longer_than_asked: The reply has more tokens than the ``max_tokens`` asked for.
    """

    prompt: int
    completion: int
    cached_prompt: int = 0
    counted: bool = False
    problem: str | None = None
    longer_than_asked: bool = False


def bill(
    usage: dict[str, Any], messages: list[dict[str, Any]], text: str, max_tokens: int | None
) -> Bill:
    """The bill of a reply `text` to `messages`, from the usage its server reported.

    Args:
        usage: ``prompt_tokens``, ``completion_tokens`` and ``cached_tokens`` as the server sent
            them, whatever their type; a missing one is absent or None.
        messages: The request's chat messages.
        text: The reply's text.
        max_tokens: The completion budget asked for, if any.
    """
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if prompt is None and completion is None:
        return _counted(messages, text, max_tokens)
    problem = _impossible(prompt, completion, messages, text, max_tokens)
    if problem is not None:
        return _counted(messages, text, max_tokens, problem)
    half = prompt is None or completion is None
    if half:  # moot counts the other half
        counted = _counted(messages, text, max_tokens)
        prompt = counted.prompt if prompt is None else prompt
        completion = counted.completion if completion is None else completion
    cached = usage.get("cached_tokens")
    cached = min(cached, prompt) if _whole(cached) and cached > 0 else 0
    longer = max_tokens is not None and completion > max_tokens
    return Bill(prompt, completion, cached, counted=half, longer_than_asked=longer)


def _counted(
    messages: list[dict[str, Any]], text: str, max_tokens: int | None, problem: str | None = None
) -> Bill:
    completion = count_tokens(text)
    # moot's tokenizer is not the server's: a quarter more before a counted reply is "longer"
    longer = max_tokens is not None and completion > max_tokens * 5 // 4
    return Bill(count_message_tokens(messages), completion, 0, True, problem, longer)


def _impossible(
    prompt: Any, completion: Any, messages: list[dict[str, Any]], text: str, max_tokens: int | None
) -> str | None:
    """Why reported counts cannot be true, or None when they can."""
    for name, value in (("prompt_tokens", prompt), ("completion_tokens", completion)):
        if value is not None and not (_whole(value) and value >= 0):
            return f"impossible usage: {name} {value!r}"
    if prompt is not None:
        most = sum(_bytes(m.get("content")) + 16 for m in messages) + TEMPLATE_SLACK
        if prompt > most:
            return f"impossible usage: {prompt} prompt tokens for a prompt of at most {most}"
    if completion is not None and max_tokens is not None and completion > max_tokens:
        most = _bytes(text) + TEMPLATE_SLACK
        if completion > most:
            return (
                f"impossible usage: {completion} completion tokens (max_tokens {max_tokens}) "
                f"for a reply of at most {most}"
            )
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bytes(content: Any) -> int:
    """An upper bound of the UTF-8 bytes of a message's content, without encoding it."""
    if isinstance(content, str):
        return 4 * len(content)
    if isinstance(content, list):  # content parts
        return sum(_bytes(part.get("text")) for part in content if isinstance(part, dict))
    return 0
