"""`moot protocol`: a debate protocol as data (`moot.agents.protocol_spec`), run on records."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli import runtime
from moot.cli.job import ModelJob
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import Output
from moot.result import Result


def register(commands: Commands) -> None:
    """Add `moot protocol`."""
    commands.add(
        "protocol",
        RunProtocol,
        "run a debate protocol of your own (a YAML file) on input records",
        "Run a protocol file (agents, turn plan, visibility, stop rule, final step; see "
        "docs/protocols.md) on each record of --in. Reruns resume; see docs/cli.md.",
        plan=True,
        output=Output("protocol"),
    )


def _debatune() -> Any:
    from moot.graphs.debatune_debate import shipped_protocol

    return shipped_protocol()


#: The protocols shipped with moot, by name: ``moot protocol debatune`` debates records of
#: topic, stance and argument as `moot debate` does (DEBATunE, Section 3.1).
SHIPPED = {"debatune": _debatune}


def binding(text: str) -> tuple[str, str]:
    """``--role NAME=SPEC``: the role's name and its model spec."""
    import argparse

    name, sep, spec = text.partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=SPEC, got {text!r}")
    return name.strip(), spec.strip()


class RunProtocol(ModelJob):
    """`moot protocol PROTOCOL --in RECORDS --out DIR`: each record through the protocol."""

    class Settings(
        opt.model_settings(
            what="model of the agents whose model is $model",
            temperature=0.7,
            concurrency=8,
            unit="items",
        ),
    ):
        """`moot protocol`'s settings."""

        protocol: str = flag(
            positional=True,
            metavar="PROTOCOL",
            help="the protocol file, or a shipped protocol's name: " + ", ".join(SHIPPED),
        )
        items: Path = flag(
            flags=("--in",),
            parse=opt.input_file,
            metavar="FILE",
            help="input records, JSONL or JSON (each with the protocol's inputs; required)",
        )
        out: Path = opt.out_flag()
        role: list[tuple[str, str]] = flag(
            [],
            action="append",
            parse=binding,
            metavar="NAME=SPEC",
            help="the model of the agents whose model is $NAME (repeatable)",
        )

    settings: Settings

    @functools.cached_property
    def inputs(self) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
        """The protocol, its input records and each agent's role, all checked."""
        from moot.agents.protocol_spec import load_protocol
        from moot.core.errors import InputError
        from moot.graphs.protocol_run import read_inputs

        given = self.settings
        shipped = SHIPPED.get(given.protocol)
        if shipped is None and not Path(given.protocol).is_file():
            known = ", ".join(SHIPPED)
            raise InputError(given.protocol, f"no such protocol file (nor a shipped one: {known})")
        protocol = shipped() if shipped else load_protocol(given.protocol)
        records = self.limited(read_inputs(protocol, given.items))
        return protocol, records, self.roles(protocol)

    def roles(self, protocol: Any) -> dict[str, Any]:
        """Each agent's role: its model (``$model`` is ``--model``; ``$NAME``, ``--role``).

        Raises:
            InputError: An agent's ``$NAME`` is bound by no ``--role``.
        """
        from moot.core.errors import InputError
        from moot.core.llm.spec import Role

        given = self.settings
        bound = {"model": given.model, **dict(given.role)}
        roles = {}
        for name, agent in protocol.agents.items():
            text = agent.model
            if text.startswith("$"):
                if text[1:] not in bound:
                    raise InputError(
                        given.protocol,
                        f"agents.{name}.model: model role {text} is not bound "
                        f"(give --role {text[1:]}=SPEC)",
                    )
                text = bound[text[1:]]
            # only --model's agents are sent to --api-base: another model has its own server
            api_base = given.api_base if text == given.model else None
            spec = runtime.spec_from(self.args, text, api_base=api_base)
            temperature = given.temperature if agent.temperature is None else agent.temperature
            roles[name] = Role(name, spec, temperature)
        return roles

    def specs(self) -> list[Any]:
        """Every agent's model, once the protocol and its records are checked."""
        return list(dict.fromkeys(role.spec for role in self.inputs[2].values()))

    def calls(self, client: Any, progress: Any) -> Any:
        """Each record through the protocol, into ``--out``."""
        from moot.graphs.protocol_run import run_protocol

        given, (protocol, records, roles) = self.settings, self.inputs
        return run_protocol(
            protocol,
            records,
            given.out,
            roles,
            client,
            seed=given.seed,
            concurrency=given.concurrency,
            progress=progress,
        )

    def report(self, done: Any, client: Any) -> Result:
        """What the run made: its summary, and where the transcripts are."""
        out, summary = self.settings.out, done.summary
        outputs = {"transcripts": out / "transcripts.jsonl", "summary": out / "summary.json"}
        if (out / "sft.jsonl").exists():
            outputs |= {"sft": out / "sft.jsonl", "card": out / "README.md"}
        ended = ", ".join(f"{by} {n}" for by, n in sorted(summary["ended_by"].items()))
        lines = [
            f"items       {summary['items']} ({summary['ok']} ok, "
            f"{summary['incomplete']} incomplete, {summary['errors']} failed)",
            f"ended by    {ended or '-'}; mean rounds {_shown(summary['mean_rounds'])}",
        ]
        if "accuracy" in summary:
            acc = summary["accuracy"]
            rounds = " ".join(_shown(a) for a in acc["per_round"])
            lines.append(
                f"accuracy    final {_shown(acc['final'])}; per round {rounds}; "
                f"single agent {_shown(acc['single_agent'])} (of {acc['items']})"
            )
        lines += [f"{name:<11} {path}" for name, path in outputs.items()]
        failures = [
            f"moot: failed {r['id']}: "
            + (r["error"] or f"{r['failure']['step']}: {r['failure']['error']}")
            for r in done.records
            if r["status"] in ("error", "incomplete")
        ]
        return self.finish(
            done.tallies,
            client.ledger,
            failed=bool(summary["incomplete"]),  # a reply no rerun would read better
            lines=lines,
            messages=failures,
            outputs=outputs,
        )


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
