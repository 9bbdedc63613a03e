"""Merging sharded DEBATunE runs: every shard's files checked, then joined into one dataset.

Each shard is a `moot debate --shard I/N` output folder (`moot.graphs.debatune_run`). Its manifest
and every line of its ``debates.jsonl`` and ``arguments.jsonl`` are checked before anything is
written, so a refused merge leaves the target as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moot.core.data.folders import RunFolder
from moot.core.data.records import ResultLog, holds_files, package_versions
from moot.core.data.topics import STANCES
from moot.core.errors import ConfigError, InputError, json_type
from moot.core.llm.ledger import UsageLedger
from moot.graphs.debatune_run import CLAIM, PACKAGES, Shard, read_json_object
from moot.training.debatune_data import write_sft_dataset


def shard_folders(dirs: list[str] | list[Path]) -> list[Path]:
    """The shard folders `dirs` name: each one that holds a manifest, the shards in each other.

    A folder without a ``manifest.json`` (``runs/``) stands for the `moot debate` shard folders
    directly in it, found by their manifests (a merged output in it is no shard), in shard order;
    they must be shards of one run: one configuration, one N, each shard once.

    Raises:
        InputError: A folder holds no shard folder, or a shard's manifest is malformed.
        ConfigError: A folder holds shards of two runs, or one shard twice.
    """
    found: list[Path] = []
    for given in map(Path, dirs):
        if (given / "manifest.json").exists() or not given.is_dir():
            found.append(given)  # `merge_runs` checks it, as a shard folder
        else:
            found.extend(_run_shards(given))
    return found


def _run_shards(folder: Path) -> list[Path]:
    """The shard folders directly in `folder`, of one run, in shard order (`shard_folders`)."""
    shards: dict[Path, tuple[Shard, dict[str, Any]]] = {}
    for child in sorted(p for p in folder.iterdir() if (p / "manifest.json").is_file()):
        manifest = read_json_object(child / "manifest.json", "move it aside")
        merged = "merged_from" in manifest or manifest.get("shard") == "partial"
        if manifest.get("kind") == "debatune" and not merged:
            manifest = _shard_manifest(child / "manifest.json")  # checked in full
            shards[child] = Shard.parse(manifest["shard"]), manifest["identity"]
    if not shards:
        problem = "no manifest.json in it or in its folders: no `moot debate` output folder"
        raise InputError(folder, problem)
    first, (shard, identity) = next(iter(shards.items()))
    seen: dict[int, Path] = {}
    for child, (other, other_identity) in shards.items():
        if other_identity != identity or other.count != shard.count:
            raise ConfigError(
                f"{folder} holds shards of two different runs: {first} ({shard}) and "
                f"{child} ({other}), whose configurations or N differ; merge each run's "
                "folders by name"
            )
        if other.index in seen:
            raise ConfigError(
                f"{folder} holds shard {other} twice: {seen[other.index]} and {child}"
            )
        seen[other.index] = child
    return [seen[index] for index in sorted(seen)]


def merge_runs(dirs: list[Path], out: Path, *, allow_partial: bool = False) -> dict[str, int]:
    """Join the output folders of sharded runs into one dataset in `out`.

    Every shard's manifest and every line of its ``debates.jsonl`` and ``arguments.jsonl`` are
    checked before anything is written, so a refused merge leaves `out` as it was.

    Returns:
        Counts: ``debates``, ``debates_ok``, ``failures``, ``dataset_records``.

    Raises:
        InputError: A folder is not a moot debate output, or a manifest or record in it is
            malformed.
        ConfigError: The folders' configurations differ, shards are missing (unless
            `allow_partial`), or `out` is an input or holds something else.
    """
    manifests = [_shard_manifest(Path(folder) / "manifest.json") for folder in dirs]
    identity = manifests[0]["identity"]
    for folder, manifest in zip(dirs, manifests, strict=True):
        if manifest["identity"] != identity:
            raise ConfigError(
                f"{folder} was generated with a different configuration from {dirs[0]}"
            )
    _check_merge_target(Path(out), dirs, identity)
    shards = {Shard.parse(m["shard"]) for m in manifests if m["shard"] != "partial"}
    if len({s.count for s in shards}) > 1:
        raise ConfigError("the folders come from different --shard splits (different N)")
    total = next(iter(shards)).count if shards else 1
    missing = sorted(set(range(total)) - {s.index for s in shards})
    if missing and not allow_partial:
        names = ", ".join(f"{i}/{total}" for i in missing)
        raise ConfigError(f"missing shards {names}; merge them too, or pass --allow-partial")

    debates: dict[str, dict[str, Any]] = {}
    arguments: dict[str, dict[str, Any]] = {}
    for folder in dirs:
        for store, name in ((debates, "debates.jsonl"), (arguments, "arguments.jsonl")):
            for record in _read_shard_log(Path(folder) / name).values():
                if store.get(record["id"], {}).get("status") != "ok":  # ok wins over failed
                    store[record["id"]] = record
    out = Path(out)
    ResultLog(out / "debates.jsonl").compact(debates.values())
    ResultLog(out / "arguments.jsonl").compact(arguments.values())
    records = write_sft_dataset(debates.values(), out, identity["seed"])
    ledger = UsageLedger.merged(m["ledger_total"] for m in manifests)
    failures = [
        {"id": r["id"], "kind": kind, "error": r["error"]}
        for kind, store in (("arguments", arguments), ("debate", debates))
        for r in store.values()
        if r["status"] != "ok"
    ]
    counts = {
        "debates": len(debates),
        "debates_ok": sum(1 for d in debates.values() if d["status"] == "ok"),
        "failures": len(failures),
        "dataset_records": records,
    }
    RunFolder(out).write_manifest(
        {
            **{k: manifests[0][k] for k in ("kind", "identity", "roles", "topics_source")},
            "shard": "partial" if missing else "0/1",
            "merged_from": [str(d) for d in dirs],
            "counts": counts,
            "failures": failures,
            "ledger": ledger.to_json(),
            "ledger_total": ledger.to_json(),
            "runs": [run for m in manifests for run in m["runs"]],
            "versions": package_versions(*PACKAGES),
            "outputs": manifests[0]["outputs"],
        },
    )
    return counts


_NULL = type(None)
_TYPE_NAMES = {  # what a field must be
    str: "text",
    int: "an integer",
    list: "a list",
    dict: "an object",
    _NULL: "null",
}
# the fields merge reads or copies, as `moot debate` writes them (docs/schemas.md)
_MANIFEST_FIELDS: dict[str, tuple[type, ...]] = {
    "identity": (dict,),
    "roles": (list,),
    "shard": (str,),
    "topics_source": (str,),
    "ledger_total": (dict,),
    "runs": (list,),
    "outputs": (dict,),
}
_LOG_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "debates.jsonl": {
        "id": (str,),
        "topic": (str,),
        "stance": (str,),
        "argument": (str,),
        "status": (str,),
        "error": (str, _NULL),
        "transcript": (list,),
        "conclusion": (str, _NULL),
        "models": (dict,),
        "rounds": (int,),
        "shard": (str,),
    },
    "arguments.jsonl": {
        "id": (str,),
        "topic": (str,),
        "stance": (str,),
        "arguments": (list,),
        "status": (str,),
        "error": (str, _NULL),
        "attempt": (int,),
    },
}


_OPTIONAL_FIELDS = {"attempt"}  # shards written before argument lists were retried lack it


def _field_problem(record: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> str | None:
    """What is wrong with `record`'s `fields` (missing, or of the wrong JSON type), if anything."""
    for name, types in fields.items():
        if name not in record:
            if name in _OPTIONAL_FIELDS:
                continue
            return f"missing {name!r}"
        kind = type(record[name])  # type(), not isinstance(): true is not an integer here
        if kind not in types:
            wanted = " or ".join(_TYPE_NAMES[t] for t in types)
            return f"{name!r} must be {wanted}, got {json_type(record[name])}"
    return None


