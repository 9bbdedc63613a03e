"""What commands share when they run: roles, the model client, progress, the summary, exit codes.

Heavy libraries are imported inside these functions, so ``moot --help`` stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from moot.result import FAILED, STOPPED, Result

T = TypeVar("T")

PROGRESS_ROOM = len("..progress.jsonl")  # what `.NAME.progress.jsonl` adds to an --out FILE

DEMO_NOTE = (
    "note: local/smollm2 is the embedded 135M demo model: fluent, often off-topic or on the wrong "
    "side. Use a real model (--model, --judge) for real data."
)


#: The main task of the command running in each thread, by thread: `moot.api` cancels it to
#: interrupt a command it runs in a thread of its own, as Ctrl-C interrupts the command line.
RUNNING: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}


def run(work: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to its end in an event loop of its own (`asyncio.run`).

    While it runs, its task is in `RUNNING`, so a command run from Python in a thread can be
    interrupted: cancelling the task unwinds it as Ctrl-C does (what finished is kept).
    """

    async def main() -> T:
        thread, task = threading.get_ident(), asyncio.current_task()
        assert task is not None  # a coroutine asyncio.run runs is a task's
        RUNNING[thread] = (asyncio.get_running_loop(), task)
        try:
            return await work
        finally:
            del RUNNING[thread]

    return asyncio.run(main())


def note(args: argparse.Namespace, text: str) -> None:
    """A warning or note: kept in the command's result, and said on stderr now.

    Not said with ``--quiet``, nor when the command runs from Python (`moot.api`): the result
    keeps it.
    """
    args.notes.append(text)
    if not args.quiet and getattr(args, "echo", True):
        print(text, file=sys.stderr)


def check_required(args: argparse.Namespace) -> None:
    """Every flag the command needs was given, on the command line or in ``--config``.

    Raises:
        ConfigError: One is missing (the first, named as a flag).
    """
    from moot.core.errors import ConfigError

    schema = getattr(args, "settings_class", None)  # a group alone (`moot eval`) has none
    if schema is None:
        return
    flags = {name: schema.option(name) for name, _ in schema.flags()}
    for dest in getattr(args, "required_flags", ()):
        if getattr(args, dest, None) is None:
            flag = flags[dest]  # --detector, --in, -k
            where = f"as `{flag.lstrip('-')}:` in --config" if "config" in flags else ""
            raise ConfigError(
                f"missing {flag}" + (f" (on the command line or {where})" if where else "")
            )


def check_paths(args: argparse.Namespace, *dests: str) -> None:
    """Path flags: names moot can use, inputs that exist, outputs apart from inputs and runs.

    The flags are those declared with a path type of `moot.cli.options` (`PATH_KINDS`), on the
    command line or in ``--config``. An output's own name leaves room for the temporary sibling
    moot writes it through (and an ``--out FILE``'s for its progress log beside it). Then every
    output, and the progress log beside an ``--out FILE``, is checked against every input and the
    run folders around it (`moot.core.data.folders.check_outputs`): an output may lie inside its
    command's own ``--out`` folder and the `moot run` folder of which the command is a stage.

    Args:
        args: The parsed command line (``--out``'s default resolved).
        *dests: Check only these flags (by ``dest``), their names and existence; none: every
            path flag, and the outputs against the inputs.

    Raises:
        ConfigError: The first path that fails, named with its flag.
    """
    from moot.cli.options import SOURCE
    from moot.core.data.folders import check_outputs
    from moot.core.data.records import TMP_ROOM, name_problem, progress_log
    from moot.core.errors import ConfigError

    inputs: list[tuple[str, Any]] = []
    outputs: list[tuple[str, Any]] = []
    for dest, kind, flag in path_flags(args):
        if getattr(args, dest, None) is None:
            continue
        if dests and dest not in dests:  # --config, read before the others are known
            continue
        values = getattr(args, dest)
        if isinstance(values, dict):  # an inline mapping from --config (`prices:`), no path
            continue
        logged = dest == "out" and getattr(args, "out_progress", False)  # a log beside
        # an output's own name leaves room for its temporary sibling (and progress log)
        spare = 0 if kind else TMP_ROOM + (PROGRESS_ROOM if logged else 0)
        for path in values if isinstance(values, list) else [values]:
            *parents, last = str(path).split("/")
            problems = [name_problem(name, 0) for name in parents if name]
            problem = next(filter(None, problems), None) or name_problem(last, spare)
            if problem:
                shown = repr(str(path)) if "\0" in str(path) else path
                raise ConfigError(f"{flag} {shown}: {problem}")
            if kind is None:
                outputs.append((flag, Path(path)))
                if logged:
                    outputs.append((flag, progress_log(path)))
            else:
                inputs.append((flag, Path(path)))
                if kind != SOURCE:
                    _check_input(flag, path, kind)
    if dests:
        return
    within = [args.out] if getattr(args, "out_folder", False) else []
    if getattr(args, "run_folder", None):  # a `moot run` stage's (`for_the_run`)
        within.append(args.run_folder)
    page = getattr(args, "writes_in_inputs", None)
    holds_runs = getattr(args, "holds_runs", False)
    check_outputs(outputs, inputs, within=within, page=page, holds_runs=holds_runs)


