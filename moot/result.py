"""What a moot command did: the one result type of the command line and the Python API.

Every command (`moot.cli.runtime.execute`) returns a `Result`: its exit code, the files it wrote,
what each of its runs did (`moot.core.runs.Tally`), what its model calls used and cost (the
ledger), and the lines the command line prints. The CLI prints it (`show`); `moot.api` returns it,
readable as records, a `datasets.Dataset` or a pandas frame, and shown inline in a notebook.
"""

from __future__ import annotations

import html
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The exit codes of a command that ran: done; failed (some items, a push, or the machine: what
#: finished is kept, a rerun retries the rest); stopped by ``--budget`` (a rerun goes on).
DONE, FAILED, STOPPED = 0, 1, 3

#: What an exit code says of a run, in words.
STATUS = {DONE: "done", FAILED: "failed", STOPPED: "stopped"}


@dataclass
class Result:
    """What one command did.

    Attributes:
        command: The command (``moot debate``).
        exit_code: Its exit code: 0 done, 1 failed (some items, or a push), 3 stopped by
            ``--budget``.
        folder: Its output folder (``--out DIR``; None for a command that writes a file).
        outputs: The files and folders it wrote, by name, its main records first
            (``{"dataset": .../dataset.jsonl, "debates": ..., "card": ...}``), absolute.
        tallies: What each of its runs did with its items.
        ledger: What its model calls used and cost (a `moot.core.llm.ledger.UsageLedger`; None:
            it called no model).
        lines: What it reports on standard output, before its summary table.
        messages: Its failures and what to do about them (standard error).
        notes: Its warnings and notes, said before it ran (standard error).
        plan: A dry run's `moot.core.plan.Plan` (nothing was sent or written); None for a run.
        summary: Its summary table: items, then calls, tokens and cost (None: it has none).
        pushed: The Hub repository's URL it pushed its artifact to (``--push-to-hub``).
        stages: A `moot run`'s stages that ran, by name, each its command's result.
        prompts: The built-in templates its ``--prompts`` replaced, name → digest of the text
            it used (none: the paper's own).
    """

    command: str
    exit_code: int = DONE
    folder: Path | None = None
    outputs: dict[str, Path] = field(default_factory=dict)
    tallies: list[Any] = field(default_factory=list)
    ledger: Any = None
    lines: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plan: Any = None
    summary: str | None = None
    pushed: str | None = None
    stages: dict[str, Result] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """``planned`` (a dry run), ``done``, ``failed`` or ``stopped`` (``--budget``)."""
        if self.plan is not None:
            return "planned"
        return STATUS.get(self.exit_code, "failed")

    @property
    def ok(self) -> bool:
        """The command did all it was asked."""
        return self.exit_code == DONE

    def records(self, name: str | None = None) -> list[dict[str, Any]]:
        """The records of an output (default: the first, the command's main records).

        Args:
            name: The output's name in `outputs` (``debates``, ``judgments``).

        Raises:
            InputError: The output is not a JSON or JSONL file of records, or cannot be read.
        """
        from moot.core.data.records import read_json_file, read_records
        from moot.core.errors import InputError

        path = self._output(name)
        if path.suffix not in (".json", ".jsonl"):  # a model folder, a chart, a report
            raise InputError(path, f"{self.command}'s output is not a file of records")
        if path.suffix == ".jsonl":
            return [record for _, record in read_records(path)]
        data = read_json_file(path)
        if isinstance(data, list):
            return data
        if isinstance(data, dict):  # a summary: one record
            return [data]
        raise InputError(path, "not a file of records")

    def to_dataset(self, name: str | None = None) -> Any:
        """An output's records as a `datasets.Dataset` (see `records`)."""
        from datasets import Dataset

        return Dataset.from_list(self.records(name))

    def to_pandas(self, name: str | None = None) -> Any:
        """An output's records as a pandas ``DataFrame`` (see `records`)."""
        import pandas

        return pandas.DataFrame.from_records(self.records(name))

    def view(self) -> str:
        """The `moot view` page of this command's output folder, as HTML.

        Raises:
            InputError: The command wrote no folder `moot view` can show.
        """
        from moot.core.errors import InputError
        from moot.core.redaction import known_secrets
        from moot.core.view.page import render_view
        from moot.core.view.payload import view_payload

        if self.folder is None:
            raise InputError(self.command, "wrote no folder for `moot view` to show")
        payload = view_payload([self.folder])  # refuses a folder it cannot show
        return render_view(payload, f"moot view: {self.folder}", known_secrets())

    def _output(self, name: str | None) -> Path:
        from moot.core.errors import InputError

        if not self.outputs:
            raise InputError(self.command, "wrote no output")
        if name is None:
            return next(iter(self.outputs.values()))
        if name not in self.outputs:
            from moot.core.validation import did_you_mean

            known = list(self.outputs)
            raise InputError(self.command, f"no output {name!r}{did_you_mean(name, known)}")
        return self.outputs[name]

    def __str__(self) -> str:
        parts = [*self.lines]
        if self.summary:
            parts += ["", self.summary]
        parts += self.messages
        return "\n".join([f"{self.command}: {self.status}", *parts])

    def _repr_html_(self) -> str:
        """A notebook shows the summary, the outputs, and the `moot view` page if there is one."""
        rows = "".join(
            f"<tr><td>{html.escape(name)}</td><td><code>{html.escape(str(path))}</code></td></tr>"
            for name, path in self.outputs.items()
        )
        text = "\n".join([*self.lines, "", self.summary or "", *self.notes, *self.messages])
        parts = [
            f"<b>{html.escape(self.command)}</b>: {html.escape(self.status)}",
            f"<table>{rows}</table>" if rows else "",
            f"<pre>{html.escape(text.strip())}</pre>",
        ]
        from moot.core.errors import MootError

        try:
            page = self.view()
        except MootError:  # a folder `moot view` cannot show: the rest is shown
            page = None
        if page is not None:
            parts.append(
                f'<iframe srcdoc="{html.escape(page)}" style="width:100%;height:32em;border:0">'
                "</iframe>"
            )
        return "\n".join(part for part in parts if part)


def show(result: Result, quiet: bool = False) -> None:
    """Print `result` as the command line does.

    Its lines and summary on standard output (unless `quiet`, but a dry run's plan always), its
    messages on standard error.
    """
    if not quiet or result.plan is not None:  # a dry run's plan is what it was asked for
        for line in result.lines:
            print(line)
    if not quiet:
        if result.summary is not None:
            print()
            print(result.summary)
        if result.pushed:
            print(f"pushed    {result.pushed}")
    for message in result.messages:
        print(message, file=sys.stderr)
