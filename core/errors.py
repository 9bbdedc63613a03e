"""Errors moot reports to users.

`MootError` and its subclasses are expected failures: the CLI prints their one-line message
and exits with code 2 (bad input, configuration or endpoint) without a traceback. Anything
else is a bug.
"""

from __future__ import annotations

from typing import Any


class MootError(Exception):
    """A failure caused by the user's input, configuration or environment (exit code 2)."""


class InputError(MootError):
    """A problem in an input file, naming the file, the record and the problem.

    Args:
        path: The file that holds the problem.
        problem: What is wrong, in a few words.
        record: Which record, as the user would look for it (``line 3``, ``index 0``, an id).

    Example:
        >>> str(InputError("topics.jsonl", "empty topic", "line 3"))
        'topics.jsonl, line 3: empty topic'
    """

    def __init__(self, path: object, problem: str, record: object | None = None) -> None:
        where = f"{path}" if record is None else f"{path}, {record}"
        super().__init__(f"{where}: {problem}")
        self.path, self.problem, self.record = path, problem, record


class ConfigError(MootError):
    """An invalid option, model spec, or missing credential."""


class EndpointError(MootError):
    """A model endpoint that cannot be reached or refuses every request."""


class ModelCallError(Exception):
    """A model call that failed for good (after any retries).

    Args:
        message: What happened, never containing credentials.
        status: The HTTP status, if the server answered.
        retryable: Whether the failure was of a kind that is retried (429, 5xx, timeout).
    """

    def __init__(self, message: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status, self.retryable = status, retryable


class ContextWindowExceeded(ModelCallError):
    """The prompt does not fit the model's context window (never retried)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=400, retryable=False)


class BudgetReached(Exception):
    """``--budget`` refused a paid call: sending it could pass the budget.

    Not a `ModelCallError`: the item is not failed but not done, and a rerun with a larger
    budget does it. The run engine stops handing out items; the CLI exits with code 3.

    Args:
        spent: USD paid so far.
        budget: The budget, in USD.
    """

    def __init__(self, spent: float, budget: float) -> None:
        super().__init__(f"budget reached: spent ${spent:.4f} of ${budget:.4f}")
        self.spent, self.budget = spent, budget


def json_type(value: Any) -> str:
    """How messages name a JSON value's type: "text", "a number", "a list", "null" ...

    Example:
        >>> f"'topic' must be text, got {json_type(5)}"
        "'topic' must be text, got a number"
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, float):
        return "a decimal number"  # so "must be an integer, got ..." reads right
    return {str: "text", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