def path_flags(args: argparse.Namespace) -> list[tuple[str, str | None, str]]:
    """The command's path settings: each one's name, kind (`moot.cli.options.PATH_KINDS`), flag.

    Read from the command's settings (`moot.cli.settings`); a group alone has none.
    """
    from moot.cli.options import PATH_KINDS

    schema = getattr(args, "settings_class", None)
    return [
        (name, PATH_KINDS[how.parse], schema.option(name))
        for name, how in (schema.flags() if schema is not None else ())
        if how.parse in PATH_KINDS
    ]


def _check_input(flag: str, path: Any, kind: str) -> None:
    from moot.core.data.planned import is_planned
    from moot.core.errors import ConfigError

    if is_planned(path):  # `moot run --dry-run`: an earlier stage would write it
        return
    if not path.exists():
        raise ConfigError(f"{flag} {path}: {kind} not found")
    if not (path.is_file() or path.is_dir()):  # reading a FIFO waits for a writer, for ever
        raise ConfigError(f"{flag} {path}: not a regular file (a FIFO or a device)")
    if kind == "file" and path.is_dir():
        raise ConfigError(f"{flag} {path}: a folder, expected a file")
    if kind == "folder" and not path.is_dir():
        raise ConfigError(f"{flag} {path}: a file, expected a folder")


def with_config(
    parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace
) -> argparse.Namespace:
    """The command line `argv` parsed as `args`, its ``--config`` applied; it keeps `argv`.

    The command line is kept for a ``--batch`` run's journal (``moot collect`` runs it again).
    """
    from moot.cli.config import apply_config

    if getattr(args, "config", None):
        check_paths(args, "config")
        args = apply_config(parser, argv, args)
    args.argv = argv
    return args


def execute(args: argparse.Namespace) -> Result:
    """Run a parsed command (its ``--config`` applied): checks, its output folder, its result.

    The command line (`moot.cli.main`) prints the result, `moot.api` returns it, and `moot run`
    runs each stage of a recipe through here too.
    """
    check_required(args)
    default = getattr(args, "out_default", None)
    if getattr(args, "out", None) is None and default is not None:
        args.out = default(args)  # before the checks: a default output is checked as any
    check_paths(args)
    check_batch(args)
    args.notes = []
    if getattr(args, "dry_run", False):  # the plan alone: no call, nothing written
        plan, command = plan_for(args), args.command_parser.prog
        table = plan_table(
            plan, command, getattr(args, "budget", None), getattr(args, "batch", False)
        )
        return Result(command, lines=[table], plan=plan, notes=args.notes)
    if getattr(args, "push_to_hub", None):  # before any work: a push that cannot happen
        from moot.core.hub.push import check_push

        check_push(args.push_to_hub)
    from moot.cli.prompts import prompt_overrides
    from moot.prompts import overridden

    prompts = prompt_overrides(args)  # checked before the folder is held
    with own_out(args), prompts:  # the output folder: this command's, and this run's alone
        result: Result = args.command_fn(args)
        result.prompts = overridden()
    result.notes = args.notes
    return result


#: Items in flight with ``--batch``: all of them (a batch holds a step of every one), as many as
#: fit in batches of `moot.core.llm.batch.MAX_REQUESTS` requests.
BATCH_IN_FLIGHT = 50_000


