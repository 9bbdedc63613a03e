"""A DEBATunE data-generation run: topics → arguments → debates → SFT dataset.

The run is resumable and shardable. Every finished debate (ok or failed) is appended to
``debates.jsonl`` under a stable id derived from topic, stance, argument and configuration; a rerun
skips the finished ones, retries the failed ones, resumes interrupted ones from their LangGraph
checkpoint, and pays for no model call twice (the request cache). Derived outputs
(``dataset.jsonl``, ``dataset/``, ``manifest.json``) are rebuilt atomically at the end of every run.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.agents.debatune_debaters import propose_arguments
from moot.core.data.records import ResultLog, stable_id, write_json
from moot.core.data.topics import STANCES, Topic
from moot.core.errors import ConfigError, InputError, ModelCallError, json_type
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.graphs.debatune_debate import (
    DebateContext,
    build_debate_graph,
    call_seed,
    recursion_limit,
)
from moot.prompts import template_digest
from moot.training.debatune_data import write_sft_dataset

PROMPTS = (
    "debatune/debater_system.j2",
    "debatune/arguments.j2",
    "debatune/turn.j2",
    "debatune/conclusion_system.j2",
    "debatune/conclusion.j2",
)


@dataclass(frozen=True)
class DebateRunConfig:
    """What a DEBATunE run generates. Changing any field changes the debates' ids.

    Args:
        debater_a: Holds the stance, proposes arguments, and concludes.
        debater_b: Takes the opposite stance.
        rounds: Debate rounds (the paper uses 2).
        arguments_per_stance: Arguments debated per topic and stance (given or generated).
        seed: Base seed for sampling and for the choice of instruction paraphrase.
        turn_tokens: Completion budget per debate turn.
        conclusion_tokens: Completion budget for the conclusion.
    """

    debater_a: Role
    debater_b: Role
    rounds: int = 2
    arguments_per_stance: int = 3
    seed: int = 0
    turn_tokens: int = 800
    conclusion_tokens: int = 2048

    def identity(self) -> dict[str, Any]:
        """What makes two runs' debates the same debates (endpoints excluded)."""
        return {
            "debater_a": {
                "model": self.debater_a.spec.name,
                "temperature": self.debater_a.temperature,
            },
            "debater_b": {
                "model": self.debater_b.spec.name,
                "temperature": self.debater_b.temperature,
            },
            "rounds": self.rounds,
            "arguments_per_stance": self.arguments_per_stance,
            "seed": self.seed,
            "turn_tokens": self.turn_tokens,
            "conclusion_tokens": self.conclusion_tokens,
            "prompts": _prompts_digest(),
        }


@functools.cache
def _prompts_digest() -> str:
    return template_digest(*PROMPTS)


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0-based): topics whose position modulo `count` is `index`."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Parse ``I/N``.

        Raises:
            ConfigError: Not of the form I/N with 0 <= I < N.
        """
        index, _, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            raise ConfigError(f"invalid --shard {text!r}: expected I/N, e.g. 0/4") from None
        if shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ConfigError(f"invalid --shard {text!r}: need 0 <= I < N")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def select(self, topics: list[Topic]) -> list[Topic]:
        """This shard's topics."""
        return [t for i, t in enumerate(topics) if i % self.count == self.index]


@dataclass
class RunSummary:
    """What a run did."""

    out_dir: Path
    planned: int = 0
    already_done: int = 0
    completed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    dataset_records: int = 0
    ledger: UsageLedger = field(default_factory=UsageLedger)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.failures


