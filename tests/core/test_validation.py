"""core/validation.py: a pydantic error as one line naming the dotted key."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import Field, ValidationError, field_validator

from moot.core.validation import ConfigModel, did_you_mean, problem


class Inner(ConfigModel):
    rate: float = Field(0.1, gt=0)
    names: list[str] | str = "all"
    mode: bool | Literal["auto"] = False
    sizes: list[int] = []

    @field_validator("sizes")
    @classmethod
    def _even(cls, sizes: list[int]) -> list[int]:
        if any(size % 2 for size in sizes):
            raise ValueError("sizes must be even")
        return sizes


class Outer(ConfigModel):
    name: str
    inner: Inner = Inner()
    optional: Inner | None = None
    parts: dict[str, Inner] = {}


def first_problem(data: dict) -> str:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return problem(caught.value, Outer)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({}, "name: required"),
        ({"nme": "x"}, "nme: unknown key (did you mean 'name'?)"),  # before the missing name
        ({"name": "x", "innr": {}}, "innr: unknown key (did you mean 'inner'?)"),
        ({"name": "x", "zzz": 1}, "zzz: unknown key (known: name, inner, optional, parts)"),
        ({"name": "x", "inner": {"rat": 1}}, "inner.rat: unknown key (did you mean 'rate'?)"),
        ({"name": "x", "optional": {"rat": 1}}, "optional.rat: unknown key (did you mean 'rate'?)"),
        ({"name": "x", "parts": {"a": {"rate": 0}}}, "parts.a.rate: must be greater than 0, got 0"),
        ({"name": 3}, "name: must be a valid string, got 3"),
        (
            {"name": "x", "inner": {"rate": "fast"}},
            "inner.rate: must be a valid number, got 'fast'",
        ),
        ({"name": "x", "inner": {"names": [1]}}, "inner.names: expected list[str] or str, got [1]"),
        ({"name": "x", "inner": {"mode": "on"}}, "inner.mode: expected bool or 'auto', got 'on'"),
        ({"name": "x", "inner": {"sizes": [2, "4"]}}, "inner.sizes[1]: must be a valid integer"),
        ({"name": "x", "inner": {"sizes": [3]}}, "inner.sizes: sizes must be even"),
        ({"name": "x", "inner": []}, "inner: must be a valid dictionary or instance of Inner"),
    ],
)
def test_the_first_error_is_one_line_naming_the_dotted_key(data, line):
    assert first_problem(data).startswith(line)


def test_a_float_takes_an_integer_but_not_text_or_a_boolean():
    """`2e-5` in a file is a number already (`moot.core.loader`); quoted, it is text."""
    assert Outer.model_validate({"name": "x", "inner": {"rate": 2}}).inner.rate == 2.0
    assert first_problem({"name": "x", "inner": {"rate": "2e-5"}}).startswith("inner.rate: must be")
    assert first_problem({"name": "x", "inner": {"rate": True}}).startswith("inner.rate: must be")


def test_did_you_mean_names_the_closest_or_nothing():
    assert did_you_mean("modle", ["model", "rounds"]) == " (did you mean 'model'?)"
    assert did_you_mean("zzz", ["model"]) == ""
