"""The import graph of the package, read from the source (every import, inside functions too).

* Imports travel one way: moot (CLI) → graphs → agents / training → core / prompts.
* `moot.testing` (the scripted server) imports only core.
* The rooms of core are layered (`CORE_LEVELS`).
* No module imports another module's ``_private`` name.
* No import cycles between modules.

Each failure names the file, the line and the import. ``from moot.x import y`` where ``y`` is a
submodule is an import of ``moot.x.y``; otherwise of ``moot.x``. Names a package re-exports lazily
(`moot.core.lazy`) are strings, not imports, and are not followed.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "moot": "moot",
    "graphs": "moot.graphs",
    "agents": "moot.agents",
    "training": "moot.training",
    "core": "moot.core",
    "prompts": "moot.prompts",
}
# what each layer may import from moot (the CLI, `moot`, may import anything)
ALLOWED = {
    "moot.graphs": {"moot.agents", "moot.training", "moot.core", "moot.prompts"},
    "moot.agents": {"moot.core", "moot.prompts"},
    "moot.training": {"moot.core", "moot.prompts"},
    "moot.core": {"moot.prompts"},
    "moot.prompts": set(),
    "moot.testing": {"moot.core"},  # the scripted server, for tests: beside the CLI, on core
}
# The rooms of core, bottom first: a room imports only rooms on a lower level. The strictest
# order today's imports allow, except that metrics stays above runs, so a metric may one day run
# its work through the engine without a new level. Nothing in core imports the `moot.core`
# package itself: that is the lazy façade for users, and would hide which room a module needs.
CORE_LEVELS = {
    "errors": 0,
    "lazy": 0,
    "loader": 0,
    "tables": 0,
    "validation": 0,
    "redaction": 0,
    "scheduler": 1,  # errors
    "llm": 1,  # errors, redaction
    "data": 2,  # errors, llm (compqa's rubric parses model output)
    "runs": 3,  # errors, data (ResultLog)
    "charts": 3,  # data (atomic writes)
    "retrieval": 3,  # errors, llm, data (corpus, records)
    "metrics": 4,  # errors, llm, data
    "plan": 4,  # llm (prices), data (logs), runs (the `finished` rules)
    "labels": 3,  # errors, data (records, debates, the CompQA rubric)
    "view": 4,  # errors, redaction, data (folders, records), labels
    "hub": 3,  # errors, redaction, data (records), tables
}


@dataclass(frozen=True)
class Import:
    """One imported module (or one private name) as written in one file."""

    importer: str  # the importing module
    target: str  # the module imported
    name: str | None  # the name taken from `target`, if it is not a module
    path: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package is its ``__init__.py``)."""
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join([package, *(p for p in parts if p != "__init__")])
            if name not in found or path.name == "__init__.py":  # a package beats a module
                found[name] = path
    return found


def module_of(name: str) -> str | None:
    """The module a dotted name lives in: itself, else its longest module prefix."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def imports() -> tuple[Import, ...]:
    """Every import of a moot module, and every private attribute of one, in every module."""
    return tuple(i for importer, path in modules().items() for i in file_imports(importer, path))


def file_imports(importer: str, path: Path) -> list[Import]:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    found: list[Import] = []
    bound: dict[str, str] = {}  # local name -> the moot module it refers to

    def add(node: ast.AST, target: str, name: str | None = None) -> None:
        text = " ".join(ast.get_source_segment(source, node).split())
        found.append(Import(importer, target, name, path, node.lineno, text))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = module_of(alias.name) if alias.name.split(".")[0] == "moot" else None
                if target:
                    add(node, target)
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(importer, path, node)
            if base.split(".")[0] != "moot" or not module_of(base):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in modules():
                    add(node, full)
                    bound[alias.asname or alias.name] = full
                else:
                    add(node, module_of(base), alias.name)
    for node in ast.walk(tree):  # `module._name` on a module imported above
        if isinstance(node, ast.Attribute) and _private(node.attr):
            head, _, rest = (_dotted(node.value) or "").partition(".")
            target = f"{bound.get(head)}.{rest}".rstrip(".")
            if head in bound and target in modules():
                add(node, target, node.attr)
    return found


def _absolute(importer: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = importer.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join([*package, *([node.module] if node.module else [])])


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def layer(module: str) -> str:
    """``moot.graphs``, ``moot.core`` ...; anything else in ``moot`` is the CLI, ``moot``."""
    package = ".".join(module.split(".")[:2])
    return package if package in ALLOWED else "moot"


def report(failures: list[str]) -> str:
    unique = sorted(set(failures))  # one line per statement, however many names it imports
    return f"{len(unique)} offending import(s):\n" + "\n".join(unique)


@pytest.mark.parametrize("importing", sorted(ALLOWED))
def test_layer_imports_only_what_lies_below(importing):
    failures = [
        f"{i}  ({layer(i.target)} is not below {importing})"
        for i in imports()
        if layer(i.importer) == importing
        and layer(i.target) not in ALLOWED[importing] | {importing}
    ]
    assert not failures, report(failures)


def core_room(module: str) -> str | None:
    """The room of a core module; None for the `moot.core` package itself."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["moot", "core"] and len(parts) > 2 else None