async def run_debatune(
    topics: list[Topic],
    out_dir: Path,
    config: DebateRunConfig,
    client: ModelClient,
    *,
    concurrency: int = 8,
    shard: Shard | None = None,
    source: str = "",
    on_progress: Callable[[int, int], None] | None = None,
) -> RunSummary:
    """Generate (or resume) a DEBATunE dataset in `out_dir`.

    Args:
        topics: All topics; this shard's share is debated.
        out_dir: Output folder (created); see docs/schemas.md for its files.
        config: What to generate.
        client: The model layer (its ledger is reported in the manifest).
        concurrency: Debates in flight at once.
        shard: Which share of the topics to debate.
        source: Where the topics came from, for the manifest.
        on_progress: Called as ``(done, total)`` after each debate.

    Raises:
        ConfigError: `out_dir` holds a run with another configuration or shard.
    """
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    shard = shard or Shard()
    out_dir = Path(out_dir)
    started = time.time()
    previous = check_run_folder(out_dir, config, shard)
    # the claim comes before any work, so even a run interrupted before its first manifest
    # keeps a rerun with other options from mixing two datasets in one folder
    write_json(out_dir / ".moot" / "run.json", {"identity": config.identity(), "shard": str(shard)})
    summary = RunSummary(out_dir=out_dir, ledger=client.ledger)
    state_dir = out_dir / ".moot"
    mine = shard.select(topics)

    argument_log = ResultLog(out_dir / "arguments.jsonl")
    plan = await _plan_debates(mine, config, client, argument_log, summary, concurrency)
    debate_log = ResultLog(out_dir / "debates.jsonl")
    finished = debate_log.load()
    pending = [job for job in plan if finished.get(job["id"], {}).get("status") != "ok"]
    summary.planned = len(plan)
    summary.already_done = len(plan) - len(pending)

    async with AsyncSqliteSaver.from_conn_string(str(state_dir / "checkpoints.sqlite")) as saver:
        await saver.conn.execute("PRAGMA journal_mode=WAL")
        await saver.conn.execute("PRAGMA synchronous=NORMAL")  # 5 ms → 0.4 ms per step
        graph = build_debate_graph(saver)
        # With the request cache on, finished turns survive a crash in the cache, so checkpoint
        # only when a debate stops (done or failed): per-turn checkpoints cost ~1.5 ms of CPU per
        # call. Without the cache, checkpoint every turn so a resume re-pays nothing.
        durability = "exit" if client.cache is not None else "async"
        context = DebateContext(
            client=client,
            debater_a=config.debater_a,
            debater_b=config.debater_b,
            rounds=config.rounds,
            seed=config.seed,
            turn_tokens=config.turn_tokens,
            conclusion_tokens=config.conclusion_tokens,
        )
        limit = asyncio.Semaphore(max(1, concurrency))
        done = 0

        async def run_one(job: dict[str, Any]) -> None:
            nonlocal done
            async with limit:
                record = await _debate(graph, context, job, shard, durability)
            await asyncio.to_thread(debate_log.append, record)  # keep fsync off the loop
            if record["status"] == "ok":
                summary.completed += 1
            else:
                failure = {"id": record["id"], "kind": "debate", "error": record["error"]}
                summary.failures.append(failure)
            done += 1
            if on_progress:
                on_progress(done, len(pending))

        await asyncio.gather(*(run_one(job) for job in pending))

    records = debate_log.load()
    debate_log.compact(records.values())
    argument_log.compact(argument_log.load().values())
    summary.dataset_records = write_sft_dataset(records.values(), out_dir, config.seed)
    summary.seconds = time.time() - started
    _write_manifest(out_dir, config, shard, source, summary, previous, started)
    return summary


async def _plan_debates(
    topics: list[Topic],
    config: DebateRunConfig,
    client: ModelClient,
    log: ResultLog,
    summary: RunSummary,
    concurrency: int,
) -> list[dict[str, Any]]:
    """One job per (topic, stance, argument); generated argument lists are persisted."""
    known = log.load()
    limit = asyncio.Semaphore(max(1, concurrency))
    k = config.arguments_per_stance

    async def arguments_for(topic: Topic, stance: str) -> list[str]:
        if topic.arguments:
            return list(topic.arguments[stance][:k])
        key = stable_id("arguments", topic.topic, stance, config.identity())
        previous = known.get(key, {})
        if previous.get("status") == "ok":
            return previous["arguments"]
        # a reply that held no list is cached: a retry must ask anew, with the next seed
        attempt = previous.get("attempt", -1) + 1
        seed = call_seed(config.seed, key, attempt)
        try:
            async with limit:
                arguments = await propose_arguments(
                    client, config.debater_a, topic.topic, stance, k, seed=seed
                )
            error = None if arguments else "no arguments could be parsed from the reply"
        except ModelCallError as exc:
            arguments, error = [], str(exc)
        record = {
            "id": key,
            "topic": topic.topic,
            "stance": stance,
            "arguments": arguments,
            "status": "failed" if error else "ok",
            "error": error and f"arguments for {stance} on {topic.topic!r}: {error}",
            "attempt": attempt,
        }
        log.append(record)
        if error:
            summary.failures.append({"id": key, "kind": "arguments", "error": record["error"]})
        return arguments

    pairs = [(topic, stance) for topic in topics for stance in STANCES]
    lists = await asyncio.gather(*(arguments_for(t, s) for t, s in pairs))
    jobs = []
    for (topic, stance), arguments in zip(pairs, lists, strict=True):
        for argument in arguments:
            debate_id = stable_id("debate", topic.topic, stance, argument, config.identity())
            jobs.append(
                {"id": debate_id, "topic": topic.topic, "stance": stance, "argument": argument}
            )
    return jobs


