"""Output folders: each belongs to the command that made it, and one run at a time uses it.

The first run of a command in a new or empty folder writes ``.moot/owner.json`` (the command and
moot's version); a later run of the same command passes; another command, or a non-empty folder
moot did not make, is refused before anything in it is touched. A run holds ``.moot/lock``
(``fcntl.flock``, which the kernel releases when the process dies, so a killed run leaves no stale
lock) while it works; a second run on the same folder is refused at once, naming the first.
Folders made before owner marks are recognised by their claim files and manifests.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from moot.core.data.records import (
    holds_files,
    overlap,
    package_versions,
    read_json_file,
    write_json,
)
from moot.core.errors import ConfigError, writing

MARKS = ".moot"
OWNER = f"{MARKS}/owner.json"
LOCK = f"{MARKS}/lock"

#: The commands that claim ``.moot/eval.json`` (`moot.core.runs.run_claimed`).
_EVAL_CLAIMERS = (
    "moot eval controllability",
    "moot eval quality",
    "moot eval da",
    "moot eval berds",
    "moot eval detector",
    "moot eval compqa",
    "moot answer",
    "moot curate",
    "moot compare",
)


def _key(key: str, value: Any = None) -> Callable[[Any], bool]:
    """A JSON object with `key` (equal to `value`, unless None)."""
    return lambda data: isinstance(data, dict) and key in data and value in (None, data[key])


#: How folders made before owner marks are recognised: a file in them, what its JSON holds
#: (None: any content), and the commands that made it. The claim files, then the manifests.
LEGACY: tuple[tuple[str, Callable[[Any], bool] | None, tuple[str, ...]], ...] = (
    (f"{MARKS}/run.json", None, ("moot debate",)),
    (f"{MARKS}/judge.json", None, ("moot judge",)),
    (f"{MARKS}/pd.json", None, ("moot eval pd",)),
    (f"{MARKS}/eval.json", None, _EVAL_CLAIMERS),
    ("manifest.json", _key("kind", "debatune"), ("moot debate", "moot merge-shards")),
    ("manifest.json", _key("kind", "mix"), ("moot data mix",)),
    ("manifest.json", _key("kind", "merged-model"), ("moot train merge",)),
    ("manifest.json", _key("kind", "compqa-distill"), ("moot data distill-compqa",)),
    ("index.json", None, ("moot index",)),
    ("summary.json", _key("evaluation", "panelbench"), ("moot eval panelbench",)),
    ("report.json", _key("report", "debateqa"), ("moot report debateqa",)),
    ("report.json", _key("generator_scenario"), ("moot report compqa",)),
)


def owners(folder: Path) -> tuple[str, ...] | None:
    """The commands `folder` belongs to: its owner mark's, else an earlier version's marks'.

    Returns:
        The commands (one, but an earlier version's ``.moot/eval.json`` names all that claim
        it), an empty tuple for a folder moot did not make, or None for a new or empty folder.

    Raises:
        InputError: The owner mark cannot be read.
    """
    folder = Path(folder)
    found = _marked(folder, LEGACY)
    if found is not None:
        return found
    return () if holds_files(folder) else None


#: The earlier versions' marks that are moot's alone, in ``.moot/`` (a manifest alone could be
#: anyone's file): how `check_outputs` and `beside_runs` know a run folder above or below a path.
CLAIMS = tuple(entry for entry in LEGACY if entry[0].startswith(f"{MARKS}/"))


def _marked(folder: Path, legacy: Sequence[tuple[str, Any, tuple[str, ...]]]) -> Any:
    """The commands that `folder`'s owner mark names, else its `legacy` marks; None: neither."""
    if (folder / OWNER).is_file():
        mark = read_json_file(folder / OWNER)
        command = mark.get("command") if isinstance(mark, dict) else None
        return (command,) if isinstance(command, str) else ()
    for name, holds, commands in legacy:
        path = folder / name
        if path.is_file() and (holds is None or holds(_read_quietly(path))):
            return commands
    return None


