"""The run engine: every command that calls a model runs its work items through `run_items`.

A work item is a dict with a stable ``id``: a hash of what makes it the same work (the settings and
the input), so a rerun recognises it. For each run the engine

- skips the items whose logged record is finished (what finishes an item is the pipeline's
  `finished` rule: ``ok``, or ``complete`` and ``incomplete`` for judgments, ...);
- runs the others, at most `concurrency` at a time; each task resumes its own interrupted work
  (from its LangGraph checkpoint, or free from the request cache); an item's requests to a model
  with several endpoints all go to one of them (`moot.core.llm.endpoints.sticky`), so a
  debate's transcript stays in one server's prefix cache;
- turns a call that failed for good (`ModelCallError`) into a failure record, kept apart from the
  results and retried by the next run;
- stops handing out items once the model layer refuses a call for ``--budget`` (`BudgetReached`):
  the items in flight end (each at its next paid call), and an item stopped so is never logged:
  it is not failed, it is not done, and the next run does it (resuming its checkpoint); the run
  hands it back as ``{**item, "status": "stopped"}`` so pipelines see every item;
- runs each item's task as one of the run's `Flight`: in batch mode (``--batch``) a batch goes
  once every item in flight waits on one (`moot.core.llm.batch`); an item whose batch has not
  ended under ``--no-wait`` (`BatchPending`) is handed back unlogged as a stopped one is, and
  counted ``waiting``;
- appends each record to the run's JSONL log as soon as it is known (fsynced, off the event loop),
  so a crash loses at most the items in flight;
- shows its progress (done, failed, calls, tokens, cost, ETA): a bar on a terminal, else a plain
  line on stderr every ``--progress-every`` seconds (`Progress`), and in a run folder's
  ``.moot/progress.json`` once a second, for `moot view --serve` (`PROGRESS`);
- compacts the log at the end, one line per id, this run's items first in input order (a log
  already so, as a rerun that found everything done leaves it, is not rewritten).

Nothing is held per finished item but its id: the log is scanned for finished ids, not loaded,
and a pipeline of many items (debates) asks for its failures alone, not every record back.

What a run did is a `Tally`; the CLI prints every tally and the ledger as one summary table and
turns them into the exit code (0 all done, 1 some failed, 3 stopped by ``--budget``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moot.core.data.folders import EVAL_CLAIM, PROGRESS, RunFolder
from moot.core.data.records import ResultLog, atomic_write
from moot.core.errors import BatchPending, BudgetReached, ModelCallError, WriteError
from moot.core.llm.batch import Flight
from moot.core.llm.endpoints import sticky

Record = dict[str, Any]

#: The status of an item ``--budget`` stopped: not done, not failed, never logged.
STOPPED = "stopped"
Task = Callable[[Record], Awaitable[Record]]


def is_ok(record: Record) -> bool:
    """The default `finished` rule: the item's record says ``ok``."""
    return record.get("status") == "ok"


def is_error(record: Record) -> bool:
    """The default `failed` rule: the item's record says ``error``."""
    return record.get("status") == "error"


def outcome_counts(records: Sequence[Record]) -> dict[str, int]:
    """How many of a run's records did not finish, as every ``summary.json`` counts them.

    ``errors``: a call failed for good (a failure: the command exits 1, a rerun retries it).
    ``stopped``: ``--budget`` stopped the item before it finished (`STOPPED`): not a failure,
    never in a figure, and the next run with a larger budget does it.
    """
    statuses = [record["status"] for record in records]
    return {"errors": statuses.count("error"), "stopped": statuses.count(STOPPED)}


def error_record(item: Record, exc: ModelCallError) -> Record:
    """The default failure record: the item, ``status: error`` and the error message."""
    return {**item, "status": "error", "error": str(exc)}


def pending_items(
    items: Sequence[Record], known: dict[str, Record], finished: Callable[[Record], bool] = is_ok
) -> tuple[list[Record], list[Record]]:
    """The items, one per id (an id given twice is one item: the first), and those to run.

    Args:
        items: The work, each a dict with a stable ``id``.
        known: The log's records by id (`ResultLog.load`).
        finished: Whether a logged record needs no rerun.
    """
    kept = unique_items(items)
    return kept, [
        item for item in kept if not (item["id"] in known and finished(known[item["id"]]))
    ]