async def _debate(
    graph: Any, context: DebateContext, job: dict[str, Any], shard: Shard, durability: str
) -> dict:
    """Run (or resume) one debate and return its result record."""
    run_config = {
        "configurable": {"thread_id": job["id"]},
        "recursion_limit": recursion_limit(context.rounds),
    }
    record = {
        **job,
        "status": "ok",
        "error": None,
        "transcript": [],
        "conclusion": None,
        "models": {
            "debater_a": context.debater_a.spec.name,
            "debater_b": context.debater_b.spec.name,
        },
        "rounds": context.rounds,
        "shard": str(shard),
    }
    try:
        saved = await graph.aget_state(run_config)
        if saved.values.get("conclusion"):  # finished before a crash lost its record
            final = saved.values
        else:
            if saved.values and not saved.next:  # a checkpoint a kill left with nothing to resume
                await graph.checkpointer.adelete_thread(job["id"])
            start = None if saved.next else {**job, "turns": []}
            final = await graph.ainvoke(start, run_config, context=context, durability=durability)
    except ModelCallError as exc:
        saved = await graph.aget_state(run_config)
        record.update(status="failed", error=str(exc), transcript=saved.values.get("turns", []))
        return record
    record.update(transcript=final["turns"], conclusion=final["conclusion"])
    return record


def check_run_folder(out_dir: Path, config: DebateRunConfig, shard: Shard) -> dict[str, Any]:
    """Check that `out_dir` is new or holds a run of this configuration and shard.

    It writes nothing, so the CLI can check before it prints anything; `run_debatune` checks
    again before it claims the folder (``.moot/run.json``).

    Returns:
        The previous manifest, or an empty dict.

    Raises:
        ConfigError: `out_dir` is not a folder, or holds another configuration or shard.
        InputError: Its claim or manifest cannot be read.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file, not a folder")
    identity = config.identity()
    previous: dict[str, Any] = {}
    for path in (out_dir / ".moot" / "run.json", out_dir / "manifest.json"):
        if not path.exists():
            continue
        data = _read_json(path, "move it aside or use a new --out")
        if data.get("identity") != identity:
            raise ConfigError(
                f"{out_dir} holds a run with a different configuration; use a new --out "
                "(or the same options as before)"
            )
        if data.get("shard") != str(shard):
            raise ConfigError(f"{out_dir} holds shard {data.get('shard')}, not {shard}")
        if path.name == "manifest.json":
            previous = data
    return previous


def _read_json(path: Path, remedy: str) -> dict[str, Any]:
    """The JSON object in `path`; `remedy` tells the user what to do if it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, f"unreadable ({exc}); {remedy}") from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def _write_manifest(
    out_dir: Path,
    config: DebateRunConfig,
    shard: Shard,
    source: str,
    summary: RunSummary,
    previous: dict[str, Any],
    started: float,
) -> None:
    ledger = summary.ledger
    before = (
        UsageLedger.from_json(previous["ledger_total"]) if previous.get("ledger_total") else None
    )
    total = UsageLedger.merged([ledger, before]) if before else ledger
    write_json(
        out_dir / "manifest.json",
        {
            "kind": "debatune",
            "identity": config.identity(),
            "roles": [config.debater_a.describe(), config.debater_b.describe()],
            "shard": str(shard),
            "topics_source": source,
            "counts": {
                "debates": summary.planned,
                "debates_ok": summary.planned
                - sum(1 for f in summary.failures if f["kind"] == "debate"),
                "failures": len(summary.failures),
                "dataset_records": summary.dataset_records,
            },
            "failures": summary.failures,
            "ledger": ledger.to_json(),
            "ledger_total": total.to_json(),
            "runs": [
                *previous.get("runs", []),
                {"started": started, "seconds": round(summary.seconds, 3)},
            ],
            "versions": versions(),
            "outputs": {
                "debates": "debates.jsonl",
                "arguments": "arguments.jsonl",
                "dataset_jsonl": "dataset.jsonl",
                "dataset": "dataset/",
            },
        },
    )


def versions() -> dict[str, str]:
    """Versions of moot, Python and the libraries a run depends on."""
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for package in (
        "moot",
        "langgraph",
        "langchain-openai",
        "openai",
        "litellm",
        "datasets",
        "xllamacpp",
    ):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


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
    write_json(
        out / "manifest.json",
        {
            **{k: manifests[0][k] for k in ("kind", "identity", "roles", "topics_source")},
            "shard": "partial" if missing else "0/1",
            "merged_from": [str(d) for d in dirs],
            "counts": counts,
            "failures": failures,
            "ledger": ledger.to_json(),
            "ledger_total": ledger.to_json(),
            "runs": [run for m in manifests for run in m["runs"]],
            "versions": versions(),
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
    manifest = _read_json(path, remedy)
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
        except ValueError as exc:  # UnicodeDecodeError is one
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
    if (out / ".moot" / "run.json").exists():
        raise ConfigError(f"{out} is a `moot debate` run folder; merge into a new folder")
    if (out / "manifest.json").exists():
        manifest = _read_json(out / "manifest.json", "move it aside or use a new --out")
        if manifest.get("identity") != identity:
            raise ConfigError(f"{out} holds a run with a different configuration")
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not a moot output folder; choose a new folder")
