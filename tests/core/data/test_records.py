"""Durable result files: the JSONL result log, atomic writes and stable ids."""

from __future__ import annotations

import codecs
import errno
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from moot.core.data.records import (
    ResultLog,
    atomic_replace_dir,
    atomic_write,
    read_input_text,
    refuse_repeated_ids,
    stable_id,
    write_json,
    write_jsonl,
)
from moot.core.errors import InputError, WriteError, writing


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_append_and_load(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "out" / "results.jsonl")
    assert log.load() == {}
    log.append({"id": "a", "value": 1})
    log.append({"id": "b", "value": "ünïcode"})

    assert log.load() == {"a": {"id": "a", "value": 1}, "b": {"id": "b", "value": "ünïcode"}}
    assert [json.loads(line)["id"] for line in lines(log.path)] == ["a", "b"]


def test_last_record_per_id_wins_in_first_seen_order(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "results.jsonl")
    log.append({"id": "a", "status": "failed"})
    log.append({"id": "b", "status": "ok"})
    log.append({"id": "a", "status": "ok"})

    records = log.load()
    assert list(records) == ["a", "b"]
    assert records["a"]["status"] == "ok"


def test_records_without_id_or_not_objects_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a"}\n[1, 2]\n{"no_id": true}\n\n"text"\n', encoding="utf-8")
    assert ResultLog(path).load() == {"a": {"id": "a"}}


def test_torn_final_line_is_skipped_and_sealed(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    whole = json.dumps({"id": "a", "v": 1})
    path.write_text(whole + "\n" + '{"id": "b", "v', encoding="utf-8")  # crash mid-line
    log = ResultLog(path)

    assert log.load() == {"a": {"id": "a", "v": 1}}

    log.append({"id": "c", "v": 3})
    assert log.load() == {"a": {"id": "a", "v": 1}, "c": {"id": "c", "v": 3}}
    written = lines(path)
    assert written[0] == whole
    assert written[1] == '{"id": "b", "v'  # the torn line stays on its own line
    assert json.loads(written[2]) == {"id": "c", "v": 3}
    assert path.read_text(encoding="utf-8").endswith("\n")


def test_a_line_torn_inside_a_character_is_skipped_and_sealed(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    torn = '{"id": "b", "text": "pro –'.encode()[:-1]  # cut inside the dash's 3 bytes
    path.write_bytes(b'{"id": "a"}\n' + torn)
    log = ResultLog(path)

    assert log.load() == {"a": {"id": "a"}}
    log.append({"id": "b", "text": "pro – con"})
    assert log.load() == {"a": {"id": "a"}, "b": {"id": "b", "text": "pro – con"}}


def test_compact_rewrites_one_line_per_id(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "results.jsonl")
    for value in range(3):
        log.append({"id": "a", "v": value})
        log.append({"id": "b", "v": value})
    with log.path.open("a", encoding="utf-8") as f:
        f.write('{"id": "torn')

    log.compact(log.load().values())

    written = [json.loads(line) for line in lines(log.path)]
    assert written == [{"id": "a", "v": 2}, {"id": "b", "v": 2}]
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]


def test_compact_current_first_keeps_earlier_runs_records_after_this_runs(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "results.jsonl")
    for key in ("earlier", "b", "a", "b"):
        log.append({"id": key})

    current = log.compact_current_first(["a", "b", "never-run"])

    assert current == [{"id": "a"}, {"id": "b"}]
    assert [json.loads(line)["id"] for line in lines(log.path)] == ["a", "b", "earlier"]


def test_a_log_already_compacted_in_that_order_is_not_rewritten(tmp_path: Path) -> None:
    log = ResultLog(tmp_path / "results.jsonl")
    for key in ("a", "b"):
        log.append({"id": key, "text": "ü"})
    before = log.path.stat()

    assert log.compact_current_first(["a", "b"]) == [
        {"id": "a", "text": "ü"},
        {"id": "b", "text": "ü"},
    ]
    log.compact_lines(["a"])  # a rerun that found both done
    after = log.path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)

    log.compact_lines(["b"])  # another order: rewritten
    assert [json.loads(line)["id"] for line in lines(log.path)] == ["b", "a"]
    assert log.path.stat().st_ino != before.st_ino


def test_compaction_copies_each_ids_last_line_and_drops_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"id": "a", "v": 1}\n\n[1]\n{"id": "b", "v": 1}\n{"id": "a", "v": 2}\n{"id": "c", "v',
        encoding="utf-8",
    )
    log = ResultLog(path)
    assert [r["v"] for r in log.records()] == [1, 1, 2]  # every readable record, in file order
    assert log.ids_where(lambda r: r["v"] == 2) == {"a"}  # judged by each id's last record

    log.compact_lines(["b"])
    assert lines(path) == ['{"id": "b", "v": 1}', '{"id": "a", "v": 2}']
    log.compact_lines(["a"], keep_others=False)
    assert lines(path) == ['{"id": "a", "v": 2}']


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "summary.json"
    write_json(target, {"a": 1, "b": ["ü"]})
    write_jsonl(tmp_path / "sub" / "rows.jsonl", [{"id": 1}, {"id": 2}])

    assert json.loads(target.read_text(encoding="utf-8")) == {"a": 1, "b": ["ü"]}
    assert lines(tmp_path / "sub" / "rows.jsonl") == ['{"id": 1}', '{"id": 2}']
    assert sorted(p.name for p in target.parent.iterdir()) == ["rows.jsonl", "summary.json"]


