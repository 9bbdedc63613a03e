"""A judge as data: a template, an output schema, an aggregation and a jury, from YAML or Python.

`JudgeSpec` is the file's shape (a frozen pydantic model: an unknown key gets a did-you-mean);
`load_judge` reads one and checks all of it before any request, each problem one line naming
the file and the key (``judge.yaml: fields.score: min 10 is above max 1``): the templates exist
and use only the variables the judge provides (the item fields the spec names, fenced when
judged, and ``fields``), the verdict and the pair name declared fields, ranges and allowed
values make sense. `JudgeFile` is the result: the templates compiled, the output schema built
with `pydantic.create_model` for the tolerant parser, and the digest that enters the run's
identity. docs/judges.md walks through one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jinja2
from jinja2 import meta
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from moot.core.errors import ConfigError
from moot.core.llm.structured import OutputParseError, parse_structured
from moot.core.loader import Unreadable, load_yaml
from moot.core.validation import ConfigModel, problem
from moot.prompts import fence, template_environment

FieldType = Literal["int", "float", "bool", "str", "choice"]
_PYTHON = {"int": int, "float": float, "bool": bool, "str": str}
_NUMBERS = ("int", "float")
Value = bool | int | float | str
#: A reply that is a number alone: after markdown, quotes, a dash and a label (``- Quality:``);
#: not a list's first item (``1. Clearly identify ...``: the prompt echoed); a minus sign
#: right before the digits is the number's (``-3`` is -3, out of a 1-10 range, unread).
_LEADING_NUMBER = re.compile(
    r"(?:[\s*_#>`\"'(\[]|-(?!\d))*(?:[A-Za-z][\w .'-]{0,40}?\s*[:=]\s*[*_`\"'(\[]*)?"
    r"([-+]?\d+(?:\.\d+)?)\b(?![.)]\s+[A-Z])"
)


class OutputField(ConfigModel):
    """One field of the judge's answer: its type, its range, its allowed values."""

    type: FieldType
    min: int | float | None = None
    max: int | float | None = None
    values: list[Value] | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _sensible(self) -> OutputField:
        ranged = self.min is not None or self.max is not None
        if ranged and self.type not in _NUMBERS:
            raise ValueError(f"min and max apply to int and float fields, not {self.type}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is above max {self.max:g}")
        if self.values is not None and not self.values:
            raise ValueError("values: no allowed value (give at least one, or leave it out)")
        if self.type == "choice" and self.values is None:
            raise ValueError("a choice needs its allowed values")
        if self.type == "bool" and self.values is not None:
            raise ValueError("a bool field takes no values")
        return self


class Aggregation(ConfigModel):
    """How verdicts combine: a jury's by `mean` or `majority`; `both_orders` shows `a`, `b` twice.

    Under ``both_orders`` each juror judges the pair with `a` where the template shows ``a``'s
    variable and again with the two texts swapped (DEBATunE's pairwise judge); its verdict is A's
    win, tie or loss over both orders, and a jury's is their majority.
    """

    method: Literal["mean", "majority", "both_orders"]
    a: str | None = None
    b: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> Aggregation:
        pair = self.a is not None or self.b is not None
        if self.method == "both_orders" and (self.a is None or self.b is None):
            raise ValueError("both_orders needs the two item fields shown in both orders: a, b")
        if self.method != "both_orders" and pair:
            raise ValueError(f"a and b apply to both_orders, not {self.method}")
        if pair and self.a == self.b:
            raise ValueError(f"a and b name the same field {self.a!r}")
        return self


