"""Dry runs from the run itself: the real pipeline, against a transport that never sends.

``--dry-run`` runs the command's own pipeline with a `PlanningClient`: every request goes to a
`PlanningTransport`, which sends nothing. It counts the request's prompt tokens
(`moot.core.llm.tokens`), and answers with a stand-in of the call's full budget, billed at that
budget, so the client's ledger is the plan: the calls a run would make, their prompt tokens and
their most output tokens, per role, stage and model. What a stand-in is depends on what reads
it: a caller whose parser wants a shape (a JSON verdict, a list of arguments) says what stands in
for its reply (`moot.core.llm.stand_in.StandIn`), and what the estimate cannot know with it (a list
that may come back short, a ReAct agent that may answer early).

A stand-in that its caller's parser refuses is a bug in moot, never a model's failure: the
planning client raises `StandInRefused` instead of asking again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from moot.core.llm.models import ModelClient
from moot.core.llm.prices import Prices
from moot.core.llm.spec import ModelSpec, Reply, Role, Transport
from moot.core.llm.stand_in import StandIn, json_stand_in
from moot.core.llm.structured import OutputParseError, Structured
from moot.core.llm.tokens import count_message_tokens

#: The stand-in of the call in flight in this task (set by `PlanningClient.complete`).
_STAND_IN: ContextVar[StandIn | None] = ContextVar("moot_stand_in", default=None)

#: A call with no budget at all (no ``max_tokens``, no context window) is counted at this.
UNBOUNDED_TOKENS = 4096


class StandInRefused(RuntimeError):
    """A caller's parser refused the stand-in it declared: moot's bug, not the model's."""


class PlanningTransport(Transport):
    """The transport of a dry run: counts each request, answers with its stand-in, sends nothing.

    Never registered: no spec names it; `PlanningClient` uses it for every spec.
    """

    name = "planning"
    prefixes = ()

    def __init__(self, spec: ModelSpec, client: PlanningClient) -> None:
        self.identity = f"planning:{spec.name}"
        self.context_window = spec.context_window
        self._client = client

    async def send(self, messages: list[dict[str, str]], params: dict[str, Any]) -> Reply:
        """The stand-in reply, billed at the call's budget (its ``max_tokens``, at most)."""
        prompt = count_message_tokens(messages)
        budget = params.get("max_tokens")
        if budget is None and "max_length" in params:  # the budget counts the prompt too
            budget = max(1, params["max_length"] - prompt)
        if budget is None:
            budget = UNBOUNDED_TOKENS
            self._client.noted(f"calls without a token budget: {{calls}}, each counted at {budget}")
        shape = _STAND_IN.get() or StandIn()
        self._client.noted(shape.note)
        self._client.at_most |= shape.at_most
        usage = {"prompt_tokens": prompt, "completion_tokens": budget}
        return Reply(shape.reply(budget), "length", usage)


class PlanningClient(ModelClient):
    """The model layer of a dry run: the real client's path, to `PlanningTransport` only.

    No cache, no budget, no key check, no model started; retries never happen (a stand-in is
    never empty). After the run, `moot.core.plan.Plan.of_run` reads its ledger as the plan.

    Args:
        prices: What the calls would cost (the command's ``--prices`` over the cost map).
    """

    paces = False  # nothing is sent: nothing waits for a rate limit

    def __init__(self, prices: Prices | None = None) -> None:
        super().__init__(prices=prices)
        self.notes: Counter[str] = Counter()
        self.at_most = False
        self.specs: dict[str, ModelSpec] = {}
        self.keys: list[tuple[str, str]] = []  # what else the run needs (a web search's key)

    def prepare(self, spec: ModelSpec) -> list[str]:
        """Nothing to prepare: no key is needed, no model is started."""
        self.specs[spec.name] = spec
        return []

    def noted(self, note: str | None) -> None:
        """Count one call under `note` (what the estimate cannot know)."""
        if note:
            self.notes[note] += 1

    async def complete(  # type: ignore[override]
        self, role: Role, messages: Any, *, stand_in: StandIn | None = None, **params: Any
    ) -> Any:
        """`ModelClient.complete`, its reply `stand_in` (at the call's budget)."""
        self.specs.setdefault(role.spec.name, role.spec)
        token = _STAND_IN.set(stand_in)
        try:
            return await super().complete(role, messages, **params)
        finally:
            _STAND_IN.reset(token)

    async def complete_parsed(
        self,
        role: Role,
        messages: Any,
        parse: Callable[[str], Any],
        repair: Callable[[str], str],
        *,
        stage: str,
        **params: Any,
    ) -> Structured[Any]:
        """One call, its stand-in parsed: no repair round (a refused stand-in is moot's bug)."""
        reply = await self.complete(role, messages, stage=stage, **params)
        try:
            return Structured(parse(reply.text), None, reply.text, (reply,))
        except OutputParseError as exc:
            raise StandInRefused(f"{stage}: its stand-in reply does not parse: {exc}") from None

    async def complete_structured(  # type: ignore[override]
        self, role: Role, messages: Any, schema: Any, *, stand_in: StandIn | None = None, **kw: Any
    ) -> Structured[Any]:
        """`ModelClient.complete_structured`, its stand-in a JSON value of `schema` by default."""
        shape = stand_in or json_stand_in(schema)
        return await super().complete_structured(role, messages, schema, stand_in=shape, **kw)

    def _transport(self, spec: ModelSpec) -> Transport:
        transport = self._transports.get(spec)
        if transport is None:
            transport = self._transports[spec] = PlanningTransport(spec, self)
        return transport
