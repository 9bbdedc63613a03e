"""Output folders (`RunFolder`): each one command's, one run's at a time, claimed for settings.

The first run of a command in a new or empty folder writes ``.moot/owner.json`` (the command and
moot's version); a later run of the same command passes; another command, or a non-empty folder
moot did not make, is refused before anything in it is touched. A run holds ``.moot/lock``
(``fcntl.flock``, which the kernel releases when the process dies, so a killed run leaves no stale
lock) while it works; a second run on the same folder is refused at once, naming the first. A
claim (``.moot/<name>.json``) pins the settings a folder's results were made with.

Folders made before owner marks are recognised by their claim files and manifests: each command
registers what its folders are (`register_output`: those marks, and how `moot view` shows them),
so nothing here names a command.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
from moot.core.redaction import scrub

MARKS = ".moot"
OWNER = f"{MARKS}/owner.json"
LOCK = f"{MARKS}/lock"
#: A run's progress, rewritten once a second by the run engine while a stage runs
#: (`moot.core.runs.Progress`), for `moot view --serve` to show.
PROGRESS = f"{MARKS}/progress.json"
MANIFEST = "manifest.json"

#: The claim of `moot.core.runs.run_claimed`'s folders (``.moot/eval.json``).
EVAL_CLAIM = "eval"


@dataclass(frozen=True)
class Mark:
    """A file by which a folder made before owner marks is known: a claim file or a manifest.

    Attributes:
        path: The file, in the folder (``.moot/judge.json``, ``manifest.json``).
        key: A key its JSON object must hold, or None (any content).
        value: The value `key` must have, or None (any).
    """

    path: str
    key: str | None = None
    value: Any = None

    @property
    def claim(self) -> bool:
        """Whether the mark is moot's alone (in ``.moot/``): a manifest could be anyone's file."""
        return self.path.startswith(f"{MARKS}/")

    def on(self, folder: Path) -> bool:
        """Whether `folder` bears this mark."""
        path = folder / self.path
        if not path.is_file():
            return False
        if self.key is None:
            return True
        data = _read_quietly(path)
        return isinstance(data, dict) and self.key in data and self.value in (None, data[self.key])


def claim_mark(name: str) -> Mark:
    """The mark of a folder claimed as `name` (`RunFolder.claim`): ``.moot/<name>.json``."""
    return Mark(f"{MARKS}/{name}.json")


@dataclass(frozen=True)
class Output:
    """What one command's output folder is; the command registers it (`register_output`).

    Attributes:
        view: How `moot view` shows it: a kind of `moot.core.view.payload.KINDS`, or None.
        marks: How a folder it made before owner marks is recognised (its claim, its manifest).
    """

    view: str | None = None
    marks: tuple[Mark, ...] = ()


#: Every registered output, by its owner (the name its owner mark holds: the command).
_OUTPUTS: dict[str, Output] = {}


def register_output(owner: str, output: Output) -> None:
    """Register what `owner`'s folders are; registering it again replaces it."""
    _OUTPUTS[owner] = output


def output_of(owner: str) -> Output | None:
    """What `owner`'s folders are, or None for an owner nobody registered."""
    return _OUTPUTS.get(owner)


def outputs() -> dict[str, Output]:
    """Every registered output, by its owner, in the order they were registered."""
    return dict(_OUTPUTS)


def _legacy(claims_only: bool = False) -> list[tuple[Mark, tuple[str, ...]]]:
    """Every registered mark with the owners that registered it: claim files, then the rest.

    A mark registered by several owners (``.moot/eval.json``) names them all, in the order they
    were registered.
    """
    found: dict[Mark, list[str]] = {}
    for owner, output in outputs().items():
        for mark in output.marks:
            found.setdefault(mark, []).append(owner)
    marks = sorted(found.items(), key=lambda entry: not entry[0].claim)  # stable: claims first
    return [(m, tuple(o)) for m, o in marks if m.claim or not claims_only]


def owners(folder: Path) -> tuple[str, ...] | None:
    """The commands `folder` belongs to: its owner mark's, else an earlier version's marks'.

    Returns:
        The commands (one, but an earlier version's ``.moot/eval.json`` names all that claim
        it), an empty tuple for a folder moot did not make, or None for a new or empty folder.

    Raises:
        InputError: The owner mark cannot be read.
    """
    folder = Path(folder)
    found = _marked(folder, _legacy())
    if found is not None:
        return found
    return () if holds_files(folder) else None


def _marked(folder: Path, legacy: Sequence[tuple[Mark, tuple[str, ...]]]) -> Any:
    """The commands that `folder`'s owner mark names, else its `legacy` marks; None: neither."""
    if (folder / OWNER).is_file():
        mark = read_json_file(folder / OWNER)
        command = mark.get("command") if isinstance(mark, dict) else None
        return (command,) if isinstance(command, str) else ()
    for mark, commands in legacy:
        if mark.on(folder):
            return commands
    return None


