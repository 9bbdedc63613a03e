"""Gathers requests arriving concurrently at one in-process model into batched calls.

One worker thread per model takes the oldest waiting request, waits briefly for up to
``size - 1`` more that may share its call (the same `key`), and runs them as one batch; requests
whose key is None always run alone. The thread ends when nothing has arrived for a while and
starts again with the next request, so an idle model holds no thread.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Generic, TypeVar

R = TypeVar("R")
T = TypeVar("T")

#: How long the oldest request waits for others to join its batch. Requests released together
#: (a finished batch's callers asking again) arrive within milliseconds; a batch on a CPU takes
#: tenths of a second or more, so this costs little and fills batches.
GATHER_SECONDS = 0.02
#: How long the worker thread waits for a request before it ends.
IDLE_SECONDS = 2.0


@dataclass
class _Waiting(Generic[R, T]):
    request: R
    key: Hashable | None
    future: Future[T] = field(default_factory=Future)


class Batcher(Generic[R, T]):
    """Runs requests in batches of up to `size` on one worker thread, in arrival order.

    Args:
        run: Answers a batch, one result per request, in order; an exception fails the batch.
        size: Most requests per batch (1: one at a time).
        key: Which requests may share a batch (equal keys); None runs the request alone.
    """

    def __init__(
        self,
        run: Callable[[list[R]], Sequence[T]],
        size: int,
        key: Callable[[R], Hashable | None],
    ) -> None:
        self._run, self.size, self._key = run, size, key
        self._waiting: list[_Waiting[R, T]] = []
        self._ready = threading.Condition()
        self._worker: threading.Thread | None = None
        #: How many batches of each size have run (for benchmarks, tests and notes).
        self.sizes: Counter[int] = Counter()

    def submit(self, request: R) -> Future[T]:
        """Queue `request`; its future holds the result or the batch's exception."""
        waiting: _Waiting[R, T] = _Waiting(request, self._key(request))
        with self._ready:
            self._waiting.append(waiting)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="moot-batcher", daemon=True)
                self._worker.start()
            self._ready.notify()
        return waiting.future

    def _work(self) -> None:
        while True:
            batch = self._next()
            if batch is None:
                return
            self.sizes[len(batch)] += 1
            try:
                results = self._run([w.request for w in batch])
            except Exception as exc:  # every caller of the batch gets its failure
                for waiting in batch:
                    waiting.future.set_exception(exc)
                continue
            for waiting, result in zip(batch, results, strict=True):
                waiting.future.set_result(result)

    def _next(self) -> list[_Waiting[R, T]] | None:
        """The next batch, or None (and the worker ends) when nothing came for a while."""
        with self._ready:
            if not self._waiting and not self._ready.wait_for(
                lambda: bool(self._waiting), IDLE_SECONDS
            ):
                self._worker = None
                return None
            first = self._waiting[0]
            if first.key is not None and self.size > 1:
                deadline = time.monotonic() + GATHER_SECONDS
                while len(self._mates(first)) < self.size:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._ready.wait(left)
            batch = self._mates(first)[: self.size] if first.key is not None else [first]
            for waiting in batch:
                self._waiting.remove(waiting)
            return batch

    def _mates(self, first: _Waiting[R, T]) -> list[_Waiting[R, T]]:
        return [w for w in self._waiting if w is first or w.key == first.key]
