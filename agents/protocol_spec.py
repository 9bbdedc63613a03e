"""A debate protocol as data: who speaks, in what order, who sees what, when it ends, in what.

A protocol is a YAML file (or the same `Protocol` object built in Python) with its prompt
templates beside it (Jinja files, paths relative to the protocol file). `load_protocol` reads
and checks it whole before any call: an unknown key, agent, template, extraction or model role,
a template variable no step provides, an output field no step produces. Each refusal is one line
naming the file and the key (``proto.yaml: turns.order[2]: unknown agent 'carol'``).

What each part means (the state machine is `moot.graphs.protocol_debate`):

- ``agents``: each a model (a spec, or ``$role`` bound at run time: ``$model`` is ``--model``,
  others ``--role NAME=SPEC``), a system template, a temperature and a token budget.
- ``turns.plan``: ``round_robin`` (agents in ``order``, each seeing the turns before it),
  ``simultaneous`` (a round's agents all see the state before the round: Du et al., 2023) or
  ``moderated`` (each round the moderator picks who speaks and may ask a question).
- ``visibility``: the turns a prompt's ``transcript`` holds: ``all``, ``last_round`` (the
  previous round and this round's earlier turns) or ``{summary: ...}`` (this round's earlier
  turns, with the previous rounds in ``summary``, a running summary that a named agent writes
  after each round: ChatEval's summarizer, Chan et al., 2023).
- ``rounds`` always bounds the debate; ``stop`` may end it earlier: a judge answering
  ``{"stop": ..., "reason": ...}`` after each round (MAD, Liang et al., 2023), or ``consensus``:
  every agent's extracted answer in a round is the same.
- ``extract``: named answers read from each turn's text by a regular expression (group 1, the
  last match; a turn without a match has none: never a default).
- ``final``: ``vote`` (majority of the last round's extracted answers), ``mean`` (the mean of
  the last round's extracted numbers, per extraction: ChatEval's averaged scores), ``conclude``
  (one agent's statement from the whole transcript) or ``verdict`` (a judge's structured reply).
- ``outputs.sft``: an SFT record per finished item, its user and assistant turns Jinja strings over
  the inputs and ``final``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import jinja2
import jinja2.meta
import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from moot.agents.judge_spec import OutputField, answer_model
from moot.core.errors import InputError
from moot.core.loader import Unreadable, load_yaml
from moot.core.validation import ConfigModel, problem
from moot.prompts import template_environment

#: The variables every protocol template is given, besides the input record's fields.
STEP_VARIABLES = frozenset(
    {"agent", "agents", "round", "rounds", "transcript", "summary", "question"}
)
#: What an ``outputs.sft`` string is given, besides the input record's fields.
OUTPUT_VARIABLES = frozenset({"final"})
#: An agent's model when it names none: the command's ``--model``.
DEFAULT_MODEL = "$model"

Name = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")]


class Agent(ConfigModel):
    """One speaker: its model, system prompt, sampling temperature, token budget and variables.

    `vars` are the agent's own template variables, given to its prompts and carried by its turns
    in others' transcripts (a debater's ``side``): a string is a Jinja template over the inputs,
    rendered once per item; any other value is taken as it is.
    """

    model: str = DEFAULT_MODEL
    system: str | None = None
    temperature: float | None = None  # None: the command's --temperature
    max_tokens: int = Field(512, gt=0)
    vars: dict[Name, Any] = {}


class Step(ConfigModel):
    """One call of a named agent with a template (a moderator's pick, a summary, a conclusion)."""

    agent: Name
    template: str
    system: str | None = None  # None: the agent's
    max_tokens: int | None = Field(None, gt=0)  # None: the agent's
    stage: Name | None = None  # the ledger's stage; None: the step's kind (``summary``, ...)


class Moderator(Step):
    """The moderator of a ``moderated`` plan: each round it names who speaks, and may ask."""


class Turns(ConfigModel):
    """The turn plan: who speaks in a round, in what order, with which prompt."""

    plan: Literal["round_robin", "simultaneous", "moderated"] = "round_robin"
    order: list[Name] | None = None  # default: every agent with no other part
    template: str
    opening: str | None = None  # the first round's prompt (default `template`)
    chat: bool = False  # an agent's own earlier prompts and turns come before the new prompt
    stages: list[Name] | None = None  # the ledger stage of an item's n-th turn (the last repeats)
    moderator: Moderator | None = None

    @model_validator(mode="after")
    def _moderated_has_moderator(self) -> Turns:
        if (self.plan == "moderated") != (self.moderator is not None):
            raise ValueError("a moderator is given exactly when the plan is 'moderated'")
        return self


class Summary(ConfigModel):
    """A running summary, written by `agent` with `template` after each round."""

    summary: Step


class Stop(ConfigModel):
    """What may end the debate before ``rounds``: a judge, or the agents' consensus."""

    judge: Step | None = None
    consensus: Name | None = None  # an extraction's name

    @model_validator(mode="after")
    def _one(self) -> Stop:
        if (self.judge is None) == (self.consensus is None):
            raise ValueError("give one of judge or consensus")
        return self


class Extraction(ConfigModel):
    """An answer read from a turn's text: the last match of `pattern` (its group 1, if any)."""

    pattern: str
    flags: list[Literal["ignorecase", "multiline", "dotall"]] = []

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern."""
        flags = {"ignorecase": re.I, "multiline": re.M, "dotall": re.S}
        return re.compile(self.pattern, sum((flags[f] for f in self.flags), 0))

    def read(self, text: str) -> str | None:
        """The answer in `text`, stripped, or None when there is none."""
        found = list(self.regex.finditer(text))
        if not found:
            return None
        last = found[-1]
        return (last.group(1) if self.regex.groups else last.group(0)).strip() or None


class Verdict(Step):
    """A judge's structured final reply: its named fields, declared as a judge's are."""

    fields: dict[Name, OutputField] = Field(min_length=1)


class Final(ConfigModel):
    """How an item ends: a vote or a mean over extracted answers, a conclusion, or a verdict."""

    vote: Name | None = None
    mean: list[Name] | None = Field(None, min_length=1)  # extractions read as numbers
    conclude: Step | None = None
    verdict: Verdict | None = None

    @model_validator(mode="after")
    def _one(self) -> Final:
        parts = (self.vote, self.mean, self.conclude, self.verdict)
        if sum(part is not None for part in parts) != 1:
            raise ValueError("give one of vote, mean, conclude or verdict")
        return self


class Sft(ConfigModel):
    """An SFT record per finished item: its user (`instruction`) and assistant turns."""

    instruction: str
    response: str
    system: str | None = None


class Outputs(ConfigModel):
    """What a run writes besides its transcripts."""

    sft: Sft | None = None


class Protocol(ConfigModel):
    """A debate protocol (see the module's docstring). Templates are relative to `base`."""

    name: Name
    description: str = ""
    inputs: list[Name] = Field(min_length=1)
    gold: Name | None = None  # an input field holding the right answer, for accuracy
    agents: dict[Name, Agent] = Field(min_length=1)
    rounds: int = Field(ge=0)  # 0: no debate, the final step alone
    turns: Turns
    visibility: Literal["all", "last_round"] | Summary = "all"
    stop: Stop | None = None
    extract: dict[Name, Extraction] = {}
    final: Final | None = None
    outputs: Outputs = Outputs()
    base: Path = Path(".")  # set by `load_protocol`: the protocol file's folder

    @property
    def order(self) -> list[str]:
        """The debaters, in turn order: `turns.order`, else every agent with no other part."""
        if self.turns.order is not None:
            return self.turns.order
        others = {step.agent for _, step in self.steps()}
        others.discard(self.final.conclude.agent if self.final and self.final.conclude else "")
        return [name for name in self.agents if name not in others]

    @property
    def summarizer(self) -> Step | None:
        """The running summary's step, with ``visibility: {summary: ...}``."""
        return self.visibility.summary if isinstance(self.visibility, Summary) else None

    def steps(self) -> Iterator[tuple[str, Step]]:
        """Every step that is not a debater's turn, with its key path."""
        candidates = {
            "turns.moderator": self.turns.moderator,
            "visibility.summary": self.summarizer,
            "stop.judge": self.stop and self.stop.judge,
            "final.conclude": self.final and self.final.conclude,
            "final.verdict": self.final and self.final.verdict,
        }
        yield from ((key, step) for key, step in candidates.items() if step is not None)

    def templates(self) -> Iterator[tuple[str, str]]:
        """Every template the protocol names, with its key path."""
        yield "turns.template", self.turns.template
        if self.turns.opening:
            yield "turns.opening", self.turns.opening
        for name, agent in self.agents.items():
            if agent.system:
                yield f"agents.{name}.system", agent.system
        for key, step in self.steps():
            yield f"{key}.template", step.template
            if step.system:
                yield f"{key}.system", step.system

    def agent_variables(self) -> set[str]:
        """The names of the agents' own variables (`Agent.vars`)."""
        return {name for agent in self.agents.values() for name in agent.vars}

    def roles(self) -> set[str]:
        """The ``$role`` names the agents' models leave to the command to bind."""
        return {a.model[1:] for a in self.agents.values() if a.model.startswith("$")}

    @functools.cached_property
    def verdict_model(self) -> type[BaseModel] | None:
        """The pydantic model of ``final.verdict``'s fields, if the protocol ends in one."""
        verdict = self.final and self.final.verdict
        return answer_model(self.name, verdict.fields) if verdict else None

    @functools.cached_property
    def environment(self) -> jinja2.Environment:
        """The Jinja environment of its templates (the prompts' settings: `moot.prompts`)."""
        return template_environment(jinja2.FileSystemLoader(self.base))

    def render(self, template: str, **variables: Any) -> str:
        """Render one of its templates."""
        return self.environment.get_template(template).render(**variables).strip()

    def render_text(self, text: str, **variables: Any) -> str:
        """Render one of its inline Jinja strings (an agent's `vars`, ``outputs.sft``)."""
        return self._inline(text).render(**variables).strip()

    @functools.cached_property
    def _inline(self) -> Any:
        """Its inline strings compiled once each (`Environment.from_string` compiles anew)."""
        return functools.lru_cache(maxsize=None)(self.environment.from_string)

    def save(self, path: str | Path) -> Path:
        """Write it as a protocol file at `path`, beside its templates (in `base`), and check it.

        So a protocol built in Python runs with ``moot protocol`` / `moot.protocol` and every
        guarantee they give (resume, claims, cards).

        Raises:
            InputError: `path` is not in `base` (its templates would not be found), or the
                protocol is refused by a check.
        """
        path = Path(path)
        if path.parent.resolve() != self.base.resolve():
            raise InputError(path, f"save the protocol beside its templates, in {self.base}")
        check_protocol(self, path)
        data = self.model_dump(mode="json", exclude={"base"}, exclude_defaults=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "utf-8")
        return path

    def digest(self) -> str:
        """What makes two protocols the same: its settings and its templates' text."""
        settings = self.model_dump(mode="json", exclude={"base"})
        texts = {
            path: (self.base / path).read_text(encoding="utf-8") for _, path in self.templates()
        }
        blob = json.dumps([settings, texts], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_protocol(path: str | Path) -> Protocol:
    """Read a protocol file and check it whole (`check_protocol`).

    Raises:
        InputError: Unreadable, not a mapping, or refused by a check: one line naming the file
            and the key.
    """
    path = Path(path)
    try:
        data = load_yaml(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read protocol: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:
        raise InputError(path, f"cannot read protocol: {exc.problem}", exc.place) from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping (name, inputs, agents, rounds, turns, ...)")
    if "base" in data:
        raise InputError(path, "base: unknown key (templates are relative to the protocol file)")
    try:
        protocol = Protocol.model_validate({**data, "base": path.parent})
    except ValidationError as exc:
        raise InputError(path, problem(exc, Protocol)) from None
    return check_protocol(protocol, path)


def check_protocol(protocol: Protocol, source: str | Path = "protocol") -> Protocol:
    """Check what the schema alone cannot: names, templates, variables, outputs.

    Args:
        protocol: The protocol.
        source: What to name in an error: its file (or ``protocol`` when built in Python).

    Returns:
        `protocol`, checked.

    Raises:
        InputError: ``source: key.path: problem``, the first problem found.
    """

    def refuse(key: str, text: str) -> InputError:
        return InputError(source, f"{key}: {text}")

    agents = protocol.agents
    for key, step in protocol.steps():
        if step.agent not in agents:
            raise refuse(f"{key}.agent", _unknown("agent", step.agent, agents))
    for i, name in enumerate(protocol.turns.order or []):
        if name not in agents:
            raise refuse(f"turns.order[{i}]", _unknown("agent", name, agents))
    if not protocol.order:
        raise refuse("turns.order", "no agent takes turns (every agent has another part)")
    for key, name in _extraction_names(protocol):
        if name not in protocol.extract:
            raise refuse(key, _unknown("extraction", name, protocol.extract))
    for name, extraction in protocol.extract.items():
        try:
            extraction.regex  # noqa: B018 (compiled here, to refuse it before any call)
        except re.error as exc:
            raise refuse(f"extract.{name}.pattern", f"not a regular expression ({exc})") from None
    if protocol.gold is not None and protocol.gold not in protocol.inputs:
        raise refuse("gold", f"{protocol.gold!r} is not one of the inputs")
    if protocol.gold is not None and not (protocol.final and protocol.final.vote):
        raise refuse("gold", "accuracy needs a final vote over an extracted answer")
    if not protocol.rounds and not (
        protocol.final and (protocol.final.conclude or protocol.final.verdict)
    ):
        raise refuse(
            "rounds", "0 rounds need a final step that calls a model (conclude or verdict)"
        )
    for i, name in enumerate(protocol.inputs):  # a step's own would hide it
        if name in STEP_VARIABLES:
            raise refuse(f"inputs[{i}]", f"{name!r} is a step's variable: name the input otherwise")
    for name, agent in protocol.agents.items():
        for var, value in agent.vars.items():
            if var in STEP_VARIABLES:
                raise refuse(f"agents.{name}.vars.{var}", "a step's variable: name it otherwise")
            if isinstance(value, str):
                _check_text(
                    protocol, source, f"agents.{name}.vars.{var}", value, set(protocol.inputs)
                )
    known = STEP_VARIABLES | set(protocol.inputs) | protocol.agent_variables()
    for key, template in protocol.templates():
        _check_template(protocol, source, key, template, known)
    if protocol.outputs.sft is not None:
        given = OUTPUT_VARIABLES | set(protocol.inputs) if protocol.final else set(protocol.inputs)
        for field, text in protocol.outputs.sft.model_dump(exclude_none=True).items():
            _check_text(protocol, source, f"outputs.sft.{field}", text, given)
    return protocol


def _extraction_names(protocol: Protocol) -> Iterator[tuple[str, str]]:
    if protocol.stop and protocol.stop.consensus:
        yield "stop.consensus", protocol.stop.consensus
    if protocol.final and protocol.final.vote:
        yield "final.vote", protocol.final.vote
    if protocol.final and protocol.final.mean:
        yield from ((f"final.mean[{i}]", name) for i, name in enumerate(protocol.final.mean))


def _check_template(
    protocol: Protocol, source: str | Path, key: str, template: str, known: set[str]
) -> None:
    path = protocol.base / template
    if not path.is_file():
        raise InputError(source, f"{key}: no template {template!r} (beside the protocol file)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, f"{key}: cannot read {template!r} ({exc})") from None
    _check_text(protocol, source, key, text, known, template)


def _check_text(
    protocol: Protocol,
    source: str | Path,
    key: str,
    text: str,
    known: set[str],
    template: str | None = None,
) -> None:
    """Refuse Jinja `text` that does not parse or uses a variable not in `known`."""
    where = f"{key} ({template})" if template else key
    try:
        tree = protocol.environment.parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise InputError(source, f"{where}: line {exc.lineno}: {exc.message}") from None
    unknown = sorted(jinja2.meta.find_undeclared_variables(tree) - known)
    if unknown:
        name = unknown[0]
        hint = _unknown("variable", name, known)
        raise InputError(source, f"{where}: {hint}; a step gives the inputs and {_listed(known)}")


def _unknown(what: str, name: str, known: Any) -> str:
    from moot.core.validation import did_you_mean

    return f"unknown {what} {name!r}{did_you_mean(name, list(known))}"


def _listed(names: set[str]) -> str:
    return ", ".join(sorted(names))