def unique_items(items: Sequence[Record]) -> list[Record]:
    """The items, one per id: an id given twice is one item, the first."""
    unique: dict[str, Record] = {}
    for item in items:
        unique.setdefault(item["id"], item)
    return list(unique.values())


def call_seed(seed: int, item_id: str, step: int | str) -> int:
    """A call's sampling seed: distinct across items and their calls, identical across reruns.

    `step` is the call's place in its item (a debate's turns count from 0), so a resumed item
    asks each call with the seed it had.
    """
    digest = hashlib.sha256(f"{seed}:{item_id}:{step}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


@dataclass
class Tally:
    """What one run did with its items.

    Attributes:
        unit: What an item is, plural (``debates``, ``judgments``).
        planned: Items this run was asked for.
        skipped: Items finished by an earlier run.
        done: Items finished now.
        failed: Items that failed now (a rerun retries them).
        stopped: Items not done: ``--budget`` was reached, or their batch has not ended (a
            rerun does them).
        waiting: Of those, the items whose batch has not ended (``--no-wait``: a rerun, or
            ``moot collect``, collects them).
        seconds: Wall time of the run.
    """

    unit: str
    planned: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    stopped: int = 0
    waiting: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class RunResult:
    """The records of a run's items, in item order, and its tally."""

    records: list[Record]
    tally: Tally


@dataclass(frozen=True)
class RunOutput:
    """What a pipeline returns: its items' records, its summary, and what its runs did.

    Attributes:
        records: The log's records of the pipeline's items, in item order.
        summary: What it measured or made (``summary.json`` without its sources).
        tallies: What each of its `run_items` calls did, in order.
    """

    records: list[Record]
    summary: dict[str, Any]
    tallies: list[Tally] = field(default_factory=list)

    @property
    def errors(self) -> int:
        """Items whose call failed for good (a rerun retries them); stopped ones are not."""
        return outcome_counts(self.records)["errors"]


@dataclass
class Progress:
    """What a command shows of its run on stderr: done, failed, calls, retries, tokens, cost, ETA.

    On a terminal, one tqdm bar per stage. Elsewhere (a SLURM or ``nohup`` log, CI), where a bar
    shows nothing readable until the run ends, one plain line every `every` seconds, e.g.
    ``moot: debates: 1204 of 4000 finished (3 failed); calls 7224, retries 2, tokens 1873112,
    $1.2345; 4.2/s, elapsed 4m46s, ETA 11m05s``, and one when a stage ends, done or stopped by
    the budget (``took 15m52s`` in place of elapsed and ETA; an interrupted or crashed run says so
    in its own one line instead). The lines are for a log read later, by eye or by ``grep``: no
    colour, no carriage return, numbers without separators as in the summary, the elapsed time in
    each (a log has no clock). A line is written only when its counts moved since the last one
    (calls move while long items are in flight), so a run waiting hours on a batch or a dead
    server does not fill its log with copies; the end line is always written, so a stage that
    ends before its first interval prints that alone. The lines come from a timer on the run's
    event loop: an item costs a counter.

    Args:
        enabled: Show anything (the CLI: unless ``--quiet``).
        ledger: The model layer's `UsageLedger`, read for calls, tokens and cost.
        every: Seconds between two plain lines; 0: only each stage's end line.
        stream: Where it goes (None: ``sys.stderr`` as it is when a stage starts); a bar if it
            is a terminal (its ``isatty()``), else plain lines.
    """

    enabled: bool = True
    ledger: Any = None
    every: float = 60.0
    stream: Any = None
    _bar: Any = field(default=None, repr=False)
    _stage: _Stage | None = field(default=None, repr=False)
    _timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    _shown: str = field(default="", repr=False)  # the counts of the last plain line
    _file: Path | None = field(default=None, repr=False)  # the run's PROGRESS
    _saver: asyncio.TimerHandle | None = field(default=None, repr=False)

    def start(self, total: int, unit: str, file: Path | None = None, skipped: int = 0) -> None:
        """Begin a stage of `total` items (a command with two stages shows two).

        Called within the run's event loop (`run_items` does): plain lines are timed on it.

        Args:
            total: The items this run does in the stage.
            unit: What an item is, plural.
            file: Where the stage's counts are also written once a second, whatever `enabled`
                says (`PROGRESS`, for `moot view --serve`); None: nowhere.
            skipped: The stage's items done by an earlier run (the file says so).
        """
        self.close()
        shown = bool(self.enabled and total)
        if not (shown or file):
            return
        stream = self.stream or sys.stderr
        self._stage = _Stage(unit, total, stream, time.monotonic(), shown, skipped, time.time())
        if file is not None:
            self._file = file
            self._save()
        if not shown:
            return
        if stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit[:-1] or unit, file=stream)
            self._bar.set_postfix_str(self._postfix(), refresh=False)
        elif self.every:
            self._timer = asyncio.get_running_loop().call_later(self.every, self._tick)

    def advance(self, failed: bool) -> None:
        """One item finished (or failed)."""
        if (stage := self._stage) is not None:
            stage.finished += 1
            stage.failed += failed
            if self._bar is not None:
                self._bar.set_postfix_str(self._postfix(), refresh=False)
                self._bar.update(1)

    def close(self, ended: bool = True) -> None:
        """End the current stage, if any: close its bar, or write its end line.

        Args:
            ended: The stage ran to its end; else it was interrupted or crashed, which its own
                line says: no end line then.
        """
        if self._bar is not None:
            self._bar.close()
        elif self._stage is not None and self._stage.shown and ended:
            self._write(end=True)
        if self._timer is not None:
            self._timer.cancel()
        if self._saver is not None:
            self._saver.cancel()
        if self._file is not None and self._stage is not None:
            self._save("ended" if ended else "stopped")
        self._bar, self._stage, self._timer, self._shown = None, None, None, ""
        self._file, self._saver = None, None

    def _save(self, state: str = "running") -> None:
        """Write the stage's counts to its `PROGRESS`; while running, again in a second.

        A file that cannot be written is left as it was: it only shows the run, which goes on
        (its records are what count, and their writes fail loudly).
        """
        stage, file = self._stage, self._file
        assert stage is not None and file is not None
        found: dict[str, Any] = {
            "stage": stage.unit,
            "state": state,
            "planned": stage.skipped + stage.total,
            "skipped": stage.skipped,
            "done": stage.finished - stage.failed,
            "failed": stage.failed,
            "started": _iso(stage.wall),
            "updated": _iso(time.time()),
            "pid": os.getpid(),
        }
        if self.ledger is not None:
            total = self.ledger.total()
            found |= {
                "calls": total.calls,
                "tokens": total.prompt_tokens + total.completion_tokens,
                "cost_usd": total.cost_usd,
            }
        text = json.dumps(found)
        with contextlib.suppress(WriteError):
            atomic_write(file, lambda f: f.write(text))
        if state == "running":
            loop = asyncio.get_running_loop()
            self._saver = loop.call_later(SAVE_EVERY, self._save)

    def _tick(self) -> None:
        self._write(end=False)
        self._timer = asyncio.get_running_loop().call_later(self.every, self._tick)

    def _write(self, end: bool) -> None:
        stage = self._stage
        assert stage is not None
        counts = "; ".join(
            [
                f"moot: {stage.unit}: {stage.finished} of {stage.total} finished "
                f"({stage.failed} failed)",
                *([", ".join(self._usage())] if self.ledger is not None else []),
            ]
        )
        if counts == self._shown and not end:
            return
        self._shown = counts
        elapsed = time.monotonic() - stage.started
        rate = stage.finished / elapsed if elapsed > 0 else 0.0
        pace = f"{rate:.0f}/s" if rate >= 100 else f"{rate:.3g}/s"
        if end:
            timing = f"took {_duration(elapsed)}"
        else:
            eta = _duration((stage.total - stage.finished) / rate) if rate else "?"
            timing = f"elapsed {_duration(elapsed)}, ETA {eta}"
        print(f"{counts}; {pace}, {timing}", file=stage.stream, flush=True)

    def _postfix(self) -> str:
        failed = self._stage.failed if self._stage is not None else 0
        return ", ".join([f"failed {failed}", *(self._usage() if self.ledger is not None else [])])

    def _usage(self) -> list[str]:
        total = self.ledger.total()
        tokens = total.prompt_tokens + total.completion_tokens
        return [
            f"calls {total.calls}",
            f"retries {total.retries}",
            f"tokens {tokens}",
            format_cost(total.cost_usd),
        ]


