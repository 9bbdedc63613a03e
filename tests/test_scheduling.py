"""The suite's own scheduling: slow tests start first on every xdist worker (tests/conftest.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import pytest_collection_modifyitems


class Item:
    """What the hook reads of a collected test: its name and its markers."""

    def __init__(self, name: str, marks: tuple[str, ...] = ()) -> None:
        self.name, self.marks = name, marks

    def iter_markers(self, name: str):  # noqa: ANN201 - as pytest.Item's
        return iter([name] if name in self.marks else [])


def shares(items: list[Item], workers: int) -> list[list[str]]:
    """The contiguous shares `--dist worksteal` hands out first (xdist's own arithmetic)."""
    names, out = [i.name for i in items], []
    for worker in range(workers):
        size = len(names) // (workers - worker)
        out.append(names[:size])
        del names[:size]
    return out


def test_slow_tests_are_dealt_to_the_head_of_every_workers_share():
    items = [Item(f"fast{i}") for i in range(20)]
    items[5].marks = ("slow",)
    items[12].marks = ("embedded",)
    items[19].marks = ("slow",)
    items[18].marks = ("embedded", "slow")
    collected = [i.name for i in items]
    pytest_collection_modifyitems(SimpleNamespace(workerinput={"workercount": 3}), items)
    assert sorted(i.name for i in items) == sorted(collected)  # nothing lost or repeated
    first, second, third = shares(items, 3)
    assert first[:2] == ["fast5", "fast19"] and second[0] == "fast12" and third[0] == "fast18"
    fast = first[2:] + second[1:] + third[1:]
    assert fast == [n for n in collected if n not in {"fast5", "fast12", "fast18", "fast19"}]


def test_without_xdist_the_slow_tests_simply_come_first():
    items = [Item("a"), Item("b", ("slow",)), Item("c"), Item("d", ("embedded",))]
    pytest_collection_modifyitems(SimpleNamespace(), items)
    assert [i.name for i in items] == ["b", "d", "a", "c"]
