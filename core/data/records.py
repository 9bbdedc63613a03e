"""Durable result files: an append-only JSONL ledger keyed by stable ids, and atomic writes.

A rerun reads the ledger and skips finished work; a crash can only tear the last line, which the
reader ignores (that item is simply redone, its model calls served from the cache). Derived outputs
are written to a temporary sibling and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import hashlib
import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from moot.core.data.planned import planned_text
from moot.core.errors import ConfigError, InputError, writing
from moot.core.loader import RepeatedKey, Unreadable, load_json


def package_versions(*packages: str) -> dict[str, str]:
    """Python's version and the installed `packages`' (missing ones left out), for manifests."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def stable_id(*parts: Any, length: int = 16) -> str:
    """A short deterministic id from JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


class ResultLog:
    """Append-only JSONL of records with an ``id`` field; the last record per id wins.

    Args:
        path: The JSONL file (created on first append).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()  # appends may come from worker threads

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record in file order, an id's later records after its earlier ones.

        A torn or corrupt line is skipped; records are read one at a time, never all held.
        """
        for _, _, record in self._lines():
            if record is not None:
                yield record

    def load(self) -> dict[str, dict[str, Any]]:
        """Records by id, in first-seen order; a torn or corrupt line is skipped."""
        records: dict[str, dict[str, Any]] = {}
        for record in self.records():
            records[record["id"]] = record
        return records

    def load_checked(self) -> tuple[dict[str, dict[str, Any]], bool]:
        """Records by id (`load`), every line checked; and whether the last line was torn.

        A last line without its newline that cannot be read is what a stop mid-append leaves
        (its item unfinished); any other line that is not a record with an id is corruption.

        Raises:
            InputError: A line, not a torn last one, that is not a record with an id.
        """
        records: dict[str, dict[str, Any]] = {}
        torn = False
        for number, (_, line, record) in enumerate(self._lines(), start=1):
            if record is not None:
                records[record["id"]] = record
            elif not line.endswith(b"\n"):
                torn = True
            elif line.strip():
                raise InputError(
                    self.path,
                    "not a readable record with an id (a crash's torn line, sealed by a later "
                    "run: rerunning the command that wrote the log rewrites it whole)",
                    f"line {number}",
                )
        return records, torn

    def ids_where(self, test: Callable[[dict[str, Any]], bool]) -> set[str]:
        """The ids whose last record passes `test` (e.g. finished), holding no record."""
        passed: dict[str, bool] = {}
        for record in self.records():
            passed[record["id"]] = test(record)
        return {key for key, ok in passed.items() if ok}

    def _lines(self) -> Iterator[tuple[int, bytes, dict[str, Any] | None]]:
        """Each line's offset, bytes and record (None: torn, corrupt, not a record with an id).

        Raises:
            InputError: The log is not a regular file (a FIFO would make the read wait for ever).
        """
        if not self.path.exists():
            return
        if not self.path.is_file():
            raise InputError(self.path, "not a regular file (a FIFO, a device or a folder)")
        with self.path.open("rb") as f:  # bytes: a crash can tear a line inside a character
            offset = 0
            for line in f:
                try:
                    record = json.loads(line.decode("utf-8"))
                except ValueError:  # UnicodeDecodeError is one
                    record = None  # a line torn by a crash: its item is redone
                if not (isinstance(record, dict) and "id" in record):
                    record = None
                yield offset, line, record
                offset += len(line)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record and flush it to disk before returning.

        Raises:
            WriteError: The OS refused (a full disk, ...); the records before it are kept, and
                a line this one tore is skipped by the reader and sealed by the next append.
        """
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with writing(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, self.path.open("a", encoding="utf-8") as f:
                if f.tell() and not _ends_with_newline(self.path):
                    f.write("\n")  # seal a line torn by an earlier crash
                f.write(line)
                f.flush()
                os.fsync(f.fileno())

    def compact(self, records: Iterable[dict[str, Any]]) -> None:
        """Rewrite the log atomically with exactly `records` (one line per id)."""
        write_jsonl(self.path, records)

    def compact_only(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Rewrite the log atomically with the records of `ids` alone, in that order.

        Returns:
            Those records.
        """
        return self._compact(ids, keep_others=False)

    def compact_current_first(self, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Rewrite the log atomically, one line per id, the records of `ids` first.

        The records of `ids` come in that order, then every other record: earlier runs' items,
        kept so that running them again costs nothing.

        Returns:
            The records of `ids` the log holds, in order.
        """
        return self._compact(ids, keep_others=True)

    def compact_lines(self, ids: Sequence[str], *, keep_others: bool = True) -> None:
        """`compact_current_first` (or `compact_only`) without reading the records back.

        A log already in that order, one line per id, is left as it is (a rerun that found
        everything done rewrites nothing); else lines are copied, never all held in memory.
        """
        self._compact(ids, keep_others=keep_others, read_back=False)

    def _compact(
        self, ids: Sequence[str], *, keep_others: bool, read_back: bool = True
    ) -> list[dict[str, Any]]:
        spans: dict[str, tuple[int, int]] = {}  # id -> its last record's line: offset, size
        order: list[str] = []  # the ids of the file's lines, as they are
        clean = True  # every line a record that ends with a newline
        for offset, line, record in self._lines():
            clean = clean and record is not None and line.endswith(b"\n")
            if record is not None:
                spans[record["id"]] = (offset, len(line))
                order.append(record["id"])
        kept = [key for key in dict.fromkeys(ids) if key in spans]
        if keep_others:
            asked = set(kept)
            kept += [key for key in spans if key not in asked]
        if not (clean and order == kept and self.path.exists()):  # a missing log is created
            spans = dict(zip(kept, self._rewrite([spans[key] for key in kept]), strict=True))
        if not read_back:
            return []
        with self.path.open("rb") as f:
            found = []
            for key in ids:
                if key in spans:
                    offset, size = spans[key]
                    f.seek(offset)
                    found.append(json.loads(f.read(size).decode("utf-8")))
        return found

    def _rewrite(self, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """Rewrite the log atomically with these lines of it, in order; their new spans."""
        moved: list[tuple[int, int]] = []

        def copy(out: Any) -> None:
            offset = 0
            if not spans:  # a missing log is created empty
                return
            with self.path.open("rb") as f:
                for start, size in spans:
                    f.seek(start)
                    line = f.read(size).rstrip(b"\n") + b"\n"
                    out.write(line)
                    moved.append((offset, len(line)))
                    offset += len(line)

        atomic_write(self.path, copy, binary=True)
        return moved


def holds_files(folder: Path) -> bool:
    """Whether `folder` holds anything but moot's own marks (``.moot/``)."""
    folder = Path(folder)
    return folder.is_dir() and any(entry.name != ".moot" for entry in folder.iterdir())


def overlap(path: str | Path, other: str | Path) -> str | None:
    """How `path` overlaps `other`: it ``is``, ``holds`` or ``lies inside`` it; else None.

    Both are resolved, so another spelling or a symlink is caught too. None also when `other`
    does not exist (a hub name, a shard not made).

    Example:
        >>> overlap("idx/answers", "idx")  # doctest: +SKIP
        'lies inside'
    """
    if not Path(other).exists():
        return None
    mine, theirs = Path(path).resolve(), Path(other).resolve()
    if mine == theirs:
        return "is"
    if mine in theirs.parents:
        return "holds"
    return "lies inside" if theirs in mine.parents else None


def progress_log(out: Path) -> Path:
    """The progress log a command writes beside its output file `out`: ``.NAME.progress.jsonl``."""
    return Path(out).with_name(f".{Path(out).name}.progress.jsonl")


def check_out_dir(
    out: Path,
    kind: str,
    inputs: Iterable[str | Path],
    manifest: str = "manifest.json",
    is_earlier: Callable[[Any], bool] | None = None,
) -> None:
    """Refuse an `out` that is an input or holds anything but an earlier output of `kind`.

    Commands that replace `out` as a whole (`atomic_replace_dir`) call this first, so a user's
    other files are never swept away.

    Args:
        out: The output folder.
        kind: What the command writes, for the message (``index``, ``mix``).
        inputs: The command's input paths; `out` must not be, hold or sit inside one.
        manifest: The file that marks an earlier output.
        is_earlier: Whether that file's JSON marks one; by default, a ``"kind": kind`` in it.

    Raises:
        ConfigError: `out` is (or contains, or is inside) an input, or holds other files.
    """
    out = Path(out).resolve()
    for source in inputs:
        if overlap(out, source):
            raise ConfigError(f"--out {out} must not be, hold or sit inside an input ({source})")
    if not out.exists() or (out.is_dir() and not holds_files(out)):
        return  # new, empty, or holding only moot's own marks
    try:
        data = json.loads((out / manifest).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        data = None
    marked = is_earlier or (lambda found: isinstance(found, dict) and found.get("kind") == kind)
    if not marked(data):
        raise ConfigError(
            f"--out {out} exists and is not an earlier {kind} output: choose a new or empty folder"
        )


def check_out_file(out: Path) -> None:
    """Refuse an output file that cannot be written.

    Commands call it before any work is paid for (the CLI has checked that no output overlaps
    an input: `moot.cli.runtime.check_paths`).

    Raises:
        ConfigError: `out` is a folder, or the folder it goes in is not a folder or not writable.
    """
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder; give a file name")
    # the nearest existing ancestor ("." or "/" at worst): missing folders are created in it
    folder = next(p for p in (out.parent, *out.parent.parents) if p.exists())
    if not folder.is_dir():
        raise ConfigError(f"--out {out}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: cannot write in {folder}")


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Write records as JSONL atomically."""
    atomic_write(
        path, lambda f: f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    )


def write_json(path: Path, data: Any) -> None:
    """Write pretty JSON atomically."""
    atomic_write(path, lambda f: f.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n"))


def atomic_write(path: Path, write: Callable[[Any], Any], *, binary: bool = False) -> None:
    """Call ``write(file)`` on a temporary sibling of `path`, then rename it into place.

    The file is opened as UTF-8 text, or for bytes when `binary` (charts).

    Raises:
        WriteError: The OS refused (a full disk, ...), named as `path`; `path` is as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        with writing(path, tmp):
            path.parent.mkdir(parents=True, exist_ok=True)
            # "x" respects the umask, unlike mkstemp
            with open(tmp, "xb") if binary else open(tmp, "x", encoding="utf-8") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # e.g. a name too long to exist in the first place
            Path(tmp).unlink()
        raise


def atomic_replace_dir(build: Callable[[Path], Any], target: Path) -> None:
    """Build a directory with ``build(tmp_dir)`` next to `target`, then swap it into place.

    Raises:
        WriteError: The OS refused (a full disk, ...), named as `target`; it is as it was.
    """
    target = Path(target)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    old = target.with_name(f".{target.name}.old")
    try:
        with writing(target, tmp, old):
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.mkdir()
            build(tmp)
            if (target / ".moot").is_dir() and not (tmp / ".moot").exists():
                os.replace(target / ".moot", tmp / ".moot")  # its owner mark and lock stay
            if target.exists():
                shutil.rmtree(old, ignore_errors=True)
                os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


#: Bytes in one file name on every common file system.
NAME_MAX = 255
#: What `atomic_write` and `atomic_replace_dir` add to a name: ``.NAME.<12 hex>.tmp``.
TMP_ROOM = 18


def name_problem(name: str, room: int = TMP_ROOM) -> str | None:
    """Why `name` cannot be one file name moot writes (with `room` bytes to spare), or None.

    Example:
        >>> name_problem("x" * 240)
        'the name xxxxxxxxxxxxxxxxxxxx... is 240 bytes (at most 237)'
    """
    if "\0" in name:
        return "holds a NUL byte"
    if "/" in name:
        return "holds a '/'"
    size, limit = len(name.encode("utf-8", "surrogatepass")), NAME_MAX - room
    if size > limit:
        shown = name if len(name) <= 20 else f"{name[:20]}..."
        return f"the name {shown} is {size} bytes (at most {limit})"
    return None


def safe_name(text: str, suffix: str) -> str:
    """A file name for `text` (any characters) ending in `suffix`, short enough to write.

    `text` is percent-encoded (``a/b`` -> ``a%2Fb``), so distinct texts get distinct names; one
    whose name would be too long is cut and told apart by a hash of the whole text.
    """
    name = quote(text, safe="", errors="surrogatepass") + suffix
    if name_problem(name) is None:
        return name
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[: NAME_MAX - TMP_ROOM - len(suffix) - 17]}-{digest}{suffix}"


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_records(path: str | Path) -> Iterator[tuple[str, Any]]:
    """The records of an input file, each with its place for error messages.

    A JSON list gives ``index N`` places; JSONL gives ``line N`` (blank lines skipped); a JSON file
    (not ``.jsonl``) holding one object is one record at ``index 0``.

    Raises:
        InputError: The file is missing, empty, not UTF-8, not valid JSON / JSONL (a bad line
            named by its number), or a key is repeated in one object (`moot.core.loader`).
    """
    text = read_input_text(path)
    escaped = _SURROGATE_ESCAPE.search(text) is not None  # else no record can hold a surrogate
    head = text.lstrip()[:1]
    if head == "[" or (head == "{" and Path(path).suffix.lower() != ".jsonl"):
        try:
            value = load_json(text)
        except Unreadable as exc:  # a JSON object that does not load may be JSONL's first line
            if head == "[" or isinstance(exc, RepeatedKey):
                raise _refused(path, exc) from None
        else:
            items = value if isinstance(value, list) else [value]
            for i, item in enumerate(items):
                if escaped:
                    refuse_surrogates(path, f"index {i}", item)
                yield f"index {i}", item
            return
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = load_json(line)
        except Unreadable as exc:
            raise _refused(path, exc, f"line {number}") from None
        if escaped:
            refuse_surrogates(path, f"line {number}", record)
        yield f"line {number}", record


#: Where a JSONL line ends: a line feed (after a carriage return or not) or a carriage return.
_LINE_END = re.compile(r"\r\n|[\r\n]")


def jsonl_lines(text: str) -> list[str]:
    """The lines of JSONL `text` (the last one empty if it ends with a line end).

    Split at line feeds and carriage returns alone, which JSON never leaves raw inside a string:
    not at the others `str.splitlines` takes for line ends (U+0085, U+2028, U+2029), which a
    JSON writer leaves as they are (``ensure_ascii=False``): a model reply holding one would cut
    its record in two.
    """
    return _LINE_END.split(text)


def csv_rows(path: str | Path, reader: Any) -> list[Any]:
    """Every row of a `csv` reader over `path`'s text.

    Raises:
        InputError: A row the csv module refuses (a field over its 128 KiB limit, a NUL), named
            by the line it starts on.
    """
    try:
        return list(reader)
    except csv.Error as exc:
        raise InputError(path, f"unreadable CSV: {exc}", f"line {reader.line_num + 1}") from None


def read_json_file(path: str | Path) -> Any:
    """The JSON value of one file moot reads back (a claim, a manifest, an index).

    Raises:
        InputError: The file is missing, empty, not UTF-8, not valid JSON, nested too deeply,
            repeats a key in one object, or holds a lone surrogate.
    """
    text = read_input_text(path)
    try:
        value = load_json(text)
    except Unreadable as exc:
        raise _refused(path, exc) from None
    if _SURROGATE_ESCAPE.search(text):
        refuse_surrogates(path, None, value)
    return value


#: A JSON escape of a UTF-16 surrogate: half of a pair, or a lone one no UTF-8 file can hold.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def refuse_surrogates(path: str | Path, where: str | None, value: Any) -> None:
    r"""Refuse a record holding a lone surrogate (escaped as ``\ud800`` in JSON or YAML).

    Python reads it into a string that cannot be written back as UTF-8, so a run would crash
    on its first write of that record.

    Raises:
        InputError: Naming the file, `where` (the record) and the code point.
    """
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        code = f"\\u{ord(exc.object[exc.start]):04x}"
        raise InputError(
            path, f"a lone surrogate ({code}) in a string: not valid Unicode", where
        ) from None


def refuse_repeated_ids(path: str | Path, ids: Iterable[str], problem: str = "repeated id") -> None:
    """Refuse an input file in which two records share an id.

    Raises:
        InputError: ``<path>, id <id>: <problem>``, for the first id seen twice.
    """
    seen: set[str] = set()
    for key in ids:
        if key in seen:
            raise InputError(path, problem, f"id {key}")
        seen.add(key)


def _refused(path: str | Path, exc: Unreadable, record: str | None = None) -> InputError:
    """JSON that does not load, as one line: ``path, line 3: invalid JSON: ...``."""
    problem = exc.problem if isinstance(exc, RepeatedKey) else f"invalid JSON: {exc.problem}"
    return InputError(path, problem, ", ".join(filter(None, (record, exc.place))) or None)


def read_input_text(path: str | Path) -> str:
    """The text of a UTF-8 input file (a leading BOM dropped).

    Raises:
        InputError: The file is missing, not a regular file, not UTF-8 (the first bad byte
            named), or holds only whitespace.
    """
    planned = planned_text(path)  # `moot run --dry-run`: what an earlier stage would write
    if planned is not None:
        return planned
    if not Path(path).is_file():  # a FIFO or a device too: reading one would wait for ever
        exists = Path(path).exists() and not Path(path).is_dir()
        raise InputError(
            path, "not a regular file (a FIFO or a device)" if exists else "file not found"
        )
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(path, f"not UTF-8 text ({_first_bad_byte(Path(path))})") from None
    if not text.strip():
        raise InputError(path, "file is empty")
    return text


def _first_bad_byte(path: Path) -> str:
    """Where UTF-8 decoding fails, as a hex viewer shows it: ``byte 0xe9 at offset 17``."""
    raw = path.read_bytes()  # the text reader's error counts within one chunk, after any BOM
    start = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        raw[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        start += exc.start
    return f"byte 0x{raw[start]:02x} at offset {start}"
