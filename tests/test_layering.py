"""Imports travel one way: moot (CLI) → graphs → agents / training → core / prompts."""

from __future__ import annotations

import ast
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
# what each layer may import from moot
ALLOWED = {
    "moot.graphs": {"moot.agents", "moot.training", "moot.core", "moot.prompts"},
    "moot.agents": {"moot.core", "moot.prompts"},
    "moot.training": {"moot.core", "moot.prompts"},
    "moot.core": {"moot.prompts"},
    "moot.prompts": set(),
}


def moot_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found |= {".".join(n.split(".")[:2]) for n in names if n.split(".")[0] == "moot"}
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_lies_below(layer):
    folder = ROOT / next(f for f, pkg in FOLDERS.items() if pkg == layer)
    for path in folder.rglob("*.py"):
        bad = moot_imports(path) - ALLOWED[layer] - {layer}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)} (above {layer})"
