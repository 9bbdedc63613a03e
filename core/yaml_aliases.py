"""YAML read as `yaml.safe_load` reads it, without what its aliases would expand to unbounded.

An alias (``*name``) stands for its anchor's whole value, so a few lines whose aliases nest
(``a1: [*a0, *a0, ...]``, ``a2: [*a1, *a1, ...]``) stand for a billion values: safe_load builds
them shared, in a moment, and the first walk of them (a check, ``json.dumps``, a copy) never ends.
An anchor's value that holds its own alias holds itself: every walk of it recurses for ever.
`load_yaml` measures the document as it would be written out, aliases expanded, before building
it, in time linear in the document's nodes.
"""

from __future__ import annotations

from typing import Any

import yaml

#: What aliases may add to a document, in values and scalar characters, past its own length.
MAX_EXPANSION = 1_000_000


class ExpansionError(ValueError):
    """A YAML document whose aliases expand without bound, or a value that holds itself."""


def load_yaml(text: str) -> Any:
    """`text`'s one YAML document, as `yaml.safe_load` builds it (None when empty).

    Raises:
        ExpansionError: Its aliases would expand it past its length plus `MAX_EXPANSION`, or
            an anchor's value holds its own alias; the message is one line.
        yaml.YAMLError: It is not YAML (as `yaml.safe_load`).
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        limit = len(text) + MAX_EXPANSION
        if _expanded(node, {}, set(), limit) > limit:
            raise ExpansionError(f"its aliases expand it past {limit:,} values and characters")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded(node: yaml.Node, sizes: dict[int, int], open_: set[int], limit: int) -> int:
    """`node`'s size with every alias expanded: its values, plus each scalar's characters.

    A node shared by aliases is measured once (`sizes`) and counted at each use, so the walk is
    linear in the nodes; it stops as soon as the size passes `limit`.
    """
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:  # reached again from inside itself
        raise ExpansionError("a value that holds itself (an alias inside its own anchor)")
    open_.add(key)
    size = 1
    if isinstance(node, yaml.ScalarNode):
        size += len(node.value)
    else:
        children = node.value if isinstance(node, yaml.SequenceNode) else _pairs(node)
        for child in children:
            size += _expanded(child, sizes, open_, limit)
            if size > limit:
                break
    open_.discard(key)
    sizes[key] = size
    return size


def _pairs(node: yaml.Node) -> list[yaml.Node]:
    return [part for pair in node.value for part in pair]
