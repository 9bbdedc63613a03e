"""Prompt templates, shipped as files and rendered with Jinja2.

Every prompt moot sends lives here as a template whose header cites its source. Rendering uses
``StrictUndefined``: a placeholder left unfilled is an error, never text sent to a model.

A run may replace any of them (``--prompts DIR``, `overriding`): while a command runs, its
overrides are in a context variable, so every `render`, `template_source`, `template_digest` and
`load_yaml` of that run (its asyncio tasks, its threads from `asyncio.to_thread`, LangGraph's
nodes: each copies the context) reads them, and another run in the same process does not.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import yaml

from moot.prompts.fence import fence

__all__ = [
    "Overrides",
    "builtin_names",
    "fence",
    "template_environment",
    "load_yaml",
    "override_problem",
    "overridden",
    "overriding",
    "render",
    "template_digest",
    "template_source",
]

#: What a file of the package is, if it is a template or a data file prompts load.
SUFFIXES = (".j2", ".yaml")

#: Where the chat templates are: transformers renders them, with its own tags.
CHAT_TEMPLATES = "chat_templates/"


def template_environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """A Jinja environment with moot's prompt settings: strict, plain text, the fence filter.

    The built-ins' (`loader`: the package), and a protocol's or judge's own (their folder).
    """
    environment = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,  # prompts are plain text, not HTML
        auto_reload=False,  # package data: no stat of every template file on every render
    )
    environment.filters["fence"] = fence
    return environment


@functools.cache
def _environment(folder: str = "") -> jinja2.Environment:
    """The built-ins' environment, its names relative to `folder` (a protocol's, `render`)."""
    return template_environment(jinja2.PackageLoader("moot.prompts", folder or "."))


class Overrides:
    """Templates and data files of a run that replace the built-ins of the same names.

    Args:
        texts: Each one's text, by its name under ``prompts/`` (``debatune/turn.j2``).
    """

    def __init__(self, texts: Mapping[str, str]) -> None:
        self.texts = dict(sorted(texts.items()))
        #: Each one's digest (SHA-256 of its text, 16 hex digits), by name.
        self.digests = {name: _digest(text) for name, text in self.texts.items()}
        #: The digest of them all, names and texts: what a run identity takes of them.
        self.digest = _digest("".join(f"{n}\0{d}\0" for n, d in self.digests.items()))
        self._yaml: dict[str, Any] = {}
        self._environments: dict[str, jinja2.Environment] = {}

    def environment(self, folder: str = "") -> jinja2.Environment:
        """The run's Jinja environment: its overrides first, then the built-ins (`_environment`).

        A built-in template that includes an overridden one includes the override.
        """
        if folder not in self._environments:
            inside = {
                n.removeprefix(f"{folder}/"): t
                for n, t in self.texts.items()
                if n.startswith(f"{folder}/")
            }
            loader = jinja2.ChoiceLoader(
                [
                    jinja2.DictLoader(inside if folder else self.texts),
                    jinja2.PackageLoader("moot.prompts", folder or "."),
                ]
            )
            self._environments[folder] = template_environment(loader)
        return self._environments[folder]


_ACTIVE: contextvars.ContextVar[Overrides | None] = contextvars.ContextVar(
    "moot_prompt_overrides", default=None
)


@contextlib.contextmanager
def overriding(overrides: Overrides | None) -> Iterator[None]:
    """Read `overrides` instead of the built-ins for the block (None: the built-ins)."""
    token = _ACTIVE.set(overrides)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def overridden() -> dict[str, str]:
    """The templates the running command overrides, name → digest (empty: none)."""
    active = _ACTIVE.get()
    return dict(active.digests) if active is not None else {}


def render(name: str, /, folder: str = "", **variables: Any) -> str:
    """Render the template `name` (e.g. ``debatune/turn.j2``) with `variables`.

    Args:
        name: Its path under ``prompts/``, or under `folder` (a shipped protocol's: its
            templates include each other by their names in it).
        folder: See `name`.
        **variables: Its variables.

    Raises:
        jinja2.UndefinedError: A placeholder has no value.
    """
    active = _ACTIVE.get()
    environment = active.environment(folder) if active is not None else _environment(folder)
    return environment.get_template(name).render(**variables).strip()


def template_source(name: str) -> str:
    """The raw text of a template (its version is part of run manifests), or its override's."""
    active = _ACTIVE.get()
    if active is not None and name in active.texts:
        return active.texts[name]
    return _builtin_source(name)


