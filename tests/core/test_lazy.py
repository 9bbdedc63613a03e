"""Lazy package exports (`moot.core.lazy`)."""

from __future__ import annotations

import pytest

from moot.core.lazy import lazy_exports


def test_a_name_two_modules_export_is_refused():
    """A package would otherwise give one of the two silently (`moot.curate` once did)."""
    with pytest.raises(ValueError, match=r"pkg.run: exported from a.one and a.two"):
        lazy_exports("pkg", {"a.one": ("run", "x"), "a.two": ("run",)})


def test_names_are_imported_on_first_use():
    getattr_, names = lazy_exports(__name__, {"json": ("dumps",)})
    assert names == ["dumps"] and getattr_("dumps")([1]) == "[1]"
    with pytest.raises(AttributeError, match="has no attribute 'loads'"):
        getattr_("loads")
