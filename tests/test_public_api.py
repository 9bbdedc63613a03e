"""The public API: every re-exported name resolves, to the object its module defines."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

PACKAGES = ("moot", "moot.core", "moot.agents", "moot.graphs", "moot.training", "moot.testing")


@pytest.mark.parametrize("name", PACKAGES)
def test_exports_resolve_and_never_share_a_submodule_name(name):
    package = importlib.import_module(name)
    submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    # importing a submodule binds its name on the package, hiding a lazy export of that name
    assert not submodules & set(package.__all__)
    for export in package.__all__:
        assert getattr(package, export) is not None


def test_a_function_stays_a_function_after_its_module_is_imported():
    importlib.import_module("moot.graphs.debateqa_curate")
    from moot.graphs import curate

    assert callable(curate) and curate.__module__ == "moot.graphs.debateqa_curate"