def check_batch(args: argparse.Namespace) -> None:
    """``--batch``'s options only with it; with it, every item in flight at once.

    Raises:
        ConfigError: ``--no-wait`` or ``--batch-fallback live`` without ``--batch``.
    """
    from moot.core.errors import ConfigError

    if getattr(args, "batch", False):
        args.concurrency = BATCH_IN_FLIGHT
        return
    if getattr(args, "no_wait", False):
        raise ConfigError("--no-wait is for --batch runs: add --batch")
    if getattr(args, "batch_fallback", "batch") != "batch":
        raise ConfigError("--batch-fallback is for --batch runs: add --batch")


@contextlib.contextmanager
def own_out(args: argparse.Namespace) -> Iterator[None]:
    """Hold the command's output folder while it runs: its owner checked, locked, marked.

    Output files, and commands without ``--out``, pass untouched.

    Raises:
        ConfigError: The folder belongs to another command, holds files moot did not make, or
            another run holds it (`moot.core.data.folders.RunFolder.hold`).
    """
    if not getattr(args, "out_folder", False):
        yield
        return
    from moot.core.data.folders import RunFolder

    with RunFolder(args.out, args.command_parser.prog).hold():
        yield


def plan_for(args: argparse.Namespace) -> Any:
    """What the parsed command would do, as a `moot.core.plan.Plan`; sends and writes nothing.

    The command's inputs are checked as a real run checks them, and its ``--out`` folder's owner
    too (read, never marked or locked). A command that plans by running (`Commands.add`'s
    ``plan=True``) runs its real pipeline against `moot.core.llm.planning.PlanningClient`, its
    outputs copies in a temporary folder (`scratch_outputs`, deleted after): its client's ledger
    is the plan. `moot run` asks each stage for its plan here.

    Raises:
        ConfigError: The command has no plan (it calls no model), or its input is refused.
    """
    from moot.core.data.folders import RunFolder
    from moot.core.errors import ConfigError
    from moot.core.llm.spec import key_needs

    if getattr(args, "plan_fn", None) is None:
        raise ConfigError(f"{args.command_parser.prog} calls no model: it has no --dry-run plan")
    if getattr(args, "out_folder", False):
        RunFolder(args.out, args.command_parser.prog).check()
    from moot.cli.prompts import prompt_overrides

    with prompt_overrides(args):  # a stage's of `moot run` too: its own
        plan = args.plan_fn(args) if callable(args.plan_fn) else _planning_run(args)
    if hasattr(args, "prices") and not plan.prices.own:  # `moot run`'s: priced by its stages
        plan.prices = prices_from(args)
    for spec in dict.fromkeys(row.spec for row in plan.rows):
        key = (spec.name, key_needs(spec))
        if key not in plan.keys:  # `moot run`'s stages said their models' already
            plan.keys.append(key)
    return plan


def _planning_run(args: argparse.Namespace) -> Any:
    """The command's plan: its real run against a client that never sends, in a scratch copy."""
    from moot.core.llm.planning import PlanningClient
    from moot.core.plan import Plan

    client = PlanningClient(prices_from(args) if hasattr(args, "prices") else None)
    with scratch_outputs(args) as (trial, written):
        trial.planning, trial.notes, trial.echo = client, [], False
        trial.quiet, trial.push_to_hub = True, None
        result = trial.command_fn(trial)
        plan = Plan.of_run(client, result.tallies)
        plan.outputs = written()
    plan.notes += [f"a run would fail too: {m.removeprefix('moot: ')}" for m in result.messages]
    return plan


@contextlib.contextmanager
def scratch_outputs(
    args: argparse.Namespace,
) -> Iterator[tuple[argparse.Namespace, Any]]:
    """A copy of `args` whose outputs are copies in a temporary folder, deleted after the block.

    Each output path (a folder with what earlier runs left in it, a file with its progress log)
    is copied, so the run resumes as it would; the originals are never written.

    Yields:
        The copy, and a function giving what the run wrote, by the original paths: each JSON
        or JSONL file's records (`moot.core.plan.Plan.outputs`).
    """
    import shutil
    import tempfile

    from moot.core.data.records import progress_log

    trial = argparse.Namespace(**vars(args))
    with tempfile.TemporaryDirectory(prefix="moot-dry-run-") as scratch:
        moved: dict[Path, Path] = {}
        for n, dest in enumerate(output_dests(args)):
            real = Path(getattr(args, dest))
            copy = Path(scratch) / str(n) / real.name
            copy.parent.mkdir()
            if real.is_dir():
                shutil.copytree(real, copy, symlinks=True)
            elif real.exists():
                shutil.copy2(real, copy)
            log = progress_log(real)
            if log.exists():
                shutil.copy2(log, progress_log(copy))
            setattr(trial, dest, copy)
            moved[real] = copy
        yield trial, lambda: _written(moved)


