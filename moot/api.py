"""moot from Python: every command as a function, with every guarantee the command line has.

A command's function takes its flags as keyword arguments, named as the flags with ``_`` for
``-`` (``arguments_per_stance=1`` is ``--arguments-per-stance 1``; a bare flag is ``True``), with
the command line's defaults. They are read by the command's own parser, as a ``--config`` file's
values are (`moot.cli.config.option_defaults`): the same checks, the same did-you-mean, the same
one-line errors. The command then runs through the path of the command line
(`moot.cli.runtime.execute`: its folder owned and locked, its inputs checked before the first
paid call, its run resumable), and returns its `moot.result.Result` instead of printing it.

    >>> import moot
    >>> result = moot.debate(topics="topics.json", out="runs/debates", rounds=2)  # doctest: +SKIP
    >>> result.to_pandas()  # doctest: +SKIP

A command the user must fix raises `moot.core.errors.InputError` or `ConfigError` before it runs.
A run that did not do all its job raises `RunFailed` (some items failed, a push failed) or
`RunStopped` (``budget`` reached); both hold the `Result`, and what finished is kept, so calling
again resumes. ``dry_run=True`` returns the plan (`Result.plan`): nothing is sent or written.

Each function works inside a running event loop (a Jupyter notebook): it then runs in a thread of
its own. Each has an ``async`` twin, named with an ``a`` in front (`adebate`, ``eval.aquality``).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import ctypes
import inspect
import keyword
import re
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from moot.cli.main import build_parser
from moot.result import STOPPED, Result


class RunFailed(Exception):
    """A command that ran but did not do all its job: its items failed, or its push did.

    What finished is kept: calling the command again retries the rest.

    Attributes:
        result: What the command did.
    """

    def __init__(self, result: Result) -> None:
        lines = result.messages or [f"exit code {result.exit_code}"]
        super().__init__(f"{result.command}: " + "\n".join(lines))
        self.result = result


class RunStopped(RunFailed):
    """``budget`` stopped the run: what finished is kept; call again with a larger budget."""


def call(command: str, /, **options: Any) -> Result:
    """Run moot command `command` (``"debate"``, ``"eval quality"``) with its flags `options`.

    Raises:
        ConfigError: An unknown command, or an option its flag refuses.
        InputError: An input the command refuses (before it runs).
        RunFailed: It ran, and some of its work failed.
        RunStopped: Its ``budget`` stopped it.
    """
    with _redacted():
        args = command_args(command, options)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop here: the command runs its own
        return _checked(_execute(args))
    thread, running = _in_a_thread(args)  # a notebook's loop runs here: the command beside it
    try:
        while not running.done():  # awake now and then: a signal may wake another thread
            concurrent.futures.wait([running], timeout=0.1)
    except KeyboardInterrupt:  # the notebook's interrupt: stop the command as Ctrl-C does
        _interrupt(thread)
        raise
    return _checked(running.result())


async def acall(command: str, /, **options: Any) -> Result:
    """`call`, awaitable: the command runs in a thread, its event loop its own.

    Cancelling the awaiting task stops the command as Ctrl-C stops the command line.
    """
    with _redacted():
        args = command_args(command, options)
    thread, running = _in_a_thread(args)
    try:
        result = await asyncio.wrap_future(running)
    except asyncio.CancelledError:
        _interrupt(thread)
        raise
    return _checked(result)


def _in_a_thread(args: Any) -> tuple[threading.Thread, concurrent.futures.Future[Result]]:
    """Run the command in a thread of its own (its event loop its own); its future result."""
    running: concurrent.futures.Future[Result] = concurrent.futures.Future()

    def work() -> None:
        running.set_running_or_notify_cancel()  # from now on it ends only by `_interrupt`
        try:
            running.set_result(_execute(args))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            running.set_exception(exc)

    thread = threading.Thread(target=work, name=f"moot {args.command_parser.prog}", daemon=True)
    thread.start()
    return thread, running


def _interrupt(thread: threading.Thread) -> None:
    """Stop the command running in `thread` as Ctrl-C stops the command line, and wait for it.

    Its running work is cancelled (`moot.cli.runtime.run`); between its runs, a
    `KeyboardInterrupt` is raised in the thread when it next runs Python. Either way what
    finished is kept, its output folder's lock let go of, and calling it again resumes it.
    """
    from moot.cli.runtime import RUNNING

    running = RUNNING.get(thread.ident or 0)
    if running is not None:
        loop, task = running
        loop.call_soon_threadsafe(task.cancel)
    else:
        ident = ctypes.c_ulong(thread.ident or 0)
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ident, ctypes.py_object(KeyboardInterrupt))
    thread.join(INTERRUPT_WAIT)


#: Seconds an interrupted command is waited for (it stops at its next reply or timer).
INTERRUPT_WAIT = 30.0


def command_args(command: str, options: dict[str, Any]) -> Any:
    """`command`'s parsed arguments from `options`, checked as the command line checks them.

    Raises:
        ConfigError: An unknown command, option or value, or a required option missing.
    """
    from moot.cli.config import (
        command_parser,
        option_defaults,
        parse_with,
        positional_argv,
        read_config,
    )
    from moot.core.errors import ConfigError, InputError

    words = command.split()
    command_line = command_parser(_PARSER, words)
    name = f"moot.{'.'.join(word.replace('-', '_') for word in words)}()"
    if command_line is None:
        raise ConfigError(f"{name}: no such moot command")
    options = {_flag_name(key): value for key, value in options.items()}
    takes_config = "config" in _flags(command_line)  # --config FILE.yaml (not train sft's own)
    config = options.pop("config", None) if takes_config else None
    try:
        values = option_defaults(command_line, options, name, positionals=True)
    except InputError as exc:  # the keyword is the flag's name: said as a keyword
        said = str(exc).replace("option '", "keyword '")
        raise ConfigError(_SUGGESTED.sub(lambda m: f"'{_keyword(m[1])}'", said)) from None
    if config is not None:  # its values under the keywords, as under the command line's flags
        values = {**option_defaults(command_line, read_config(config), config), **values}
    argv = positional_argv(command_line, values)
    args = parse_with(_PARSER, words, argv, values)  # reads the parser, never changes it
    if takes_config:
        args.config = config if config is None else Path(config)  # inline `prices:` read against it
    for dest in getattr(args, "required_flags", ()):
        if getattr(args, dest, None) is None:
            flag = _keyword(max(_flags(command_line)[dest], key=len))
            raise ConfigError(f"{name}: missing keyword {flag!r}")
    args.echo = False  # the result is returned, not printed
    return args


def _keyword(flag: str) -> str:
    """A flag's keyword argument: ``--arguments-per-stance`` is ``arguments_per_stance``.

    A flag that is a word of Python takes a ``_`` after it: ``--in`` is ``in_``.
    """
    name = flag.lstrip("-").replace("-", "_")
    return f"{name}_" if keyword.iskeyword(name) else name


def _flag_name(key: str) -> str:
    """The flag a keyword argument names (`_keyword` backwards: ``in_`` is ``in``)."""
    return key[:-1] if key.endswith("_") and keyword.iskeyword(key[:-1]) else key


#: A did-you-mean's flag name, said as its keyword.
_SUGGESTED = re.compile(r"(?<=did you mean )'([^']+)'")


def _flags(command_line: Any) -> dict[str, list[str]]:
    return {action.dest: action.option_strings for action in command_line._actions}


def _execute(args: Any) -> Result:
    from moot.cli.runtime import execute

    with _redacted():
        return execute(args)


@contextlib.contextmanager
def _redacted() -> Iterator[None]:
    """A refusal's message without a key this process knows, as the command line prints it.

    A notebook's output is shared as readily as a terminal's.
    """
    from moot.core.errors import MootError
    from moot.core.redaction import redact

    try:
        yield
    except MootError as exc:
        exc.args = (redact(str(exc)),)
        raise


def _checked(result: Result) -> Result:
    if result.exit_code == STOPPED:
        raise RunStopped(result)
    if result.exit_code != 0:
        raise RunFailed(result)
    return result


def _command(command: str) -> tuple[Callable[..., Result], Callable[..., Awaitable[Result]]]:
    """The function of `command` and its async twin, with the command's flags as signature."""
    name = command.split()[-1].replace("-", "_")

    def run(*positional: Any, **options: Any) -> Result:
        return call(command, **_with_positional(command, positional, options))

    async def arun(*positional: Any, **options: Any) -> Result:
        return await acall(command, **_with_positional(command, positional, options))

    signature, doc = _described(command)
    for function, shown in ((run, name), (arun, f"a{name}")):
        function.__name__ = function.__qualname__ = shown
        function.__signature__ = signature  # type: ignore[attr-defined]
        function.__doc__ = doc if function is run else f"`{name}`, awaitable.\n\n{doc}"
    return run, arun


