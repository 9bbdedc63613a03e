"""`Batcher`: concurrent requests with equal keys share batches, in arrival order."""

from __future__ import annotations

import threading

import pytest

from moot.core.llm.batcher import Batcher


class Recorder:
    """A batch function that records its batches; the first one waits for a signal."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = threading.Event()

    def __call__(self, batch: list[str]) -> list[str]:
        if not self.batches:  # hold the worker so later requests queue up together
            self.release.wait(10)
        self.batches.append(batch)
        if "boom" in batch:
            raise RuntimeError("out of memory")
        return [text.upper() for text in batch]


def key(text: str) -> str | None:
    return None if text.startswith("solo") else text[0]


def test_equal_keys_share_batches_of_at_most_size_in_order():
    run = Recorder()
    batcher = Batcher(run, 3, key)
    first = batcher.submit("a0")
    rest = [batcher.submit(t) for t in ("a1", "b1", "a2", "solo1", "a3", "a4", "b2")]
    run.release.set()
    assert first.result(10) == "A0" and [f.result(10) for f in rest][-1] == "B2"
    texts = ["a0", "a1", "b1", "a2", "solo1", "a3", "a4", "b2"]
    assert sorted(t for batch in run.batches for t in batch) == sorted(texts)
    for batch in run.batches:  # one key a batch, a keyless request alone, arrival order kept
        assert len(batch) <= 3 and len({key(t) for t in batch}) == 1
        assert batch == sorted(batch, key=texts.index)
        assert len(batch) == 1 or key(batch[0]) is not None
    # the worker was held: all that waited went in full batches, the oldest first
    assert max(map(len, run.batches)) == 3 and sum(batcher.sizes.values()) <= 5


def test_a_failed_batch_fails_each_of_its_requests_and_no_other():
    run = Recorder()
    batcher = Batcher(run, 4, key)
    held = batcher.submit("x0")
    failing = [batcher.submit(t) for t in ("boom", "bx")]
    other = batcher.submit("y1")
    run.release.set()
    assert held.result(10) == "X0" and other.result(10) == "Y1"
    for future in failing:
        with pytest.raises(RuntimeError, match="out of memory"):
            future.result(10)