def test_atomic_write_keeps_target_when_writer_raises(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old contents\n", encoding="utf-8")

    def broken(f: Any) -> None:
        f.write("half of the new")
        raise RuntimeError("writer crashed")

    with pytest.raises(RuntimeError, match="writer crashed"):
        atomic_write(target, broken)

    assert target.read_text(encoding="utf-8") == "old contents\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_a_write_that_cannot_land_names_the_target_not_the_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    with pytest.raises(WriteError) as caught:
        write_json(tmp_path / "adir", {})  # a folder where the file should go
    assert str(caught.value) == f"cannot write {tmp_path / 'adir'}: Is a directory"
    too_long = tmp_path / ("x" * 300 + ".json")
    with pytest.raises(WriteError) as caught:
        write_json(too_long, {})
    assert str(caught.value) == f"cannot write {too_long}: File name too long"
    assert [p.name for p in tmp_path.iterdir()] == ["adir"]


def test_atomic_write_keeps_target_when_records_raise(tmp_path: Path) -> None:
    target = tmp_path / "rows.jsonl"
    write_jsonl(target, [{"id": 1}])

    def records() -> Any:
        yield {"id": 2}
        raise ValueError("generator failed")

    with pytest.raises(ValueError):
        write_jsonl(target, records())
    assert lines(target) == ['{"id": 1}']
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]


def test_atomic_replace_dir(tmp_path: Path) -> None:
    target = tmp_path / "export"

    def build(version: str) -> Any:
        def write(folder: Path) -> None:
            (folder / "data.txt").write_text(version, encoding="utf-8")

        return write

    atomic_replace_dir(build("one"), target)
    atomic_replace_dir(build("two"), target)
    assert (target / "data.txt").read_text(encoding="utf-8") == "two"

    def broken(exc: OSError) -> Any:
        def write(folder: Path) -> None:
            (folder / "data.txt").write_text("three", encoding="utf-8")
            raise exc

        return write

    full = OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(WriteError, match=f"cannot write {target}: No space left on device"):
        atomic_replace_dir(broken(full), target)
    # a failure of the work that builds it (a model that cannot load) is not a failure to write
    with pytest.raises(OSError, match="Can't load tokenizer") as raised:
        atomic_replace_dir(broken(OSError("Can't load tokenizer")), target)
    assert not isinstance(raised.value, WriteError)
    assert (target / "data.txt").read_text(encoding="utf-8") == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["export"]


def test_stable_id() -> None:
    first = stable_id("topic", "Affirmative", 3)
    assert first == stable_id("topic", "Affirmative", 3)
    assert len(first) == 16 and all(c in "0123456789abcdef" for c in first)
    assert stable_id("a", "b") != stable_id("b", "a")
    assert stable_id("ab") != stable_id("a", "b")
    assert stable_id("topic", "Affirmative", 3) != stable_id("topic", "Affirmative", "3")
    assert stable_id({"x": 1, "y": 2}) == stable_id({"y": 2, "x": 1})
    assert len(stable_id("x", length=8)) == 8
    assert stable_id("x", length=8) == stable_id("x")[:8]
    # Pinned: ids name records across versions and reruns, so the digest must never change.
    assert stable_id("a", 1) == hashlib.sha256(b'["a",1]').hexdigest()[:16]


@pytest.mark.parametrize(
    ("prefix", "offset"),
    [(b"", 5), (codecs.BOM_UTF8, 8), (b" " * 20_000, 20_005)],  # past the text reader's chunk
    ids=["plain", "after a BOM", "far in"],
)
def test_non_utf8_input_names_its_first_bad_byte(
    tmp_path: Path, prefix: bytes, offset: int
) -> None:
    path = tmp_path / "topics.json"
    path.write_bytes(prefix + b'["caf\xe9 culture"]')
    with pytest.raises(InputError) as error:
        read_input_text(path)
    assert str(error.value) == f"{path}: not UTF-8 text (byte 0xe9 at offset {offset})"


def test_refuse_repeated_ids_names_the_first_repeat() -> None:
    refuse_repeated_ids("docs.jsonl", ["a", "b", "c"])
    with pytest.raises(InputError) as error:
        refuse_repeated_ids("docs.jsonl", ["a", "b", "c", "b", "a"], "repeated document id")
    assert str(error.value) == "docs.jsonl, id b: repeated document id"


def test_only_the_machine_refusing_the_written_file_is_a_write_error(tmp_path: Path) -> None:
    log = tmp_path / "run" / "log.jsonl"
    disk_full = f"cannot write {log}: No space left on device"
    with pytest.raises(WriteError, match=disk_full), writing(log):
        raise OSError(errno.ENOSPC, "No space left on device")  # write() names no file
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL  # as SQLite sets it
    with pytest.raises(WriteError, match="database or disk is full"), writing(tmp_path / "c.db"):
        raise full
    other = OSError(errno.EACCES, "Permission denied", str(tmp_path / "input.jsonl"))
    with pytest.raises(sqlite3.OperationalError) as unknown:
        sqlite3.connect(":memory:").execute("SELECT * FROM missing")
    for passing in (other, unknown.value, ValueError("bug")):
        with pytest.raises(type(passing)), writing(log):
            raise passing  # reading an input, SQLite's other errors, a bug: unchanged
