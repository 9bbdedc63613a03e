"""`moot models check`: one round trip to a model, before a long run pays for many."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.result import Result

#: The round trip's request and its completion budget.
CHECK_MESSAGES = [{"role": "user", "content": "Reply with one short sentence: are you ready?"}]
CHECK_TOKENS = 32


class Check(Job):
    """`moot models check SPEC`: the reply's latency and tokens, without the cache or retries.

    A model with several endpoints is checked at each of them, one after the other; the first
    that fails ends the check (exit 2).
    """

    class Settings(opt.call_settings(), opt.CommonSettings):
        """`moot models check`'s settings: a short timeout, no retry, no cache."""

        spec: str = flag(positional=True, metavar="SPEC", help="provider/model, e.g. local/smollm2")
        timeout: float | None = 60.0
        max_retries: int = 0
        no_cache: bool = True
        cache: Path | None = None
        concurrency: int = 1  # one request at a time: the embedded server needs a single slot

    settings: Settings

    def run(self) -> Result:
        """One round trip, to each endpoint of the model in turn."""
        from dataclasses import replace

        from moot.core.llm.spec import Role
        from moot.core.redaction import public_url

        role = self.role("check", self.settings.spec)
        if not role.spec.api_bases:
            return self.trips(self.check_one(role, role.spec.name), 1)
        lines = []
        for index, url in enumerate(role.spec.api_bases):
            router = role.spec.router.only(index) if role.spec.router is not None else None
            one = replace(role.spec, api_base=url, api_bases=(), router=router)
            shown = f"{one.name} at {public_url(url)}"
            lines += self.check_one(Role(role.name, one, role.temperature), shown)
        return self.trips(lines, len(role.spec.api_bases))

    def trips(self, lines: list[str], trips: int) -> Result:
        """The check's result: its round trips are its items (its plan's), with no summary table."""
        from moot.core.runs import Tally

        result = self.finish(lines=lines)
        result.tallies = [Tally("round trips", trips, done=trips)]
        return result

    def check_one(self, role: Any, shown: str) -> list[str]:
        """What one endpoint's round trip took; an `EndpointError` if it failed."""
        from moot.core.errors import EndpointError, ModelCallError

        client = runtime.client_for(self.args, role.spec)
        start = time.perf_counter()
        try:
            reply = runtime.run(
                client.complete(
                    role, CHECK_MESSAGES, stage="check", max_tokens=CHECK_TOKENS, seed=0
                )
            )
        except ModelCallError as exc:
            raise EndpointError(str(exc)) from None
        latency = time.perf_counter() - start
        return [
            f"{shown}: ok in {latency * 1000:.0f} ms, {reply.prompt_tokens} prompt + "
            f"{reply.completion_tokens} completion tokens",
            f"reply: {reply.text.strip()[:200]}",
        ]


def register(commands: Commands) -> None:
    """Add `moot models check`."""
    commands.add("check", Check, "one round trip: latency and tokens", group="models", plan=True)
