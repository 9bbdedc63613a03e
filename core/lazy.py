"""Lazy re-exports for package ``__init__`` modules (PEP 562).

A package's public names are imported from their modules on first use, so importing one module
of a package (as each CLI command does) does not import every other module's dependencies.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], list[str]]:
    """A module ``__getattr__`` and ``__all__`` re-exporting `exports` lazily.

    Args:
        package: The package's ``__name__``.
        exports: ``{module: (name, ...)}``: the names each module provides.

    Returns:
        ``(__getattr__, __all__)`` for the package to assign.

    Raises:
        ValueError: A name two modules provide (the package would give one of them silently).
    """
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if where.setdefault(name, module) != module:
                raise ValueError(f"{package}.{name}: exported from {where[name]} and {module}")

    def __getattr__(name: str) -> Any:  # noqa: N807 - the PEP 562 hook's name
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this hook
        return value

    return __getattr__, sorted(where)