@functools.cache
def _builtin_source(name: str) -> str:
    return resources.files("moot.prompts").joinpath(name).read_text(encoding="utf-8")


def template_digest(*names: str) -> str:
    """A short hash of the templates `names`, for run identities.

    Edited prompts then make a new run instead of mixing with old results. Under overrides it
    takes their digest too, whichever templates they replace (a run's prompts include others).
    """
    text = "".join(template_source(name) for name in names)
    active = _ACTIVE.get()
    if active is not None:
        text += f"\0overrides {active.digest}"
    return _digest(text)


def load_yaml(name: str) -> Any:
    """Parse a YAML data file shipped with the prompts (e.g. instruction paraphrases)."""
    active = _ACTIVE.get()
    if active is None or name not in active.texts:
        return _builtin_yaml(name)
    if name not in active._yaml:
        active._yaml[name] = yaml.safe_load(active.texts[name])
    return active._yaml[name]


@functools.cache
def _builtin_yaml(name: str) -> Any:
    return yaml.safe_load(_builtin_source(name))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.cache
def builtin_names() -> tuple[str, ...]:
    """Every built-in template and data file, by name under ``prompts/``, sorted."""
    found: list[str] = []

    def walk(folder: Any, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.endswith(SUFFIXES):
                found.append(prefix + entry.name)

    walk(resources.files("moot.prompts"), "")
    return tuple(sorted(found))


def override_problem(name: str, text: str) -> str | None:
    """What is wrong with `text` as an override of the built-in template `name` (None: nothing).

    It must parse as Jinja, use no filter moot does not define, include only built-in
    templates, and use no variable the built-in is not given: the built-in's own, those of the
    templates it includes, and Jinja's globals (``range``).
    """
    environment = _chat_environment() if name.startswith(CHAT_TEMPLATES) else _environment()
    try:
        tree = environment.parse(text)
        environment.compile(tree)  # an unknown filter or test is refused here
    except jinja2.TemplateSyntaxError as exc:
        return f"not a valid Jinja template: {exc.message} (line {exc.lineno})"
    for included in jinja2.meta.find_referenced_templates(tree):
        if included is not None and _included(name, included) is None:
            return f"includes {included!r}, which is no built-in template"
    extra = jinja2.meta.find_undeclared_variables(tree) - _given(name) - set(environment.globals)
    if extra:
        given = ", ".join(sorted(_given(name))) or "none"
        return f"uses {', '.join(sorted(extra))}, which {name} is not given (it is given: {given})"
    return None


class _Generation(jinja2.ext.Extension):
    """transformers' ``{% generation %}`` block of chat templates, parsed as its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> Any:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


@functools.cache
def _chat_environment() -> jinja2.Environment:
    """Chat templates as transformers reads them (its loop controls, its generation tag)."""
    return jinja2.Environment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, _Generation]
    )


@functools.cache
def _given(name: str) -> frozenset[str]:
    """The variables the built-in `name` is rendered with: its own and its includes'."""
    environment = _chat_environment() if name.startswith(CHAT_TEMPLATES) else _environment()
    tree = environment.parse(_builtin_source(name))
    found = set(jinja2.meta.find_undeclared_variables(tree))
    for included in jinja2.meta.find_referenced_templates(tree):
        if included is not None and (path := _included(name, included)) is not None:
            found |= _given(path)
    return frozenset(found)


def _included(name: str, included: str) -> str | None:
    """The built-in `name` includes as `included`: by its path, or in its folder (a protocol's)."""
    for path in (included, f"{name.rpartition('/')[0]}/{included}"):
        if path in builtin_names():
            return path
    return None
