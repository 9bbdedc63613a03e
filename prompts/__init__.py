"""Prompt templates, shipped as files and rendered with Jinja2.

Every prompt moot sends lives here as a template whose header cites its source. Rendering uses
``StrictUndefined``: a placeholder left unfilled is an error, never text sent to a model.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from typing import Any

import jinja2
import yaml

from moot.prompts.fence import fence

__all__ = ["fence", "load_yaml", "render", "template_digest", "template_source"]


@functools.cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("moot.prompts", "."),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,  # prompts are plain text, not HTML
        auto_reload=False,  # package data: no stat of every template file on every render
    )
    environment.filters["fence"] = fence
    return environment


def render(name: str, **variables: Any) -> str:
    """Render the template `name` (e.g. ``debatune/turn.j2``) with `variables`.

    Raises:
        jinja2.UndefinedError: A placeholder has no value.
    """
    return _environment().get_template(name).render(**variables).strip()


def template_source(name: str) -> str:
    """The raw text of a template (its version is part of run manifests)."""
    return resources.files("moot.prompts").joinpath(name).read_text(encoding="utf-8")


def template_digest(*names: str) -> str:
    """A short hash of the templates `names`, for run identities.

    Edited prompts then make a new run instead of mixing with old results.
    """
    text = "".join(template_source(name) for name in names)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.cache
def load_yaml(name: str) -> Any:
    """Parse a YAML data file shipped with the prompts (e.g. instruction paraphrases)."""
    return yaml.safe_load(template_source(name))
