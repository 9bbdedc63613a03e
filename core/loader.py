"""The one loader of the YAML and JSON moot is given: a repeated key refused, any number read.

PyYAML and the `json` module both keep the last of two equal keys in a mapping without a word, so
a price file naming a model twice priced it by its second entry, and a recipe naming a stage twice
ran only the second. PyYAML reads YAML 1.1, in which ``1e-05`` and ``2e-1`` (JSON's own forms,
``json.dumps(0.00001)`` writes the first) are text: the YAML loader here reads them as numbers, as
JSON and YAML 1.2 do. Every price file, config, recipe, router file, SFT config, debate file and
JSON or JSONL input moot reads goes through `load_yaml` or `load_json`.

A YAML alias (``*name``) stands for its anchor's whole value, so a few lines whose aliases nest
(``a1: [*a0, *a0, ...]``, ``a2: [*a1, *a1, ...]``) stand for a billion values: PyYAML builds them
shared, in a moment, and the first walk of them (a check, ``json.dumps``, a copy) never ends; an
anchor whose value holds its own alias holds itself, and every walk recurses for ever.
`load_yaml` measures the document as it would be written out, aliases expanded, before building
it, in time linear in its nodes (issue 29, item 15).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any


class Unreadable(ValueError):
    """Text that does not load: what is wrong, and where when known.

    Callers name the file: ``InputError(path, exc.problem, exc.place)``.

    Args:
        problem: What is wrong, one line (``key 'gen' repeated``).
        place: Where: ``line 7`` (YAML, JSON syntax), ``index 3.Affirmative`` (a JSON value's
            path), or None.
    """

    def __init__(self, problem: str, place: str | None = None) -> None:
        super().__init__(f"{place}: {problem}" if place else problem)
        self.problem, self.place = problem, place


class RepeatedKey(Unreadable):
    """A key given twice in one mapping (``key 'gen' repeated``): never read as the last one."""

    def __init__(self, key: Any, place: str | None) -> None:
        super().__init__(f"key {key!r} repeated", place)


#: What aliases may add to a YAML document, in values and scalar characters, past its own length.
MAX_EXPANSION = 1_000_000

#: A YAML 1.2 / JSON float with an exponent, which YAML 1.1 reads as text unless it has a dot
#: and a signed exponent (``1.0e-05``).
_EXPONENT = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")


@functools.cache
def _yaml_loader() -> type:
    """PyYAML's `SafeLoader`, refusing a repeated key and reading every exponent form."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: overriding is meant
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    repeated = key in seen
                except TypeError:  # an unhashable key: the base class says so
                    break
                if repeated:
                    raise RepeatedKey(key, f"line {key_node.start_mark.line + 1}")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+0123456789."))
    return Loader


def load_yaml(text: str) -> Any:
    """The value of YAML (or JSON) `text`.

    Raises:
        RepeatedKey: A key given twice in one mapping (its line).
        Unreadable: Not YAML (the line of the problem), nested too deeply, aliases that would
            expand it past its length plus `MAX_EXPANSION`, or a value that holds itself.
    """
    import yaml

    loader = _yaml_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        limit = len(text) + MAX_EXPANSION
        if _expanded(node, {}, set(), limit) > limit:
            raise Unreadable(f"its aliases expand it past {limit:,} values and characters")
        return loader.construct_document(node)
    except RecursionError:
        raise Unreadable("nested too deeply") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        place = f"line {mark.line + 1}" if mark else None
        raise Unreadable(exc.problem or str(exc).splitlines()[0], place) from None
    except yaml.YAMLError as exc:
        raise Unreadable(str(exc).splitlines()[0]) from None
    finally:
        loader.dispose()


def _expanded(node: Any, sizes: dict[int, int], open_: set[int], limit: int) -> int:
    """`node`'s size with every alias expanded: its values, plus each scalar's characters.

    A node shared by aliases is measured once (`sizes`) and counted at each use, so the walk is
    linear in the nodes; it stops as soon as the size passes `limit`.

    Raises:
        Unreadable: An anchor's value that holds its own alias.
    """
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:  # reached again from inside itself
        raise Unreadable("a value that holds itself (an alias inside its own anchor)")
    open_.add(key)
    size = 1
    if node.id == "scalar":
        size += len(node.value)
    else:  # a sequence's items, a mapping's keys and values
        children = node.value if node.id == "sequence" else [n for pair in node.value for n in pair]
        for child in children:
            size += _expanded(child, sizes, open_, limit)
            if size > limit:
                break
    open_.discard(key)
    sizes[key] = size
    return size


class _Repeated(Exception):
    """A repeated key, found by the fast decoder; `_place` finds where."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) < len(pairs):
        raise _Repeated
    return value


class _Pairs(list):
    """An object's pairs as written, for `_place`."""


_DECODER = json.JSONDecoder(object_pairs_hook=_unique)  # one decoder: building one costs


def load_json(text: str) -> Any:
    """The value of JSON `text`; every JSON number form is read (``1e-05``).

    Raises:
        RepeatedKey: A key given twice in one object (the path to that object:
            ``index 3.Affirmative``).
        Unreadable: Not JSON (as `json.JSONDecodeError` says it, its line when the text has
            several), or nested too deeply.
    """
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise Unreadable("nested too deeply") from None
    except json.JSONDecodeError as exc:
        if exc.lineno == 1:  # one line (a JSONL record): its column
            raise Unreadable(f"{exc.msg} (column {exc.colno})") from None
        raise Unreadable(str(exc)) from None
    except _Repeated:
        key, path = _place(json.loads(text, object_pairs_hook=_Pairs)) or ("", ())  # rare: find it
        raise RepeatedKey(key, _path(path)) from None


def _place(value: Any, path: tuple[Any, ...] = ()) -> tuple[str, tuple[Any, ...]] | None:
    """The first repeated key in `value` (objects as `_Pairs`) and the path to its object."""
    if isinstance(value, _Pairs):
        keys = [key for key, _ in value]
        repeated = next((key for key in keys if keys.count(key) > 1), None)
        if repeated is not None:
            return repeated, path
        items: Any = value
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        if found := _place(item, (*path, key)):
            return found
    return None


def _path(path: tuple[Any, ...]) -> str | None:
    """``index 3.Affirmative[0]``: a list's item by index, an object's by key."""
    if not path:
        return None
    head, *rest = path
    text = f"index {head}" if isinstance(head, int) else str(head)
    return text + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in rest)