@dataclass
class _Stage:
    """A `Progress` stage: what it counts, how far it is, where it goes, when it began."""

    unit: str
    total: int
    stream: Any
    started: float  # time.monotonic()
    shown: bool = True  # on `stream`; else only in the progress file
    skipped: int = 0
    wall: float = 0.0  # time.time() at the start, for the progress file
    finished: int = 0
    failed: int = 0


#: Seconds between two writes of a run's progress file.
SAVE_EVERY = 1.0


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def _duration(seconds: float) -> str:
    """``4.2s``, ``11m05s``, ``2h03m09s``: a time span as the progress lines show it."""
    if seconds < 59.95:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


async def run_items(
    items: Sequence[Record],
    task: Task,
    log: ResultLog,
    *,
    unit: str,
    concurrency: int = 1,
    finished: Callable[[Record], bool] = is_ok,
    failed: Callable[[Record], bool] = is_error,
    on_error: Callable[[Record, ModelCallError], Record] = error_record,
    progress: Progress | None = None,
    keep_others: bool = True,
    read_back: bool = True,
    logged: Callable[[Record], Awaitable[None]] | None = None,
) -> RunResult:
    """Run `task` on every item whose logged record is not `finished`; log each record.

    Args:
        items: The work, each a dict with a stable ``id``; an id given twice is one item (the
            first), e.g. an answer that two input files share.
        task: Makes one item's record (``{**item, "status": ...}``), resuming its own
            interrupted work. A `ModelCallError` it raises becomes ``on_error(item, exc)``;
            `BudgetReached` stops handing out items (the item is not logged: the tally counts
            it stopped); any other exception stops the run (records logged so far are kept).
        log: Where records are appended as they finish.
        unit: What an item is, plural, for the progress bar and the tally.
        concurrency: Items in flight at once.
        finished: Whether a logged record needs no rerun.
        failed: Whether a record counts as a failure of this run.
        on_error: The record of an item whose task raised `ModelCallError`.
        progress: What shows the command's progress.
        keep_others: Keep the log's records of items this run was not asked for (earlier runs
            on other inputs: asking for them again costs nothing); else drop them.
        read_back: Return the records of all `items`; else only those this run failed, so a
            run of many items holds nothing per finished item (the log has them).
        logged: Awaited with each record once it is in the log (e.g. to drop what resuming
            the item needed: a finished item is never resumed).

    Returns:
        The records of `items`, in order (one per id), and the tally; an item stopped by the
        budget, or never started after it, is ``{**item, "status": "stopped"}`` (`STOPPED`),
        in memory only. Without `read_back`: this run's failed records alone, in the order
        they failed.
    """
    started = time.perf_counter()
    items = unique_items(items)
    done_before = log.ids_where(finished)  # ids only: no record is held
    pending = [item for item in items if item["id"] not in done_before]
    del done_before
    tally = Tally(unit, planned=len(items), skipped=len(items) - len(pending))
    if progress is not None:
        # a run folder (its .moot/ made by its claim or owner mark) gets the progress file
        state = log.path.parent / PROGRESS
        file = state if state.parent.is_dir() else None
        progress.start(len(pending), unit, file, tally.skipped)
    queue = iter(pending)
    budget_reached = False
    ended: set[str] = set()  # items this run finished or failed
    waiting: set[str] = set()  # items whose batch has not ended (--no-wait)
    workers = min(max(1, concurrency), len(pending))
    flight = Flight(workers)  # batch mode: a batch goes when every item in flight waits on one
    failures: list[Record] = []  # this run's failed records, when not read back from the log

    async def worker() -> None:
        try:
            await work()
        finally:
            flight.workers -= 1

    async def work() -> None:
        nonlocal budget_reached
        for item in queue:  # one shared iterator: each worker takes the next item
            if budget_reached:
                return
            try:
                # one endpoint per item, of a model with several
                with sticky(item["id"]), flight.item():
                    record = await task(item)
            except ModelCallError as exc:
                record = on_error(item, exc)
            except BudgetReached:  # not done, not failed: the rerun does it
                budget_reached = True
                return
            except BatchPending:  # not done, not failed: the rerun collects it
                waiting.add(item["id"])
                continue
            await asyncio.to_thread(log.append, record)  # fsync off the event loop
            if logged is not None:
                await logged(record)
            ended.add(item["id"])
            bad = failed(record)
            if bad and not read_back:
                failures.append(record)
            tally.failed += bad
            tally.done += not bad
            if progress is not None:
                progress.advance(bad)

    stage_ended = False
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(workers):
                group.create_task(worker())
        stage_ended = True
    except BaseExceptionGroup as errors:  # the first real error, as the caller would expect
        raise errors.exceptions[0] from None
    finally:
        if progress is not None:
            progress.close(stage_ended)
    ids = [item["id"] for item in items]
    stopped = {item["id"]: item for item in pending if item["id"] not in ended}
    if not read_back:
        log.compact_lines(ids, keep_others=keep_others)
        records = failures
    elif keep_others:
        records = log.compact_current_first(ids)
    else:
        records = log.compact_only(ids)
    if stopped and read_back:
        by_id = {record["id"]: record for record in records}
        records = [
            {**stopped[i], "status": STOPPED} if i in stopped else by_id[i]
            for i in ids
            if i in stopped or i in by_id
        ]
    tally.stopped, tally.waiting = len(stopped), len(waiting)
    tally.seconds = time.perf_counter() - started
    return RunResult(records, tally)