def _written(moved: dict[Path, Path]) -> dict[Path, Any]:
    """The JSON and JSONL files in `moved` outputs (real path → copy), by their real paths."""
    from moot.core.data.records import read_json_file, read_records

    files: dict[Path, Any] = {}
    for real, copy in moved.items():
        found = [copy] if copy.is_file() else sorted(copy.rglob("*.json*"))
        for path in found:
            if ".moot" in path.relative_to(copy).parts:
                continue
            target = real / path.relative_to(copy) if path != copy else real
            if not path.stat().st_size:
                files[target] = []
            elif path.suffix == ".jsonl" or path == copy:  # an --out FILE: JSONL or a JSON list
                files[target] = [record for _, record in read_records(path)]
            elif path.suffix == ".json":
                files[target] = read_json_file(path)
    return files


def output_dests(args: argparse.Namespace) -> list[str]:
    """Each output path setting the command was given (``out``, ``index``), but the cache."""
    return [
        name
        for name, kind, _ in path_flags(args)
        if kind is None and name != "cache" and getattr(args, name, None) is not None
    ]


def plan_table(plan: Any, command: str, budget: float | None = None, batch: bool = False) -> str:
    """`command`'s plan as the summary table's dry-run twin: items, then calls, tokens, cost.

    Paid calls get a line of their cost live and in batches (``--batch``, at batch rates). With
    a ``--budget``, a last line says whether the estimate fits it: at batch rates for a `batch`
    run, which no ``--rpm``/``--tpm`` paces either.
    """
    from moot.core.tables import render_table

    rows = [("items", "planned", "done before", "to run")]
    rows += [(i.unit, i.planned, i.done, i.to_run) for i in plan.items]
    parts = [f"dry run of `{command}`: nothing was sent or written", render_table(rows)]
    if plan.rows:
        head = ("role", "stage", "model", "calls", "input tokens", "output tokens", "cost $")
        calls = [
            (r.role, r.stage, r.spec.name, r.calls, r.input_tokens, r.output_tokens, _cost(plan, r))
            for r in plan.rows
        ]
        parts.append(render_table([head, *calls], left=3))
    inputs = sum(r.input_tokens for r in plan.rows)
    outputs = sum(r.output_tokens for r in plan.rows)
    unpriced = ", ".join(plan.unpriced)
    if not plan.unpriced:
        cost = f"about ${plan.cost_usd():.4f}"
    elif len(plan.unpriced) < len({r.spec.name for r in plan.rows}):
        cost = f"about ${plan.cost_usd():.4f} (+ unpriced: {unpriced})"
    else:  # no price known: no dollar figure at all, never $0
        cost = f"unpriced ({unpriced})"
    calls = f"{'at most ' if plan.calls_at_most else ''}{plan.calls} calls"
    total = (
        f"estimate: {calls}, about {inputs} input tokens, at most {outputs} output tokens, "
        f"cost {cost}"
    )
    lines = [total]
    if plan.cost_usd():  # paid calls: what the same calls cost through the batch APIs
        live, batched = plan.cost_usd(), plan.cost_usd(batch=True)
        part = f" (priced calls; unpriced: {unpriced})" if plan.unpriced else ""
        lines.append(f"cost: ${live:.4f} live, ${batched:.4f} in batches (--batch){part}")
    lines += [f"key: {model}: {what}" for model, what in plan.keys]
    lines += [
        f"limits: {model} needs about {minutes:.1f} min at its --rpm/--tpm"
        for model, minutes in (plan.limited_minutes() if not batch else {}).items()
    ]
    lines += [f"note: {text}" for text in plan.notes]
    if budget is not None and plan.unpriced:
        lines.append(f"budget: --budget needs the price of {unpriced} (a real run exits 2)")
    elif budget is not None:
        fits = "fits within" if plan.cost_usd(batch=batch) <= budget else "exceeds"
        priced = " at batch rates" if batch else ""
        lines.append(f"budget: the estimate{priced} {fits} --budget ${budget:.4f}")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _cost(plan: Any, row: Any) -> str:
    cost = plan.row_cost(row)
    return "unpriced" if cost is None else f"{cost:.4f}"