def _read_quietly(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # not an earlier version's manifest: the folder is someone else's


def check_owner(folder: Path, command: str) -> None:
    """Refuse `folder` unless it is new, empty, or `command`'s; reads, never writes.

    Raises:
        ConfigError: The folder is a file, another command's, or holds files moot did not make.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder} is a file, not a folder")
    found = owners(folder)
    if found is None or command in found:
        return
    if not found:
        raise ConfigError(
            f"--out {folder} holds files moot did not make; choose a new or empty folder"
        )
    raise ConfigError(
        f"--out {folder} belongs to `{found[0]}`, not `{command}`: choose another folder"
    )


def check_outputs(
    outputs: Sequence[tuple[str, Path]],
    inputs: Sequence[tuple[str, Path]],
    *,
    within: Sequence[Path] = (),
    page: str | None = None,
    holds_runs: bool = False,
) -> None:
    """Refuse an output that is, holds or lies inside an input, or lies inside or holds a run.

    Reads only; called before any work. A run folder is one moot marked (`CLAIMS`): a path
    inside one would be swept away or mixed up with that run's results (``moot index --out idx``
    replaces the folder whole), and a folder holding one would write over it.

    Args:
        outputs: Every path the command writes, with its flag (``--out``, ``--cache``).
        inputs: Every path it reads, with its flag; those that do not exist are no files.
        within: Run folders its outputs may lie inside: its own ``--out`` folder, the `moot run`
            folder of which it is a stage.
        page: The one file name it may write straight inside an input folder (`moot view`'s
            page of the run it shows, ``view.html``).
        holds_runs: Its output folder holds other commands' run folders (`moot run`'s stages).

    Raises:
        ConfigError: The first output that overlaps, naming both paths (and the run's command).
    """
    own = {Path(folder).resolve() for folder in within}
    for flag, path in outputs:
        path = Path(path)
        if page and path.name == page and any(overlap(path.parent, i) == "is" for _, i in inputs):
            continue  # the page of a run folder it reads
        for source_flag, source in inputs:
            how = overlap(path, source)
            if how:
                raise ConfigError(
                    f"{flag} {path} {how} the input {source_flag} {source}; choose another {flag}"
                )
        for folder in path.resolve().parents:
            if folder in own:
                break  # its own run's folder, checked as an output of its own
            found = _marked(folder, CLAIMS)
            if found is not None:
                raise ConfigError(
                    f"{flag} {path} lies inside {_shown(folder)}, {_whose(found)}; choose "
                    f"another {flag}, outside every run's folder"
                )
        nested = None if holds_runs or not path.is_dir() else _run_below(path)
        if nested is not None:
            folder, found = nested
            raise ConfigError(
                f"{flag} {path} holds {_shown(folder)}, {_whose(found)}; move it out, or choose "
                f"another {flag}"
            )


def _run_below(folder: Path) -> tuple[Path, tuple[str, ...]] | None:
    """The first run folder inside `folder`, and its commands; None if it holds none."""
    for root, dirs, _ in os.walk(folder):
        dirs[:] = [name for name in dirs if name != MARKS]
        for name in dirs:
            found = _marked(Path(root) / name, CLAIMS)
            if found is not None:
                return Path(root) / name, found
    return None


def beside_runs(path: Path, suffix: str) -> Path:
    """A default output about `path` (a file or a folder), outside every run folder.

    Beside the outermost run folder that is or holds `path`, named after the folders from there
    down to it, then `suffix`: ``runs/answer.pd`` for ``runs/answer/answers.jsonl``, and
    ``runs/loop.answer-rag.pd`` for ``runs/loop/answer-rag/answers.jsonl``, so two stages of one
    `moot run` get two. Beside `path` itself, named after it, when no run folder holds it. The
    path's own parents are looked at as given, so the default reads as the input was named.
    """
    path = Path(path)
    run = path
    for folder in (path, *path.parents):
        if folder.name and folder.is_dir() and _marked(folder, CLAIMS) is not None:
            run = folder
    if run == path:
        return path.with_name((path.name if path.is_dir() else path.stem) + suffix)
    parts = path.relative_to(run.parent).parts
    return run.with_name(".".join(parts if path.is_dir() else parts[:-1]) + suffix)


def _whose(found: tuple[str, ...]) -> str:
    return f"`{found[0]}`'s run folder" if len(found) == 1 else "a moot run folder"


def _shown(folder: Path) -> str:
    """`folder` relative to the current folder when it is inside it, else absolute."""
    relative = os.path.relpath(folder)
    return relative if not relative.startswith("..") else str(folder)


@contextlib.contextmanager
def own_folder(folder: Path, command: str) -> Iterator[None]:
    """Hold `folder` for one run of `command`: its owner checked, then locked and marked.

    Nothing is written when the folder is refused. On exit the lock is released; a mark this
    run wrote is taken back (and the folders it made removed) when the run left nothing else.

    Raises:
        ConfigError: `check_owner` refuses the folder, or another run holds it (named by its
            command, pid and start time).
        WriteError: The folder, its lock or its mark cannot be written (a full disk, ...).
    """
    folder = Path(folder)
    check_owner(folder, command)
    made = [p for p in (folder, folder / MARKS) if not p.exists()]
    lock = None
    marked = False
    try:
        with writing(folder):
            (folder / MARKS).mkdir(parents=True, exist_ok=True)
            lock = _lock(folder / LOCK, command)
        check_owner(folder, command)  # again, under the lock: a run may have marked it since
        if owners(folder) is None:
            write_json(folder / OWNER, {"command": command, "version": _version()})
            marked = True
        yield
    finally:
        if lock is not None:
            with contextlib.suppress(OSError):
                (folder / LOCK).unlink()  # before the release, so no run locks a dead file
            lock.close()
        if marked and not holds_files(folder):
            with contextlib.suppress(OSError):
                (folder / OWNER).unlink()
        for path in reversed(made):
            with contextlib.suppress(OSError):  # not empty: the run made something
                path.rmdir()


def _lock(path: Path, command: str) -> Any:
    """Lock `path` (created if missing) for this process; the open file holds the lock.

    Raises:
        ConfigError: Another process holds it.
    """
    while True:
        f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = _read_holder(f.read())
            f.close()
            raise ConfigError(f"--out {path.parent.parent} is in use by {holder}") from None
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()  # its holder removed it as we opened it: lock the new file
    f.truncate(0)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
    f.write(json.dumps({"command": command, "pid": os.getpid(), "started": started}) + "\n")
    f.flush()
    return f


def _read_holder(text: str) -> str:
    """The lock holder, for the refusal: ``moot judge (pid 123, started ...)``."""
    try:
        holder = json.loads(text)
        return f"`{holder['command']}` (pid {holder['pid']}, started {holder['started']})"
    except (ValueError, TypeError, KeyError):
        return "another moot run (starting)"  # it has not written its name yet


def _version() -> str:
    return package_versions("moot").get("moot", "unknown")