def format_cost(usd: float | None) -> str:
    """A cost as shown everywhere: ``$0.0123``, or ``unpriced`` when it is unknown (None)."""
    return "unpriced" if usd is None else f"${usd:.4f}"


#: What a claimed folder holds otherwise, in the refusal of other settings.
HOLDS = "a run with another model, judge or settings"


async def run_claimed(
    items: Sequence[Record],
    task: Task,
    out_dir: Path,
    claim: dict[str, Any],
    *,
    log: str = "judgments.jsonl",
    unit: str = "judgments",
    **options: Any,
) -> RunResult:
    """`run_items` in a folder claimed for one model and its settings (``.moot/eval.json``).

    The claim comes before any call, so a rerun with other settings is refused instead of
    mixing or dropping earlier records (evaluations, answering, curation, comparison).

    Args:
        items: The work (see `run_items`).
        task: Makes one item's record.
        out_dir: The output folder.
        claim: The settings the folder is for.
        log: The log's file name in `out_dir`.
        unit: What an item is, plural.
        **options: More `run_items` options (``concurrency``, ``progress``, ...).

    Raises:
        ConfigError: `out_dir` is claimed for other settings.
    """
    RunFolder(out_dir).claim(EVAL_CLAIM, claim, HOLDS)
    return await run_items(items, task, ResultLog(Path(out_dir) / log), unit=unit, **options)


async def gather_all(*calls: Awaitable[Any]) -> list[Any]:
    """Await every call of a batch, then raise the first failure, if any.

    `asyncio.gather` hands its caller the first failure at once: the item's task then ends while
    the other calls are still paying, and when the run ends they are cancelled, their replies
    never cached, so the rerun pays for them again. Here every call finishes (its reply in the
    request cache) before the failure is raised. A LangGraph fan-out does the same with
    `moot.graphs.checkpoints.settled`.
    """
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results