def spec_from(args: argparse.Namespace, text: str, **options: Any) -> Any:
    """A model spec from its text and the command's `call_settings`.

    With ``--router FILE``, the spec's endpoints are the file's deployments of the model.

    Raises:
        ConfigError: The spec is refused, or ``--router`` comes with an endpoint flag.
        InputError: The ``--router`` file is refused, or has no deployment of the model.
    """
    from moot.core.errors import ConfigError
    from moot.core.llm.spec import parse_spec

    api_base = options.pop("api_base", args.api_base)
    router = None
    if args.router is not None:
        from moot.core.llm.router_file import load_router

        if api_base:
            raise ConfigError(f"--router {args.router} names the endpoints: give no --api-base")
        router = load_router(args.router, text.strip())
        api_base = list(router.api_bases)
    rpm, tpm = args.rpm, args.tpm
    if router is not None:  # its deployments' limits are moot's too; the lower of each holds
        rpm = min(filter(None, (rpm, router.limit("rpm"))), default=None)
        tpm = min(filter(None, (tpm, router.limit("tpm"))), default=None)
    spec = parse_spec(
        text,
        api_base=api_base,
        api_key_env=args.api_key_env,
        timeout=args.timeout,
        max_concurrency=args.max_concurrency,
        rpm=rpm,
        tpm=tpm,
        context_window=args.context_window,
        router=router,
        cooldown=args.endpoint_cooldown,
        max_fails=args.endpoint_max_fails,
        **options,
    )
    own = spec.transport_class.options  # `client_for` refuses those no model takes
    return spec.with_options(**{name: getattr(args, name, None) for name in own})


#: The options of models run in process (``hf/<path>``), as `ModelSpec` fields and dests.
LOCAL_OPTIONS = ("device", "dtype", "batch_size", "backend")


def role_from(args: argparse.Namespace, name: str, text: str | None = None, **options: Any) -> Any:
    """The command's one model role (``args.model`` unless `text` is given).

    Args:
        args: The parsed command line.
        name: The role's ledger name (``judge``, ``answerer``).
        text: The spec text, if not ``args.model``.
        **options: More `parse_spec` options (``chat_template``).
    """
    from moot.core.llm.spec import Role

    return Role(name, spec_from(args, text or args.model, **options), args.temperature)


def debater_role(args: argparse.Namespace, suffix: str, name: str) -> Any:
    """Debater A or B of `moot debate`: its own ``--model-X`` etc., else the shared ones.

    A debater with its own ``--model-X`` does not inherit ``--api-base``.
    """
    from moot.core.llm.spec import Role

    own_model = getattr(args, f"model_{suffix}")
    api_base = getattr(args, f"api_base_{suffix}") or (None if own_model else args.api_base)
    spec = spec_from(args, own_model or args.model, api_base=api_base)
    temperature = getattr(args, f"temperature_{suffix}")
    return Role(name, spec, args.temperature if temperature is None else temperature)


def prices_from(args: argparse.Namespace) -> Any:
    """The command's prices: ``--prices`` (a file, or inline in ``--config``) over the cost map.

    The `moot.core.llm.prices.Prices` whose ``cost(spec, prompt, completion, cached)`` prices a
    call (``--dry-run``'s estimates too).

    Raises:
        InputError: The price file, or the inline mapping, is wrong (naming file, model, key).
    """
    from moot.core.llm.prices import Prices, load_prices

    given = getattr(args, "prices", None)
    if given is None:
        return Prices()
    if isinstance(given, dict):
        return load_prices(args.config, given, where="prices")
    return load_prices(given)


