"""Errors moot reports to users.

`MootError` and its subclasses are expected failures: the CLI prints their one-line message
and exits with code 2 (bad input, configuration or endpoint) without a traceback. A `WriteError`
(the machine could not keep a file) exits 1: what finished is kept and a rerun resumes. Anything
else is a bug.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path
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


class WriteError(Exception):
    """A file moot writes (a log, an output, the cache, the checkpoints) failed at the OS.

    A full disk, a read-only or unwritable folder, too many open files: not the user's input,
    and not a bug. What finished is kept (each record is fsynced as it is logged), so a rerun
    after the cause is fixed resumes; the CLI prints one line and exits 1.

    Args:
        path: The file (or folder) that could not be written.
        problem: The OS's or SQLite's words (``No space left on device``).
    """

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"cannot write {path}: {problem}")
        self.path, self.problem = path, problem


#: OS errors that say the machine cannot keep a file now, whatever the file: a full disk or
#: quota, a file over the size limit, a read-only file system, no file descriptor left, I/O.
ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.EIO}
)


def machine_failure(exc: BaseException) -> bool:
    """Whether `exc` says the machine stopped the run (exit 1), not the user's input (exit 2)."""
    return isinstance(exc, WriteError) or (
        isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS
    )


#: SQLite's primary result codes for the same (SQLITE_PERM, _READONLY, _IOERR, _FULL, _CANTOPEN).
_SQLITE_OS_CODES = frozenset({3, 8, 10, 13, 14})


def os_problem(exc: BaseException) -> str | None:
    """What went wrong at the OS, if `exc` is such a failure (an `OSError`, or SQLite's)."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    sqlite3 = sys.modules.get("sqlite3")  # not imported: no SQLite error can have been raised
    if sqlite3 is not None and isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in _SQLITE_OS_CODES:
            return str(exc)
    return None


@contextlib.contextmanager
def writing(path: object, *scratch: object, os_errors: bool = True) -> Iterator[None]:
    """Raise an OS failure while writing `path` as a `WriteError` naming it.

    The failures taken are SQLite's, and (unless not `os_errors`: a block whose other work is
    not this file's) `OSError`s about `path`, a file inside it, one of `scratch` (its temporary
    sibling), or no file at all (``write`` on a full disk). Any other error (reading an input,
    a bug) passes unchanged.
    """
    try:
        yield
    except Exception as exc:
        problem = os_problem(exc)
        if problem is None or (isinstance(exc, OSError) and not os_errors):
            raise
        if not _about(exc, path, *scratch):
            raise
        raise WriteError(path, problem) from exc


def _about(exc: Exception, *paths: object) -> bool:
    """Whether `exc` is about one of `paths` (or a file inside one), or the machine's limits.

    An `OSError` that names no file is taken only when its errno is the machine's (a ``write``
    on a full disk): a connection refused or a model that cannot load, raised while an output
    is being built, is not a failure to write it.
    """
    name = getattr(exc, "filename", None)
    if not isinstance(exc, OSError):
        return True
    if name is None:
        return exc.errno in ENVIRONMENT_ERRNOS
    named = os.path.abspath(os.fsdecode(name))
    for path in paths:
        folder = os.path.abspath(os.fspath(Path(path)))  # type: ignore[arg-type]
        if named == folder or named.startswith(folder + os.sep):
            return True
    return False


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


class BatchPending(Exception):
    """A request waits in a provider's batch that has not ended, and the run does not wait.

    ``--no-wait`` (`moot.core.llm.batch`): not a failure and not done. The run engine leaves
    the item unlogged, as a ``--budget`` stop does, and the command exits 0 saying how to
    collect: the same command again (or ``moot collect``) finds the batch and does not submit
    it again.
    """


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