class JudgeSpec(ConfigModel):
    """A judge, as its YAML file says (docs/schemas.md).

    Attributes:
        name: The judge's name (the ledger's stage, the summary's title).
        template: The user prompt, a Jinja file relative to the spec's folder.
        system: The system prompt, likewise (optional).
        inputs: Item fields the templates show as they are (a question, a topic).
        judged: Item fields that are judged text, put in a fence (`moot.prompts.fence`).
        fields: The answer's fields, by name, in order.
        verdict: The field that is each juror's verdict; under ``both_orders`` the two scores of
            the texts in the ``a`` and ``b`` places. Default: the first field (two) not ``str``.
        aggregation: ``mean``, ``majority`` or ``{method: both_orders, a: FIELD, b: FIELD}``.
        models: The jury: model specs, or ``judge`` for ``--judge``'s (default: ``--judge``).
        temperature: The jurors' sampling temperature (default: ``--temperature``).
        max_tokens: Each call's completion budget.
        reply: ``json`` (the answer's fields as JSON), or ``number``: the prompt asks for the
            one field's number alone (a paper's prompt, word for word); JSON is read too.
    """

    name: str = Field(min_length=1)
    template: str
    system: str | None = None
    inputs: list[str] = []
    judged: list[str] = []
    fields: dict[str, OutputField] = Field(min_length=1)
    verdict: str | list[str] | None = None
    aggregation: Aggregation = Aggregation(method="mean")
    models: list[str] = []
    temperature: float | None = Field(None, ge=0)
    max_tokens: int = Field(512, gt=0)
    reply: Literal["json", "number"] = "json"

    @field_validator("aggregation", mode="before")
    @classmethod
    def _short(cls, value: Any) -> Any:
        return {"method": value} if isinstance(value, str) else value

    @field_validator("fields")
    @classmethod
    def _field_names(cls, fields: dict[str, OutputField]) -> dict[str, OutputField]:
        for name in fields:  # the answer's model is a pydantic model: its own names are taken
            if (
                not name.isidentifier()
                or name.startswith(("_", "model_"))
                or hasattr(BaseModel, name)
            ):
                raise ValueError(f"{name!r} cannot name a field: give a Python name of your own")
        return fields

    @model_validator(mode="after")
    def _names(self) -> JudgeSpec:
        items = [*self.inputs, *self.judged]
        for name in items:
            if items.count(name) > 1:
                raise ValueError(f"judged: {name!r} is named twice in inputs and judged")
            if name == "fields":
                raise ValueError("inputs: 'fields' is the judge's own variable: rename the field")
        for key in ("a", "b"):
            name = getattr(self.aggregation, key)
            if name is not None and name not in self.judged:
                judged = ", ".join(self.judged) or "none"
                raise ValueError(
                    f"aggregation.{key}: {name!r} is not a judged field (judged: {judged})"
                )
        for index, model in enumerate(self.models):
            if self.models.index(model) != index:
                raise ValueError(f"models[{index}]: {model!r} is named twice")
        kinds = [f.type for f in self.fields.values()]
        if self.reply == "number" and (len(kinds) != 1 or kinds[0] not in _NUMBERS):
            raise ValueError("reply: number needs exactly one field, of type int or float")
        return self

    @classmethod
    def parse(cls, tree: Any, where: str = "judge spec") -> JudgeSpec:
        """The spec `tree` says (a YAML file's mapping, or a dict in Python).

        Raises:
            ConfigError: One line, ``WHERE: key.path: problem`` (a misspelt key's did-you-mean).
        """
        if not isinstance(tree, dict):
            raise ConfigError(f"{where}: expected a mapping of the judge's keys")
        try:
            return cls.model_validate(tree)
        except ValidationError as exc:
            raise ConfigError(f"{where}: {problem(exc, cls)}") from None

    def verdict_fields(self) -> list[str]:
        """The field(s) each juror's verdict is read from (`verdict`, or its default)."""
        pair = self.aggregation.method == "both_orders"
        if self.verdict is not None:
            return [self.verdict] if isinstance(self.verdict, str) else list(self.verdict)
        typed = [name for name, f in self.fields.items() if f.type != "str"]
        return typed[:2] if pair else typed[:1]


@dataclass(frozen=True)
class JudgeFile:
    """A checked judge: its spec, compiled templates, output schema and digest.

    Attributes:
        spec: What the file says.
        where: The file, as error lines name it.
        prompt: The user template.
        system: The system template, if any.
        schema: The answer's pydantic model (`moot.core.llm.structured` parses into it).
        digest: The spec's and its templates' content digest: an edited judge is a new run.
    """

    spec: JudgeSpec
    where: str
    prompt: jinja2.Template
    system: jinja2.Template | None
    schema: type[BaseModel]
    digest: str

    def messages(self, item: Mapping[str, Any], swapped: bool = False) -> list[dict[str, str]]:
        """The request about `item` (with ``a``'s and ``b``'s texts `swapped`: both orders)."""
        spec = self.spec
        values = {name: item[name] for name in [*spec.inputs, *spec.judged]}
        if swapped:
            a, b = spec.aggregation.a, spec.aggregation.b
            values[a], values[b] = values[b], values[a]
        for name in spec.judged:
            values[name] = fence(values[name], name)
        variables = {**values, "fields": _fields(spec)}
        asked = [{"role": "user", "content": self.prompt.render(variables).strip()}]
        if self.system is None:
            return asked
        return [{"role": "system", "content": self.system.render(variables).strip()}, *asked]

    def read(self, text: str) -> BaseModel:
        """A reply's answer: its JSON, or under ``reply: number`` the number leading it.

        Raises:
            OutputParseError: Neither reads, or the number is out of the field's range.
        """
        try:
            return parse_structured(text, self.schema)
        except OutputParseError:
            if self.spec.reply != "number":
                raise
        found = _LEADING_NUMBER.match(text)
        if found is None:
            raise OutputParseError("the reply does not start with a number") from None
        (name,) = self.spec.fields
        try:
            return self.schema.model_validate({name: found.group(1)})
        except ValidationError as exc:
            error = exc.errors()[0]["msg"]
            raise OutputParseError(f"{name} {found.group(1)}: {error}") from None