def _shard_manifest(path: Path) -> dict[str, Any]:
    """A shard's manifest, checked; its ``ledger_total`` parsed into a `UsageLedger`.

    Raises:
        InputError: The manifest is missing, unreadable, or malformed.
    """
    if not path.exists():
        raise InputError(path, "not found: not a `moot debate` output folder")
    remedy = "move it aside and rerun this shard's `moot debate` command to rebuild it"
    manifest = read_json_object(path, remedy)
    if manifest.get("kind") != "debatune":
        raise InputError(path, "not a `moot debate` manifest")
    problem = _field_problem(manifest, _MANIFEST_FIELDS)
    if problem:
        raise InputError(path, problem)
    if type(manifest["identity"].get("seed")) is not int:
        raise InputError(path, "'identity' has no integer 'seed'")
    if manifest["shard"] != "partial":
        try:
            Shard.parse(manifest["shard"])
        except ConfigError:
            problem = f"'shard' must be 'I/N' or 'partial', got {manifest['shard']!r}"
            raise InputError(path, problem) from None
    try:
        ledger = UsageLedger.from_json(manifest["ledger_total"])
        ledger.to_json()  # sums the counters: a wrong-typed one fails here, not mid-merge
    except (AttributeError, KeyError, TypeError, ValueError):
        raise InputError(path, "'ledger_total' is not a usage ledger") from None
    return {**manifest, "ledger_total": ledger}


