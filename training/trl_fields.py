"""The names trl's ``SFTConfig`` takes, read from its source rather than by importing it.

Importing trl loads torch and transformers (about 6 s), which a misspelt key in a config should
not cost: the fields are read with `ast` from the files that declare ``SFTConfig`` and its
parents (about 40 ms). Should trl lay them out otherwise than `DECLARED` expects, the dataclass is
imported and asked instead: slower, never wrong.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
from pathlib import Path

#: ``SFTConfig``'s class chain, child first: (package, file in it, class, its one base class).
DECLARED = (
    ("trl", "trainer/sft_config.py", "SFTConfig", "_BaseConfig"),
    ("trl", "trainer/base_config.py", "_BaseConfig", "TrainingArguments"),
    ("transformers", "training_args.py", "TrainingArguments", None),
)


@functools.cache
def sft_config_fields() -> frozenset[str]:
    """The keyword arguments of the installed trl's ``SFTConfig`` (its dataclass fields)."""
    try:
        return frozenset(name for declared in DECLARED for name in _declared(*declared))
    except (LookupError, OSError, SyntaxError, TypeError):  # another layout: ask trl itself
        from trl import SFTConfig

        return frozenset(field.name for field in dataclasses.fields(SFTConfig) if field.init)


def _declared(package: str, file: str, name: str, base: str | None) -> list[str]:
    """The annotated attributes of class `name` in `file` of `package`, checking its base."""
    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(package)
    path = Path(spec.submodule_search_locations[0], file)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if found is None:
        raise LookupError(f"no class {name} in {path}")
    bases = [ast.unparse(b).rpartition(".")[2] for b in found.bases]
    if bases != ([base] if base else []):
        raise LookupError(f"{name} derives from {bases}, not {base}")
    return [
        statement.target.id
        for statement in found.body
        if isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and "ClassVar" not in ast.unparse(statement.annotation)
    ]