def _described(command: str) -> tuple[inspect.Signature, str]:
    """`command`'s keyword arguments (its flags, with their defaults) and its docstring.

    So ``help(moot.debate)`` and a notebook's tooltips show what `moot debate --help` shows.
    """
    from moot.cli.config import command_parser

    parser = command_parser(_PARSER, command.split())
    assert parser is not None, command  # the table below names only commands
    parameters, lines = [], []
    first = POSITIONAL.get(command)
    required = parser.get_default("required_flags") or ()
    for action in parser._actions:
        if action.dest in _NOT_KEYWORDS or action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse.BooleanOptionalAction):  # `constrained=False` is --no-
            flag = action.option_strings[0]
        else:  # --judge, not -j
            flag = max(action.option_strings, key=len, default=action.dest)
        keyword = _keyword(flag)
        kind = inspect.Parameter.KEYWORD_ONLY
        if action.dest == first:
            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        needed = action.dest in required or (not action.option_strings and action.nargs != "?")
        default = inspect.Parameter.empty if needed else action.default
        parameter = inspect.Parameter(keyword, kind, default=default)
        if kind is inspect.Parameter.KEYWORD_ONLY:
            parameters.append(parameter)
        else:  # the positional one comes first
            parameters.insert(0, parameter)
        help_text = (action.help or "").replace("%%", "%")
        if "default" not in help_text and "required" not in help_text:
            help_text += " (required)" if needed else f" (default {action.default!r})"
        lines.append(f"    {keyword}: {help_text.strip()}")
    description = (parser.description or "").replace("%%", "%")
    doc = (
        f"`moot {command}` from Python: {description}\n\n"
        "Keyword arguments are its flags, ``_`` for ``-`` (docs/cli.md, docs/python.md); it "
        "returns its `moot.result.Result`, and raises `RunFailed` or `RunStopped` (holding it) "
        "when it did not do all its job.\n\nArgs:\n" + "\n".join(lines) + "\n"
    )
    return inspect.Signature(parameters, return_annotation=Result), doc