def client_for(args: argparse.Namespace, *specs: Any) -> Any:
    """The model layer for a command, with credentials and endpoints checked before any work.

    Once they pass, a note says when a model is the embedded demo model (a refused command
    prints its one error line alone).

    Raises:
        ConfigError: ``--max-retries`` below 0, a missing key, ``--budget`` with a model
            whose price is unknown, or local-model options (``--device`` ...) and no model
            runs in process.
        InputError: A wrong price file.
        EndpointError: An endpoint that refuses connections.
    """
    from moot.core.errors import ConfigError
    from moot.core.llm.models import ModelClient, RetryPolicy

    if args.max_retries < 0:
        raise ConfigError("--max-retries must be 0 or more")
    taken = {name for spec in specs for name in spec.transport_class.options}
    given = [name for name in LOCAL_OPTIONS if name not in taken and _given(args, name)]
    if given:
        flags = " and ".join("--" + name.replace("_", "-") for name in given)
        raise ConfigError(f"{flags}: for local model folders (hf/...) only; no model is one")
    prices = prices_from(args)
    if getattr(args, "planning", None) is not None:  # a dry run (`plan_for`): never sends
        for spec in specs:
            args.planning.prepare(spec)
        return args.planning
    from moot.core.llm.cache import RequestCache, cache_folder, default_cache_path

    cache = None if args.no_cache else RequestCache(args.cache or default_cache_path())
    client = ModelClient(
        cache=cache,
        # shared by every process on the machine, whatever its --cache or --no-cache
        limits=cache_folder() / "limits",
        retry=RetryPolicy(attempts=args.max_retries + 1),
        prices=prices,
        budget=getattr(args, "budget", None),
        concurrency=getattr(args, "concurrency", None),
        batches=batch_queue(args) if getattr(args, "batch", False) else None,
    )
    if args.verbose:
        log_retries()
    for spec in dict.fromkeys(specs):  # each model once (both debaters may share one)
        for text in client.prepare(spec):
            note(args, text)
    if any(spec.transport_class.embedded for spec in specs):
        note(args, DEMO_NOTE)
    for text in concurrency_notes(args, specs):
        note(args, text)
    return client


def batch_queue(args: argparse.Namespace) -> Any:
    """``--batch``'s queue, its journal in the run's output (`moot.core.llm.batch`).

    Its models' batch APIs are checked by `ModelClient.prepare`.
    """
    import os

    from moot.core.llm.batch import BatchBook, BatchQueue, book_path
    from moot.core.redaction import scrub

    argv = getattr(args, "argv", None)  # as a card records it: no credential of a URL, no key
    command = {"argv": scrub(argv), "cwd": os.getcwd()} if argv is not None else None
    book = BatchBook(book_path(args.out, getattr(args, "out_folder", False)), command)

    def report(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return BatchQueue(
        book,
        wait=not args.no_wait,
        poll=args.batch_poll,
        live_fallback=args.batch_fallback == "live",
        report=None if args.quiet else report,
    )


def _given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option `dest` asks for something other than `ModelSpec`'s default."""
    from moot.core.llm.spec import ModelSpec

    return getattr(args, dest, None) not in (None, ModelSpec.__dataclass_fields__[dest].default)


def concurrency_notes(args: argparse.Namespace, specs: Sequence[Any]) -> list[str]:
    """What keeps fewer requests in flight than ``--concurrency`` asks for, and why.

    Requests to a model are bounded only by ``--max-concurrency`` when it is given, and, for the
    embedded model, by its server's parallel slots (more requests wait in its queue).
    """
    from moot.core.llm import embedded

    server = embedded.running()  # started by `ModelClient.prepare`, slots and all
    wanted = getattr(args, "concurrency", None)
    notes = []
    for spec in dict.fromkeys(specs):  # each model once, in order
        # several endpoints: N each on average (`ModelClient` holds N x endpoints for the model)
        bound = (spec.max_concurrency or 0) * max(1, len(spec.api_bases))
        if wanted and bound and bound < wanted:
            each = f" ({len(spec.api_bases)} endpoints)" if spec.api_bases else ""
            notes.append(
                f"note: at most {bound} requests in flight to {spec.name}{each} "
                f"(--max-concurrency {spec.max_concurrency}), fewer than --concurrency {wanted}"
            )
        held = min(wanted or 0, bound or wanted or 0)  # what moot sends at once
        if spec.transport_class.embedded and server and held > server.slots:
            notes.append(
                f"note: {spec.name} answers {server.slots} requests at a time (its embedded "
                f"server's parallel slots, at most {embedded.MAX_SLOTS}); the others of "
                f"--concurrency {wanted} wait in its queue"
            )
    return notes


def log_retries() -> None:
    """Show the model layer's line per retried call on stderr (``--verbose``)."""
    import logging

    from moot.core.llm import models

    if models.log.handlers:  # once per process (the CLI may run in-process, more than once)
        return
    from moot.core.redaction import redact

    class Redacted(logging.Formatter):  # a server's message may quote a key moot sent
        def format(self, record: logging.LogRecord) -> str:
            return redact(super().format(record))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacted("moot: %(message)s"))
    models.log.addHandler(handler)
    models.log.setLevel(logging.INFO)