def _read_shard_log(path: Path) -> dict[str, dict[str, Any]]:
    """A shard's ``debates.jsonl`` or ``arguments.jsonl``, every line checked; last per id wins.

    A last line without its newline that is not JSON is the one mark a crash mid-append can
    leave: its item is unfinished (``moot debate`` redoes it), so it is skipped. Any other bad
    line is an error: a finished run's log is compacted, so it holds no torn lines.

    Raises:
        InputError: The file is missing, or a line is not a well-formed record.
    """
    if not path.is_file():
        raise InputError(path, "not found; rerun this shard's `moot debate` command")
    fields = _LOG_FIELDS[path.name]
    lines = path.read_bytes().split(b"\n")
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {number}"
        try:
            record = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is one
            if number == len(lines):
                continue  # torn by a crash mid-append (no newline after it)
            problem = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else f"invalid JSON: {exc}"
            raise InputError(
                path, f"{problem}; rerun this shard's `moot debate` command to redo it", where
            ) from None
        if not isinstance(record, dict):
            raise InputError(path, f"expected an object, got {json_type(record)}", where)
        problem = _field_problem(record, fields)
        if problem is None:
            problem = _record_problem(record)
        if problem:
            raise InputError(path, problem, where)
        records[record["id"]] = record
    return records


def _record_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with the values of a debate or argument-list record, if anything."""
    if record["status"] not in ("ok", "failed"):
        return f'\'status\' must be "ok" or "failed", got {record["status"]!r}'
    if record["stance"] not in STANCES:
        return f"'stance' must be {' or '.join(map(repr, STANCES))}, got {record['stance']!r}"
    if "transcript" in record:
        if not all(isinstance(turn, dict) for turn in record["transcript"]):
            return "'transcript' must be a list of turn objects"
        if record["status"] == "ok" and record["conclusion"] is None:
            return "an ok debate needs a 'conclusion'"
    elif not all(isinstance(a, str) for a in record["arguments"]):
        return "'arguments' must be a list of texts"
    return None


def _check_merge_target(out: Path, dirs: list[Path], identity: dict[str, Any]) -> None:
    if any(out.resolve() == Path(d).resolve() for d in dirs):
        raise ConfigError(f"--out {out} is one of the folders being merged; choose a new folder")
    folder = RunFolder(out)
    if folder.claim_path(CLAIM).exists():
        raise ConfigError(f"{out} is a `moot debate` run folder; merge into a new folder")
    if folder.manifest_path.exists():
        manifest = read_json_object(folder.manifest_path, "move it aside or use a new --out")
        if manifest.get("identity") != identity:
            raise ConfigError(f"{out} holds a run with a different configuration")
    elif holds_files(out):
        raise ConfigError(f"{out} exists and is not a moot output folder; choose a new folder")