def load_judge(path: Path | str) -> JudgeFile:
    """Read and check the judge spec at `path` (YAML); its templates relative to its folder.

    Raises:
        ConfigError: One line, ``FILE: key: problem``: unreadable YAML, an unknown or missing
            key, a bad type, range or allowed values, a verdict or pair naming no declared
            field, a missing template or one using a variable the judge does not provide.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        tree = load_yaml(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except (UnicodeDecodeError, Unreadable) as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    return compile_judge(JudgeSpec.parse(tree, str(path)), path.parent, str(path), text)


def compile_judge(spec: JudgeSpec, folder: Path, where: str, text: str | None = None) -> JudgeFile:
    """`spec` checked and compiled, its templates read from `folder` (a spec built in Python).

    Args:
        spec: The judge.
        folder: Where its template paths start.
        where: What error lines call it (the file, or a name for a spec built in Python).
        text: The spec's own text, for the digest (default: the spec as JSON).

    Raises:
        ConfigError: As `load_judge`.
    """
    _check_verdict(spec, where)
    provided = {*spec.inputs, *spec.judged, "fields"}
    sources = {
        key: _source(folder, getattr(spec, key), where, key) for key in ("template", "system")
    }
    compiled = {key: _compiled(src, provided, where, key) for key, src in sources.items()}
    _try(spec, compiled, where)
    # a spec with the default reply keeps the digest it had before `reply` was a key
    unsaid = {"reply"} if spec.reply == "json" else set()
    own = text if text is not None else spec.model_dump_json(exclude=unsaid)
    digest = hashlib.sha256("\x00".join([own, *filter(None, sources.values())]).encode())
    return JudgeFile(
        spec,
        where,
        compiled["template"],  # type: ignore[arg-type]
        compiled["system"],
        _schema(spec),
        digest.hexdigest()[:16],
    )


def _check_verdict(spec: JudgeSpec, where: str) -> None:
    names = spec.verdict_fields()
    method = spec.aggregation.method
    wanted = 2 if method == "both_orders" else 1
    if len(names) != wanted:
        need = "two number fields (the scores of a and b)" if wanted == 2 else "one field"
        raise ConfigError(f"{where}: verdict: {method} needs {need}, got {len(names)}")
    for name in names:
        if name not in spec.fields:
            known = ", ".join(spec.fields)
            raise ConfigError(f"{where}: verdict: {name!r} is not a field (fields: {known})")
        kind = spec.fields[name].type
        numeric = kind in _NUMBERS or (kind == "bool" and method == "mean")
        if method != "majority" and not numeric:
            raise ConfigError(f"{where}: verdict: {method} needs a number, but {name!r} is {kind}")


def _source(folder: Path, name: str | None, where: str, key: str) -> str | None:
    if name is None:
        return None
    try:
        return (folder / name).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError(f"{where}: {key}: {name}: file not found beside the spec") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {key}: {name!r} is not UTF-8 text") from None


def _compiled(
    source: str | None, provided: set[str], where: str, key: str
) -> jinja2.Template | None:
    """The template `source`, with its variables checked against those the judge `provided`."""
    if source is None:
        return None
    env = template_environment()
    try:
        used = meta.find_undeclared_variables(env.parse(source))
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"{where}: {key}: line {exc.lineno}: {exc.message}") from None
    unknown = sorted(used - provided)
    if unknown:
        given = ", ".join(sorted(provided))
        raise ConfigError(
            f"{where}: {key}: uses {unknown[0]!r}, which the judge does not provide "
            f"(it provides {given}); name item fields in inputs or judged"
        )
    return env.from_string(source)


def _try(spec: JudgeSpec, compiled: Mapping[str, jinja2.Template | None], where: str) -> None:
    """Render each template once with stand-in item values: a bad use of `fields` fails here.

    Anything else a stand-in may fail on (arithmetic on a number field) is left to each item's
    own render, which `moot.graphs.custom_judge.load_items` tries before any request.
    """
    sample = {name: "text" for name in [*spec.inputs, *spec.judged]}
    for key, template in compiled.items():
        if template is None:
            continue
        try:
            template.render(sample | {"fields": _fields(spec)})
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"{where}: {key}: {exc.message or exc}") from None
        except Exception:  # noqa: BLE001, S110 - the stand-ins' fault, not the template's
            pass


def _fields(spec: JudgeSpec) -> dict[str, dict[str, Any]]:
    """The template variable ``fields``: each answer field's declaration, as given."""
    return {name: f.model_dump(exclude_none=True) for name, f in spec.fields.items()}


def _schema(spec: JudgeSpec) -> type[BaseModel]:
    """The answer's pydantic model: each field's type, range and allowed values."""
    return answer_model(spec.name, spec.fields)


def answer_model(name: str, fields: Mapping[str, OutputField]) -> type[BaseModel]:
    """The pydantic model of a structured answer's declared `fields` (a judge's, a verdict's).

    Its name (``<Name>Verdict``, from `name`) is the one ``response_format`` sends.
    """
    declared: dict[str, Any] = {}
    for key, f in fields.items():
        kind: Any = _PYTHON.get(f.type)
        if f.values is not None:
            kind = Literal[tuple(f.values)]  # type: ignore[valid-type]
        declared[key] = (kind, Field(ge=f.min, le=f.max, description=f.description))
    title = "".join(ch for ch in name.title() if ch.isascii() and ch.isalnum())
    return create_model(f"{title}Verdict", **declared)