def constrained(args: argparse.Namespace, role: Any) -> bool:
    """``--constrained`` as given, else on for the embedded model (it decodes to the schema)."""
    if args.constrained is None:
        return role.spec.transport_class.decodes_schema
    return bool(args.constrained)


def progress_for(args: argparse.Namespace, client: Any = None) -> Any:
    """The command's progress (unless ``--quiet``), with `client`'s usage.

    A bar on a terminal, else a line every ``--progress-every`` seconds (`eval pd`, without run
    options, keeps the default); from Python only the bar, as a function returns what it says.
    """
    from moot.core.runs import Progress

    ledger = client.ledger if client is not None else None
    every = getattr(args, "progress_every", Progress.every)
    shown = getattr(args, "echo", True) or sys.stderr.isatty()
    return Progress(enabled=not args.quiet and shown, ledger=ledger, every=every)


def limited(items: Sequence[Any], args: argparse.Namespace) -> list[Any]:
    """The first ``--limit`` items (all without it)."""
    return list(items[: args.limit] if args.limit else items)


def finish(
    args: argparse.Namespace,
    tallies: Sequence[Any] = (),
    ledger: Any = None,
    *,
    nothing_read: bool = False,
    failed: bool = False,
    lines: Sequence[str] = (),
    messages: Sequence[str] = (),
    outputs: dict[str, Path] | None = None,
) -> Result:
    """The command's result: its summary table, its failures said, its exit code.

    Args:
        args: The parsed command line.
        tallies: What each `run_items` of the command did (none: the command has no summary
            table, unless it called a model).
        ledger: The model layer's usage ledger (None: the command called no model server).
        nothing_read: A judge answered, but not one of its replies could be read.
        failed: Something else failed that the command has already said (in `messages`).
        lines: What the command reports on stdout, before the summary table.
        messages: What failed, and what to do about it (stderr).
        outputs: What the command wrote, by name, its main records first.

    Returns:
        Its exit code: 3 if ``--budget`` stopped the run (`STOPPED`); else 1 if any item
        failed, nothing was read, or `failed`; else 0.
    """
    messages = list(messages)
    stopped = [t for t in tallies if t.stopped > t.waiting]  # by --budget
    if stopped:
        from moot.core.runs import format_cost

        spent = format_cost(ledger.spent() if ledger is not None else None)
        left = ", ".join(f"{t.stopped - t.waiting} of {t.planned} {t.unit}" for t in stopped)
        messages.append(
            f"moot: budget reached: spent {spent} of {format_cost(args.budget)}; not done: {left}; "
            "what finished is written; rerun with a larger --budget to go on"
        )
    waiting = [t for t in tallies if t.waiting]
    if waiting:
        left = ", ".join(f"{t.waiting} of {t.planned} {t.unit}" for t in waiting)
        out = getattr(args, "out", None)
        messages.append(
            f"moot: waiting for their batches: {left}; collect them with `moot collect {out}` "
            "(or the same command again): nothing is submitted twice"
        )
    for tally in tallies:
        if tally.failed:
            messages.append(
                f"moot: {tally.failed} of {tally.planned} {tally.unit} failed; rerun the same "
                "command to retry them"
            )
    if nothing_read:
        messages.append(
            "moot: not one judge reply could be read (each is recorded with its problem), so "
            "nothing was measured; check the judge model and its replies in the output"
        )
    if stopped:
        code = STOPPED
    else:
        code = 1 if failed or nothing_read or any(t.failed for t in tallies) else 0
    folder = args.out if getattr(args, "out_folder", False) else None
    return Result(
        args.command_parser.prog,
        exit_code=code,
        folder=Path(folder).absolute() if folder is not None else None,
        outputs={name: Path(path).absolute() for name, path in (outputs or {}).items()},
        tallies=list(tallies),
        ledger=ledger,
        lines=list(lines),
        messages=messages,
        summary=summary_table(tallies, ledger) if tallies or ledger is not None else None,
    )