#: Parser entries that are not keyword arguments of a command's function.
_NOT_KEYWORDS = ("help", "debug", "command_fn")


#: The whole command line's parser: it reads every call's keywords, and gives the functions'
#: signatures and docstrings.
_PARSER = build_parser()

#: The one positional argument a command takes from Python, by command: `moot.run("r.yaml")`.
POSITIONAL = {
    "run": "recipe",
    "view": "runs",
    "merge-shards": "dirs",
    "models check": "spec",
    "templates export": "folder",
    "collect": "run",
    "report agreement": "runs",
    "data preferences": "runs",
}


def _with_positional(command: str, given: tuple[Any, ...], options: dict[str, Any]) -> dict:
    if not given:
        return options
    dest = POSITIONAL.get(command)
    if dest is None or dest in options:
        from moot.core.errors import ConfigError

        raise ConfigError(f"moot.{command.replace(' ', '.')}() takes keyword arguments only")
    return {dest: list(given) if len(given) > 1 else given[0], **options}


def _group(*commands: str) -> SimpleNamespace:
    """The functions of a group's commands (``moot.eval.quality``), and their async twins."""
    functions = {}
    for command in commands:
        run, arun = _command(command)
        functions[run.__name__], functions[arun.__name__] = run, arun
    return SimpleNamespace(**functions)


debate, adebate = _command("debate")
merge_shards, amerge_shards = _command("merge-shards")
generate, agenerate = _command("generate")
judge, ajudge = _command("judge")
answer, aanswer = _command("answer")
curate, acurate = _command("curate")
compare, acompare = _command("compare")
index, aindex = _command("index")
retrieve, aretrieve = _command("retrieve")
run, arun = _command("run")
view, aview = _command("view")
protocol, aprotocol = _command("protocol")
collect, acollect = _command("collect")

eval = _group(  # noqa: A001 - `moot eval quality` is `moot.eval.quality`
    "eval controllability",
    "eval quality",
    "eval panelbench",
    "eval pd",
    "eval da",
    "eval berds",
    "eval detector",
    "eval compqa",
    "eval judge",
)
report = _group("report debateqa", "report compqa", "report agreement")
data = _group("data distill-compqa", "data mix", "data preferences")
train = _group("train sft", "train dpo", "train merge")
models = _group("models check")
templates = _group("templates export")
