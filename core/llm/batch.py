"""Batch mode (``--batch``): requests answered through a provider's batch API, at its batch price.

Providers answer batches of requests within 24 hours at about half the price (OpenAI's Batch API;
research notes in ``docs/cli.md``, "Batches"). In batch mode `ModelClient` hands each request
that missed the cache to a `BatchQueue` instead of sending it. The queue holds requests until
every item of the run is waiting on one (`Flight`: a round of every debate in flight, one speech
step of every judged debate), then submits them as one batch per model, polls it, and hands each
reply back to the call that asked: the call bills, records and caches it as it would a live reply,
so outputs are the same and a later live run reuses them.

Nothing is submitted twice. `BatchBook`, a journal in the run's folder, records each batch's
requests (by request key) *before* it is submitted, and its id once the provider made it. A rerun,
or the run after a kill, asks the same requests again (its items resume): each one that a
recorded batch holds waits on that batch instead. A batch recorded without its id (a kill between
the two lines) is looked for at the provider by the intent id it carries in its metadata.

A request the provider failed or left unanswered (expired, cancelled) is a `Transient` failure
like a live 5xx: the client's one retry loop asks it again, in the next batch (or live, with
``--batch-fallback live``). With ``--no-wait`` a request whose batch has not ended raises
`BatchPending`: the item stops, unlogged, and the command says how to collect.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from moot.core.errors import BatchPending, ModelCallError
from moot.core.llm.failures import Transient
from moot.core.llm.spec import Reply

#: How often a submitted batch is polled, in seconds (inspect_ai ticks every 15 s, curator 60).
POLL_SECONDS = 30.0
#: How long a request waits for others once every item is waiting (a fan-out's siblings, asked
#: in the same turn of the event loop, arrive within it).
SETTLE_SECONDS = 0.02
#: Without a run engine to say items are waiting (a direct `ModelClient` caller), a batch goes
#: when no request has come for this long.
QUIET_SECONDS = 1.0
#: Looks at a batch that may fail in a row (the provider unreachable) before its askers fail:
#: never submitted again in this run, the batch is collected by the next (its journal holds it).
MAX_LOOK_FAILURES = 10
#: Most requests in one batch (OpenAI's limit; its 200 MB file limit is `MAX_BYTES`).
MAX_REQUESTS = 50_000
MAX_BYTES = 190_000_000


class BatchAPI(Protocol):
    """A provider's batch endpoint, as `BatchQueue` uses it (one per model and endpoint)."""

    #: Its provider's name, for the journal and messages (``openai``).
    provider: str

    async def submit(self, requests: dict[str, dict[str, Any]], intent: str) -> str:
        """Submit requests (request key → request body) as one batch; its id.

        The batch carries `intent` (in its metadata) so that `find` can tell it.
        """
        ...

    async def find(self, intent: str) -> str | None:
        """The id of the batch submitted with `intent`, if the provider has one."""
        ...

    async def state(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    async def results(self, state: BatchState, keys: list[str]) -> dict[str, Reply | Exception]:
        """Each request's reply, or why it has none (`Transient`: ask it again)."""
        ...


@dataclass(frozen=True)
class BatchState:
    """A batch as its provider last described it.

    Attributes:
        id: The provider's batch id.
        status: The provider's word for it (``in_progress``, ``completed``, ``expired`` ...).
        ended: Whether it will change no more (its results can be read).
        total: Requests in it.
        completed: Requests answered so far.
        failed: Requests the provider failed so far.
        detail: What the provider keeps for `BatchAPI.results` (its file ids ...).
    """

    id: str
    status: str
    ended: bool
    total: int = 0
    completed: int = 0
    failed: int = 0
    detail: Any = None


# --- which items of a run wait on a batch --------------------------------------------------------


@dataclass(eq=False)
class Flight:
    """The items a run has in flight, and how many of them wait on a batch (`waiting`).

    `moot.core.runs.run_items` makes one per run: `workers` is how many of its workers are
    still taking items; each item's task runs within `Flight.item`.
    """

    workers: int
    waiting: int = 0

    def stalled(self) -> bool:
        """Whether every item in flight waits on a batch: nothing else will ask anything."""
        return self.waiting >= self.workers

    @contextlib.contextmanager
    def item(self) -> Iterator[None]:
        """Run the current task as one of the flight's items."""
        token = _ITEM.set(_Item(self))
        try:
            yield
        finally:
            _ITEM.reset(token)


@dataclass(eq=False)
class _Item:
    flight: Flight
    asking: int = 0  # its requests waiting on a batch (a fan-out asks several at once)

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        self.asking += 1
        self.flight.waiting += self.asking == 1
        try:
            yield
        finally:
            self.asking -= 1
            self.flight.waiting -= self.asking == 0


_ITEM: contextvars.ContextVar[_Item | None] = contextvars.ContextVar("moot_item", default=None)


# --- the journal ---------------------------------------------------------------------------------


@dataclass
class Submission:
    """One batch in the journal: its requests' keys, and its provider's id once made."""

    intent: str
    provider: str
    model: str
    keys: list[str]
    batch: str | None = None
    dropped: bool = False  # submitted by no one (a rerun looked for it at the provider)


class BatchBook:
    """The journal of a run's batches: ``.moot/batches.jsonl`` in its folder, append-only.

    Each line is fsynced before the step it records happens (the intent before the submission),
    so a kill at any point leaves a journal a rerun can trust.

    Args:
        path: The journal file.
        command: The command line of this run (``moot collect`` runs the last one again);
            None: the last one recorded.
    """

    def __init__(self, path: Path, command: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.submissions: dict[str, Submission] = {}
        self._latest: dict[str, Submission] = {}  # request key → the last batch that holds it
        self._recorded: dict[str, Any] | None = None  # the last command line in the journal
        self._torn = False  # its last line was cut short (a kill mid-write): ended first
        self._read()
        self.command = command or self._recorded

    def holding(self, key: str) -> Submission | None:
        """The last recorded batch that holds request `key`, if any (a dropped one is none)."""
        found = self._latest.get(key)
        return None if found is None or found.dropped else found

    def intend(self, provider: str, model: str, keys: list[str]) -> Submission:
        """Record a batch about to be submitted; it holds `keys` from now on."""
        entry = Submission(uuid.uuid4().hex, provider, model, keys)
        self._write({"intent": entry.intent, "provider": provider, "model": model, "keys": keys})
        self._take(entry)
        return entry

    def made(self, entry: Submission, batch_id: str) -> None:
        """Record the provider's id of `entry`'s batch."""
        self._write({"intent": entry.intent, "batch": batch_id})
        entry.batch = batch_id

    def drop(self, entry: Submission) -> None:
        """Record that `entry`'s batch was never made: its requests are asked again."""
        self._write({"intent": entry.intent, "dropped": True})
        entry.dropped = True

    def _take(self, entry: Submission) -> None:
        self.submissions[entry.intent] = entry
        for key in entry.keys:
            self._latest[key] = entry

    def _read(self) -> None:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as lines:
            for line in lines:
                self._torn = not line.endswith("\n")
                try:
                    record = json.loads(line)
                except ValueError:  # the last line of a kill mid-write: its step never happened
                    continue
                if "command" in record:
                    self._recorded = record["command"]
                    continue
                entry = self.submissions.get(record.get("intent", ""))
                if "keys" in record:
                    self._take(
                        Submission(
                            record["intent"], record["provider"], record["model"], record["keys"]
                        )
                    )
                elif entry is not None and record.get("batch"):
                    entry.batch = record["batch"]
                elif entry is not None and record.get("dropped"):
                    entry.dropped = True

    def _write(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            if self._torn:
                out.write("\n")
                self._torn = False
            if self.command is not None and self.command != self._recorded:
                out.write(json.dumps({"command": self.command}) + "\n")
                self._recorded = self.command
            out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())


def book_path(out: Path, folder: bool) -> Path:
    """Where a run's journal is: in its folder's ``.moot/``, or beside its output file."""
    out = Path(out)
    if folder:
        return out / ".moot" / "batches.jsonl"
    return out.with_name(f".{out.name}.batches.jsonl")


# --- the queue -----------------------------------------------------------------------------------


@dataclass
class _Asked:
    api: BatchAPI
    body: dict[str, Any]
    futures: list[asyncio.Future[Reply]] = field(default_factory=list)
    flight: Flight | None = None


class BatchQueue:
    """Gathers a run's requests into batches, submits them once, and hands back their replies.

    Args:
        book: The run's journal.
        wait: Wait for batches to end (else `BatchPending` once submitted: ``--no-wait``).
        poll: Seconds between two looks at a batch.
        live_fallback: A request a batch failed is asked again live, not in the next batch.
        report: Told one line whenever the batches' progress changes (None: not shown).
    """

    def __init__(
        self,
        book: BatchBook,
        *,
        wait: bool = True,
        poll: float = POLL_SECONDS,
        live_fallback: bool = False,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.book, self.wait, self.poll = book, wait, poll
        self.live_fallback, self.report = live_fallback, report
        self._queued: dict[str, _Asked] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._submitting: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references
        self._last_ask = 0.0
        self._outcomes: dict[str, asyncio.Task[dict[str, Reply | Exception]]] = {}
        self._found: dict[str, asyncio.Task[str | None]] = {}
        self._used: set[tuple[str, str]] = set()  # (key, batch) whose failure was taken
        self._states: dict[str, BatchState] = {}
        self._shown = ""
        #: Batches this queue submitted.
        self.submitted = 0

    async def answer(self, api: BatchAPI, key: str, body: dict[str, Any]) -> Reply:
        """The reply to request `body` (its cache key `key`), from a recorded batch or a new one.

        Raises:
            Transient: The batch failed the request or left it unanswered: ask it again.
            ModelCallError: The provider refused it for good.
            BatchPending: Its batch has not ended and the run does not wait.
        """
        item = _ITEM.get()
        with item.waiting() if item is not None else contextlib.nullcontext():
            entry = self.book.holding(key)
            if entry is not None and (key, entry.intent) not in self._used:
                batch_id = entry.batch or await self._find(api, entry)
                if batch_id is not None:
                    outcomes = await self._outcome(api, entry.intent, batch_id, entry.keys)
                    outcome = self._take(key, entry.intent, batch_id, outcomes)
                    if isinstance(outcome, Reply):
                        return outcome
                    raise outcome
            return await self._ask(api, key, body, item)

    def _take(
        self, key: str, intent: str, batch_id: str, outcomes: dict[str, Reply | Exception]
    ) -> Reply | Exception:
        """Request `key`'s reply in a batch's `outcomes`, or its failure: asked in a new batch."""
        outcome = outcomes.get(key) or Transient(f"batch {batch_id}: no answer")
        if not isinstance(outcome, Reply):
            self._used.add((key, intent))  # its next attempt: a new batch
        return outcome

    async def _ask(self, api: BatchAPI, key: str, body: dict[str, Any], item: Any) -> Reply:
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        asked = self._queued.get(key)
        if asked is None:  # the same request twice (two items ask it): one line, both answered
            asked = self._queued[key] = _Asked(api, body, flight=item and item.flight)
        asked.futures.append(future)
        self._last_ask = time.monotonic()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_when_stalled())
        return await future

    def _stalled(self) -> bool:
        """Whether the queued requests should go: nothing else will be asked before replies."""
        if len(self._queued) >= MAX_REQUESTS:
            return True
        flights = {id(a.flight): a.flight for a in self._queued.values()}
        if None in flights.values() and time.monotonic() - self._last_ask < QUIET_SECONDS:
            return False
        return all(flight is None or flight.stalled() for flight in flights.values())

    async def _flush_when_stalled(self) -> None:
        while self._queued:
            await asyncio.sleep(SETTLE_SECONDS)
            if self._stalled():
                queued, self._queued = self._queued, {}
                by_api: dict[int, list[tuple[str, _Asked]]] = {}
                for key, asked in queued.items():
                    by_api.setdefault(id(asked.api), []).append((key, asked))
                for group in by_api.values():
                    for part in _parts(group):
                        task = asyncio.create_task(self._submit(part))
                        self._submitting.add(task)
                        task.add_done_callback(self._submitting.discard)

    async def _submit(self, part: list[tuple[str, _Asked]]) -> None:
        """Submit one batch and hand each asker its reply (or its failure)."""
        api = part[0][1].api
        keys = [key for key, _ in part]
        try:
            entry = self.book.intend(api.provider, str(part[0][1].body.get("model", "")), keys)
            try:
                batch_id = await api.submit({key: asked.body for key, asked in part}, entry.intent)
            except Exception:
                # the batch may exist though its reply was lost: look before dropping it
                batch_id = await _quietly(api.find(entry.intent))
                if batch_id is None:
                    self.book.drop(entry)
                    raise
            self.book.made(entry, batch_id)
            self.submitted += 1
            outcomes = await self._outcome(api, entry.intent, batch_id, keys)
        except Exception as exc:  # every asker of the batch gets its failure
            for _, asked in part:
                for future in asked.futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        except BaseException:  # cancelled: so are its askers
            for _, asked in part:
                for future in asked.futures:
                    future.cancel()
            raise
        for key, asked in part:
            outcome = self._take(key, entry.intent, batch_id, outcomes)
            for future in asked.futures:
                if future.done():
                    continue
                if isinstance(outcome, Reply):
                    future.set_result(outcome)
                else:
                    future.set_exception(outcome)

    def _outcome(
        self, api: BatchAPI, intent: str, batch_id: str, keys: list[str]
    ) -> asyncio.Task[dict[str, Reply | Exception]]:
        """The one task that waits for batch `batch_id` to end and reads its results."""
        task = self._outcomes.get(intent)
        if task is None:
            task = self._outcomes[intent] = asyncio.create_task(self._collect(api, batch_id, keys))
        return task

    async def _collect(
        self, api: BatchAPI, batch_id: str, keys: list[str]
    ) -> dict[str, Reply | Exception]:
        failures = 0
        while True:
            try:
                state = await api.state(batch_id)
                if state.ended:
                    outcomes = await api.results(state, keys)
            except Transient as exc:  # the provider, not the batch: look again
                failures += 1
                if failures >= MAX_LOOK_FAILURES:
                    raise ModelCallError(
                        f"batch {batch_id}: {exc} ({failures} looks in a row failed); rerun to "
                        "collect it: it is not submitted again"
                    ) from None
                await asyncio.sleep(self.poll)
                continue
            failures = 0
            self._states[batch_id] = state
            self._show()
            if state.ended:
                return outcomes
            if not self.wait:
                raise BatchPending(f"batch {batch_id} is {state.status}")
            await asyncio.sleep(self.poll)

    def _find(self, api: BatchAPI, entry: Submission) -> asyncio.Task[str | None]:
        """Look once for a batch recorded without its id; drop it from the journal if none."""
        task = self._found.get(entry.intent)
        if task is None:

            async def look() -> str | None:
                batch_id = await api.find(entry.intent)
                if batch_id is None:
                    self.book.drop(entry)
                else:
                    self.book.made(entry, batch_id)
                return batch_id

            task = self._found[entry.intent] = asyncio.create_task(look())
        return task

    def _show(self) -> None:
        if self.report is None:
            return
        states = self._states.values()
        ended = [s for s in states if s.ended]
        statuses: dict[str, int] = {}
        for state in ended:
            statuses[state.status] = statuses.get(state.status, 0) + 1
        parts = [f"{len(states) - len(ended)} in progress"]
        parts += [f"{n} {status}" for status, n in sorted(statuses.items())]
        total = sum(s.total for s in states)
        done, failed = sum(s.completed for s in states), sum(s.failed for s in states)
        line = (
            f"moot: batches: {len(states)} submitted ({', '.join(parts)}); "
            f"requests: {done} of {total} answered, {failed} failed"
        )
        if line != self._shown:
            self._shown = line
            self.report(line)


def _parts(group: list[tuple[str, _Asked]]) -> Iterator[list[tuple[str, _Asked]]]:
    """`group` in batches within the provider's limits (requests, and bytes of the file)."""
    part: list[tuple[str, _Asked]] = []
    size = 0
    for key, asked in group:
        line = len(json.dumps(asked.body)) + 200
        if part and (len(part) >= MAX_REQUESTS or size + line > MAX_BYTES):
            yield part
            part, size = [], 0
        part.append((key, asked))
        size += line
    if part:
        yield part


async def _quietly(lookup: Any) -> Any:
    """A lookup's result, or None when it fails too (the failure before it is the one said)."""
    try:
        return await lookup
    except Exception:
        return None