def _read_quietly(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None  # not an earlier version's manifest: the folder is someone else's


class RunFolder:
    """One run's output folder: its owner and lock, the settings it is claimed for, its manifest.

    Every command's folder goes through it. The owner mark (``.moot/owner.json``) says which
    command a folder belongs to, the lock (``.moot/lock``) that one run uses it at a time; a
    claim (``.moot/<name>.json``) pins the settings its results were made with, so a rerun with
    others is refused instead of mixing them; the manifest (``manifest.json``) says what it
    holds once a run has finished.

    Args:
        path: The folder.
        owner: The command it is for (what its owner mark holds: ``moot judge``).
        flag: How the user names the folder, for messages (``--out``, ``training.output_dir``).
    """

    def __init__(self, path: Path, owner: str = "", flag: str = "--out") -> None:
        self.path = Path(path)
        self.owner = owner
        self.flag = flag

    def check(self) -> None:
        """Refuse the folder unless it is new, empty, or its owner's; reads, never writes.

        Raises:
            ConfigError: The folder is a file, another command's, or holds files moot did not
                make.
        """
        folder, flag = self.path, self.flag
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{flag} {folder} is a file, not a folder")
        found = owners(folder)
        if found is None or self.owner in found:
            return
        if not found:
            raise ConfigError(
                f"{flag} {folder} holds files moot did not make; choose a new or empty folder"
            )
        raise ConfigError(
            f"{flag} {folder} belongs to `{found[0]}`, not `{self.owner}`: choose another folder"
        )

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the folder for one run of its owner: checked (`check`), then locked and marked.

        Nothing is written when the folder is refused. On exit the lock is released; a mark this
        run wrote is taken back (and the folders it made removed) when the run left nothing else.

        Raises:
            ConfigError: `check` refuses the folder, or another run holds it (named by its
                command, pid and start time).
            WriteError: The folder, its lock or its mark cannot be written (a full disk, ...).
        """
        folder = self.path
        self.check()
        made = [p for p in (folder, folder / MARKS) if not p.exists()]
        lock = None
        marked = False
        try:
            with writing(folder):
                (folder / MARKS).mkdir(parents=True, exist_ok=True)
                lock = self._lock()
            self.check()  # again, under the lock: a run may have marked it since
            if owners(folder) is None:
                write_json(folder / OWNER, {"command": self.owner, "version": _version()})
                marked = True
            yield
        finally:
            if lock is not None:
                with contextlib.suppress(OSError):
                    (folder / LOCK).unlink()  # before the release, so no run locks a dead file
                lock.close()
            if marked and not holds_files(folder):  # its progress, of a run that left nothing
                for mark in (OWNER, PROGRESS):
                    with contextlib.suppress(OSError):
                        (folder / mark).unlink()
            for path in reversed(made):
                with contextlib.suppress(OSError):  # not empty: the run made something
                    path.rmdir()

    def _lock(self) -> Any:
        """Lock ``.moot/lock`` (created if missing) for this process; the open file holds it.

        Raises:
            ConfigError: Another process holds it.
        """
        path = self.path / LOCK
        while True:
            f = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held for the whole run
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.seek(0)
                holder = _read_holder(f.read())
                f.close()
                raise ConfigError(f"{self.flag} {self.path} is in use by {holder}") from None
            try:
                if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                    break
            except FileNotFoundError:
                pass
            f.close()  # its holder removed it as we opened it: lock the new file
        f.truncate(0)
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
        f.write(json.dumps({"command": self.owner, "pid": os.getpid(), "started": started}) + "\n")
        f.flush()
        return f

    def claim_path(self, name: str) -> Path:
        """The claim file named `name` (``eval``, ``judge``, ``pd``, ``run``, ``train``)."""
        return self.path / claim_mark(name).path

    def claimed(self, name: str) -> Any:
        """The claim `name` as written, or None when the folder has none.

        Raises:
            InputError: The claim cannot be read.
        """
        path = self.claim_path(name)
        return read_json_file(path) if path.exists() else None

    def check_claim(
        self,
        name: str,
        settings: dict[str, Any],
        holds: str,
        same: Callable[[Any], bool] | None = None,
    ) -> None:
        """Refuse the folder if it is claimed as `name` for other settings; reads only.

        Args:
            name: The claim file's stem (``eval``, ``judge``, ``pd``).
            settings: The settings, JSON-safe.
            holds: What the folder holds otherwise, for the error (``judgments made with other
                settings``).
            same: Whether the claim as written is for these settings; by default, it equals
                them as `claim` writes them (`scrub`).

        Raises:
            ConfigError: The folder is claimed for other settings.
        """
        claimed = self.claimed(name)
        if claimed is None:
            return
        if not (same(claimed) if same else claimed == scrub(settings)):
            raise ConfigError(f"{self.path} holds {holds}; use a new {self.flag}")

    def claim(
        self,
        name: str,
        settings: dict[str, Any],
        holds: str,
        same: Callable[[Any], bool] | None = None,
    ) -> None:
        """Claim the folder as `name` for one set of settings (``.moot/<name>.json``).

        Called before any work. A rerun with the same settings passes; with others it is refused
        (`check_claim`, same arguments), so results made with different settings are never mixed
        or dropped. The claim is written once, scrubbed (`scrub`), as every record of options is.

        Raises:
            ConfigError: The folder is claimed for other settings.
        """
        self.check_claim(name, settings, holds, same)
        path = self.claim_path(name)
        if not path.exists():
            write_json(path, scrub(settings))

    @staticmethod
    def common_claim(folders: Sequence[Path], name: str, made_by: str) -> dict[str, Any]:
        """The settings all `folders` were claimed for as `name`, which must agree.

        Args:
            folders: Output folders of one command.
            name: The claim file's stem (``eval``, ``pd``).
            made_by: The command that claims them, for the error (``moot eval pd``).

        Raises:
            ConfigError: A folder without the claim (`made_by` did not make it), or two folders
                whose claims differ (naming both and the first setting that differs).
        """
        claims = []
        for folder in folders:
            path = RunFolder(folder).claim_path(name)
            claim = _read_quietly(path)
            if not isinstance(claim, dict):
                raise ConfigError(
                    f"{folder}: no readable {path.name} claim: not a {made_by} folder"
                )
            claims.append(claim)
        for folder, claim in zip(folders[1:], claims[1:], strict=True):
            for key in dict.fromkeys([*claims[0], *claim]):
                if claims[0].get(key) != claim.get(key):
                    raise ConfigError(
                        f"{folders[0]} and {folder} differ in {key} ({claims[0].get(key)!r} vs "
                        f"{claim.get(key)!r}): their scores are not comparable"
                    )
        return claims[0]

    @property
    def manifest_path(self) -> Path:
        """The manifest: what the folder holds, written when a run finishes."""
        return self.path / MANIFEST

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write the manifest atomically (pretty JSON, as every manifest moot writes)."""
        write_json(self.manifest_path, manifest)


def check_outputs(
    outputs: Sequence[tuple[str, Path]],
    inputs: Sequence[tuple[str, Path]],
    *,
    within: Sequence[Path] = (),
    page: str | None = None,
    holds_runs: bool = False,
) -> None:
    """Refuse an output that is, holds or lies inside an input, or lies inside or holds a run.

    Reads only; called before any work. A run folder is one moot marked in ``.moot/`` (its owner
    mark, or an earlier version's claim: `Mark.claim`): a path inside one would be swept away or
    mixed up with that run's results (``moot index --out idx`` replaces the folder whole), and a
    folder holding one would write over it.

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
    claims = _legacy(claims_only=True)
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
            found = _marked(folder, claims)
            if found is not None:
                raise ConfigError(
                    f"{flag} {path} lies inside {_shown(folder)}, {_whose(found)}; choose "
                    f"another {flag}, outside every run's folder"
                )
        nested = None if holds_runs or not path.is_dir() else _run_below(path, claims)
        if nested is not None:
            folder, found = nested
            raise ConfigError(
                f"{flag} {path} holds {_shown(folder)}, {_whose(found)}; move it out, or choose "
                f"another {flag}"
            )


def _run_below(
    folder: Path, claims: Sequence[tuple[Mark, tuple[str, ...]]]
) -> tuple[Path, tuple[str, ...]] | None:
    """The first run folder inside `folder` (marked, or by one of `claims`), and its commands."""
    for root, dirs, _ in os.walk(folder):
        dirs[:] = [name for name in dirs if name != MARKS]
        for name in dirs:
            found = _marked(Path(root) / name, claims)
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
    run, claims = path, _legacy(claims_only=True)
    for folder in (path, *path.parents):
        if folder.name and folder.is_dir() and _marked(folder, claims) is not None:
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


def _read_holder(text: str) -> str:
    """The lock holder, for the refusal: ``moot judge (pid 123, started ...)``."""
    try:
        holder = json.loads(text)
        return f"`{holder['command']}` (pid {holder['pid']}, started {holder['started']})"
    except (ValueError, TypeError, KeyError):
        return "another moot run (starting)"  # it has not written its name yet


def _version() -> str:
    return package_versions("moot").get("moot", "unknown")