def test_every_core_room_has_a_level():
    rooms = {core_room(m) for m in modules() if layer(m) == "moot.core"} - {None}
    assert rooms == set(CORE_LEVELS), "add new rooms of core to CORE_LEVELS"


def test_core_rooms_import_only_lower_rooms():
    failures = []
    for i in imports():
        if layer(i.importer) != "moot.core" or layer(i.target) != "moot.core":
            continue
        room, other = core_room(i.importer), core_room(i.target)
        if room is None or room == other:
            continue
        if other is None:
            failures.append(f"{i}  (the moot.core façade: import the module itself)")
        elif CORE_LEVELS[other] >= CORE_LEVELS[room]:
            failures.append(
                f"{i}  ({room}, level {CORE_LEVELS[room]}, imports {other}, "
                f"level {CORE_LEVELS[other]})"
            )
    assert not failures, report(failures)


def test_no_module_uses_another_modules_private_names():
    failures = []
    for i in imports():
        private = [p for p in i.target.split(".") if _private(p)]
        if i.name and _private(i.name):
            owner = i.target  # `_name` belongs to its module
        elif private:
            owner = i.target.rsplit(f".{private[-1]}", 1)[0]  # `_module` to its package
        else:
            continue
        if i.importer != owner and not i.importer.startswith(f"{owner}."):
            failures.append(f"{i}  (private to {owner})")
    assert not failures, report(failures)


def test_no_import_cycles():
    graph: dict[str, dict[str, Import]] = {}
    for i in imports():
        if i.target != i.importer:
            graph.setdefault(i.importer, {}).setdefault(i.target, i)
    failures = []
    for cycle, group in cycles(graph):
        edges = zip(cycle, [*cycle[1:], cycle[0]], strict=True)
        more = sorted(group - set(cycle))
        failures.append(
            " → ".join([*cycle, cycle[0]])
            + (f"  (entangled with {', '.join(more)})" if more else "")
            + "".join(f"\n    {graph[a][b]}" for a, b in edges)
        )
    assert not failures, f"{len(failures)} import cycle(s):\n" + "\n".join(failures)


def cycles(graph: dict[str, dict[str, Import]]) -> Iterator[tuple[list[str], set[str]]]:
    """One shortest cycle in each strongly connected group of modules (Tarjan), and the group."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the module count (~100)
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = set()
            while node not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        frontier = [start]
        while frontier:  # breadth first, inside the group, back to `start`
            node = frontier.pop(0)
            for successor in sorted(graph.get(node, {})):
                if successor == start:
                    yield paths[node], group
                    frontier = []
                    break
                if successor in group and successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    frontier.append(successor)


def test_the_reader_follows_submodules_relative_imports_and_module_attributes(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(
        "import moot.core.llm.models as models\n"
        "from moot.core.data import records, _hidden\n"
        "from ..llm import spec\n"
        "def f():\n"
        "    import moot.core.runs\n"
        "    return models._Reply, moot.core.runs._private, records.ResultLog\n",
        encoding="utf-8",
    )
    found = {(i.target, i.name, i.line) for i in file_imports("moot.core.data.probe", path)}
    assert found == {
        ("moot.core.llm.models", None, 1),
        ("moot.core.data.records", None, 2),
        ("moot.core.data", "_hidden", 2),
        ("moot.core.llm.spec", None, 3),
        ("moot.core.runs", None, 5),
        ("moot.core.llm.models", "_Reply", 6),
        ("moot.core.runs", "_private", 6),
    }