def summary_table(tallies: Sequence[Any], ledger: Any = None) -> str:
    """Items planned / done before / done now / failed per stage; calls, retries, tokens, cost."""
    from moot.core.runs import format_cost
    from moot.core.tables import render_table

    parts = []
    if tallies:
        rows = [("items", "planned", "done before", "done now", "failed", "stopped", "seconds")]
        rows += [
            (t.unit, t.planned, t.skipped, t.done, t.failed, t.stopped, f"{t.seconds:.1f}")
            for t in tallies
        ]
        parts.append(render_table(rows))
    if ledger is None:
        return "\n\n".join(parts)
    total = ledger.total()
    batched = total.batch_calls > 0  # the batch column only when some call was batched
    if ledger.entries:
        head = ("role", "stage", "model", "calls", "cached", "retries", "prompt", "completion")
        rows = [(*head, *(("batch",) if batched else ()), "cost $")]
        rows += [
            (
                role,
                stage,
                model,
                u.calls,
                u.cache_hits,
                u.retries,
                u.prompt_tokens,
                u.completion_tokens,
                *((u.batch_calls,) if batched else ()),
                "unpriced" if u.cost_usd is None else f"{u.cost_usd:.4f}",
            )
            for (role, stage, model), u in sorted(ledger.entries.items())
        ]
        parts.append(render_table(rows, left=3))
    cost = format_cost(total.cost_usd)
    if ledger.unpriced:  # the priced part, and what has no price
        priced = sum(u.cost_usd or 0.0 for u in ledger.entries.values())
        cost += f" (${priced:.4f} priced; no price for {', '.join(sorted(ledger.unpriced))})"
    calls = f"{total.cache_hits} cached" + (f", {total.batch_calls} in batches" if batched else "")
    parts.append(
        f"total: {total.calls} calls ({calls}), {total.retries} retries, "
        f"{total.prompt_tokens + total.completion_tokens} tokens, cost {cost}"
    )
    parts += billing_notes(ledger)
    return "\n\n".join(parts)


def billing_notes(ledger: Any) -> list[str]:
    """What the summary says of servers whose usage moot could not take as reported, by model."""
    counted: dict[str, int] = {}
    longer: dict[str, int] = {}
    for (_, _, model), usage in sorted(ledger.entries.items()):
        counted[model] = counted.get(model, 0) + usage.counted_replies
        longer[model] = longer.get(model, 0) + usage.longer_replies
    notes = [
        f"note: moot counted the tokens of {n} {_replies(n)} from {model} with its tokenizer: "
        "the server reported no usage, or usage that cannot be true"
        for model, n in counted.items()
        if n
    ]
    notes += [
        f"note: {model} answered longer than the max_tokens asked ({n} {_replies(n)}): its "
        "server ignores max_tokens; each reply was billed in full, and later requests to it "
        "reserved the longest against --budget"
        for model, n in longer.items()
        if n
    ]
    return notes


def _replies(n: int) -> str:
    return "reply" if n == 1 else "replies"


def push(args: argparse.Namespace, folder: Any, kind: str, result: Result) -> Result:
    """Push the command's finished artifact when ``--push-to-hub`` asks.

    Only a run that finished (exit code 0) is pushed; otherwise a message says why not. A push
    that fails says so and exits 1 (`FAILED`), the local folder left as it was: rerunning the
    command redoes no finished work and pushes again.

    Args:
        args: The parsed command line.
        folder: The artifact's folder (its card, ``README.md``, already written).
        kind: ``dataset`` or ``model`` (the repository's type).
        result: The command's result so far; it gets the push's URL, or its failure.
    """
    repo = getattr(args, "push_to_hub", None)
    if not repo:
        return result
    if result.exit_code != 0:
        result.messages.append(
            f"moot: not pushed to {repo}: the run is not finished (exit {result.exit_code}); "
            "rerun the same command to finish it, and it pushes"
        )
        return result
    from moot.core.hub.push import PushError, push_folder

    try:
        result.pushed = push_folder(folder, repo, kind, private=args.hub_private, quiet=args.quiet)
    except PushError as exc:
        result.messages.append(
            f"moot: {exc}; {folder} is complete and unchanged: rerun the same command to push it"
        )
        result.exit_code = FAILED
    return result
