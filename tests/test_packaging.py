"""pyproject.toml's dependency ranges: they admit vLLM's pins, and constraints.txt lies inside them.

Offline: vLLM's pins are recorded below as facts, not read from the package index (tests never
touch the network). The check against the index itself, `pip install --dry-run --report` of
`moot[vllm]`, is in benchmarks/README.md.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# vllm 0.33.0 (the newest release, 2026-11-02): the Requires-Dist lines of its manylinux x86_64
# wheel's METADATA that bound a package moot depends on too, read 2026-11-29. (The package
# index's JSON summary, `info.requires_dist`, lists older pins: torch==2.13.0,
# transformers<5.20.0; pip installs what the wheel declares.)
VLLM = "0.33.0"
VLLM_PINS = {
    "torch": "==2.14.0",
    "transformers": ">=5.16.1,<5.21.0",
    "huggingface-hub": ">=1.31.0",
    "openai": ">=2.25.0",
    "pydantic": ">=2.12.0",
    "tiktoken": ">=0.6.0",
}


def requirements(*extras: str) -> list[Requirement]:
    """moot's dependencies and those of `extras`."""
    extra = PROJECT["optional-dependencies"]
    return [Requirement(line) for line in PROJECT["dependencies"]] + [
        Requirement(line) for name in extras for line in extra[name]
    ]


def overlap(first: SpecifierSet, second: SpecifierSet) -> bool:
    """Whether some version satisfies both sets (sets of ==, >= and < clauses: the intersection,
    if there is one, holds one of the versions they name, or 0 when neither has a floor)."""
    named = [Version(s.version) for s in (*first, *second)] + [Version("0")]
    return any(first.contains(v, True) and second.contains(v, True) for v in named)


def test_ranges_admit_vllm_pins() -> None:
    moot = {canonicalize_name(req.name): req for req in requirements("vllm")}
    assert Version(VLLM) in moot["vllm"].specifier
    refused = [
        f"{name}: moot {moot[name].specifier or 'any'}, vllm {VLLM} {pin}"
        for name, pin in VLLM_PINS.items()
        if not overlap(moot[name].specifier, SpecifierSet(pin))
    ]
    assert not refused, refused


def test_overlap_finds_disjoint_ranges() -> None:
    # the checks above are only as good as this: main's pins against vLLM's
    assert not overlap(SpecifierSet("==2.13.0"), SpecifierSet("==2.14.0"))
    assert not overlap(SpecifierSet(">=5.23,<6"), SpecifierSet(">=5.16.1,<5.21.0"))
    assert overlap(SpecifierSet(">=5.16.1,<6"), SpecifierSet(">=5.16.1,<5.21.0"))
    assert overlap(SpecifierSet("<3"), SpecifierSet(""))


def test_constraints_lie_inside_the_ranges() -> None:
    """Every requirement of moot and of `make setup`'s extras is pinned by constraints.txt, to a
    version its range admits: the tested environment cannot drift outside pyproject.toml."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version)
    wrong = [
        f"{req.name}: {pins.get(name, 'unpinned')} (pyproject: {req.specifier})"
        for req in requirements("dev", "tracking", "deepspeed")
        if (name := canonicalize_name(req.name)) not in pins
        or not req.specifier.contains(pins[name], prereleases=True)
    ]
    assert not wrong, wrong
