"""A DEBATunE data-generation run: topics → arguments → debates → SFT dataset.

The run is resumable and shardable. Argument lists and debates go through the run engine
(`moot.core.runs.run_items`): every finished one (ok or failed) is appended to ``arguments.jsonl``
or ``debates.jsonl`` under a stable id derived from topic, stance, argument and configuration; a
rerun skips the finished ones, retries the failed ones, resumes interrupted debates from their
LangGraph checkpoint, and pays for no model call twice (the request cache). Derived outputs
(``dataset.jsonl``, ``dataset/``, ``manifest.json``) are rebuilt atomically at the end of every run.
Merging sharded runs is `moot.graphs.debatune_merge`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moot.agents.debatune_debaters import (
    propose_arguments,
)
from moot.core.data.folders import RunFolder
from moot.core.data.records import (
    ResultLog,
    package_versions,
    read_json_file,
    stable_id,
)
from moot.core.data.topics import STANCES, Topic
from moot.core.errors import ConfigError, InputError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.llm.ledger import UsageLedger
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import STOPPED, Progress, Tally, call_seed, run_items
from moot.core.scheduler import scheduler_shard
from moot.prompts import overridden, template_digest
from moot.training.debatune_data import INSTRUCTIONS_FILE, write_sft_dataset

if TYPE_CHECKING:  # LangGraph is imported only when a debate runs (`_Debates`)
    from moot.graphs.protocol_debate import ProtocolContext

PROMPTS = (
    "debatune/debater_system.j2",
    "debatune/arguments.j2",
    "debatune/turn.j2",
    "debatune/conclusion_system.j2",
    "debatune/conclusion.j2",
)
# what the manifest's "versions" lists besides Python
PACKAGES = ("moot", "langgraph", "openai", "litellm", "datasets", "xllamacpp")

#: The run's claim (``.moot/run.json``: the configuration's identity and the shard), written
#: before any work, so even a run interrupted before its first manifest keeps a rerun with other
#: options from mixing two datasets in one folder.
CLAIM = "run"
HOLDS = "a run with a different configuration"


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
            "prompts": template_digest(*PROMPTS),
        }


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0-based): topics whose position modulo `count` is `index`."""

    index: int = 0
    count: int = 1

    @classmethod
    def from_option(cls, text: str) -> Shard:
        """``--shard``'s shard: ``I/N``, or ``auto``: the scheduler's (`moot.core.scheduler`).

        Raises:
            ConfigError: Not I/N with 0 <= I < N; ``auto`` without a scheduler's shard.
        """
        return cls(*scheduler_shard(os.environ)) if text == "auto" else cls.parse(text)

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
    """What a run did.

    Attributes:
        out_dir: The output folder.
        planned: Debates this run was asked for.
        already_done: Of those, debates finished by an earlier run.
        completed: Debates finished now.
        failures: What failed now (``id``, ``kind``: ``arguments`` or ``debate``, ``error``).
        dataset_records: Records in the dataset.
        ledger: The model layer's usage.
        seconds: Wall time of the run.
        tallies: What each `run_items` call did: the argument lists' (when any were to be
            generated; one per round of proposals), then the debates'.
    """

    out_dir: Path
    planned: int = 0
    already_done: int = 0
    completed: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    dataset_records: int = 0
    ledger: UsageLedger = field(default_factory=UsageLedger)
    seconds: float = 0.0
    tallies: list[Tally] = field(default_factory=list)

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
    limit: int | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """Generate (or resume) a DEBATunE dataset in `out_dir`.

    Args:
        topics: All topics; this shard's share is debated.
        out_dir: Output folder (created); see docs/schemas.md for its files.
        config: What to generate.
        client: The model layer (its ledger is reported in the manifest).
        concurrency: Argument lists or debates in flight at once.
        shard: Which share of the topics to debate.
        source: Where the topics came from, for the manifest.
        limit: Debate only the first `limit` debates of the plan (topic, then stance, then
            argument), proposing argument lists for only as many (topic, stance) pairs as they
            need.
        progress: The command's progress bar (one bar per stage).

    Raises:
        ConfigError: `out_dir` holds a run with another configuration or shard, or `limit` is
            negative.
    """
    if limit is not None and limit < 0:
        raise ConfigError(f"limit must be 0 or more, got {limit}")
    shard = shard or Shard()
    out_dir = Path(out_dir)
    started = time.time()
    previous = check_run_folder(out_dir, config, shard)
    RunFolder(out_dir).claim(CLAIM, {"identity": config.identity(), "shard": str(shard)}, HOLDS)
    summary = RunSummary(out_dir=out_dir, ledger=client.ledger)
    plan = await _debate_jobs(
        shard.select(topics), config, client, out_dir, summary, concurrency, limit, progress
    )
    # the plan holds what the debates need: the topics (33 MB for 50,000) are let go for the
    # run, freed if the caller let them go too (the CLI does: peak RSS at 100,000 debates)
    del topics
    debate_log = ResultLog(out_dir / "debates.jsonl")
    async with contextlib.AsyncExitStack() as stack:
        debates = _Debates(stack, out_dir, config, client, shard)
        result = await run_items(
            plan,
            debates,
            debate_log,
            unit="debates",
            concurrency=concurrency,
            failed=_is_failed,
            progress=progress,
            read_back=False,  # the failures alone: nothing held per finished debate
            logged=debates.logged,
        )
        debates.forget()
    del plan  # a job per debate: not held while the dataset is written (peak RSS at 100,000)
    summary.tallies.append(result.tally)
    summary.planned = result.tally.planned
    summary.already_done = result.tally.skipped
    summary.completed = result.tally.done
    summary.failures += _failures("debate", result.records)
    # the dataset holds every debate in the log, this run's first (earlier runs' are kept)
    summary.dataset_records = write_sft_dataset(
        debate_log.records(), out_dir, config.seed, reuse=True
    )
    summary.seconds = time.time() - started
    manifest = _write_manifest(out_dir, config, shard, source, summary, previous, started)
    write_card(out_dir, _card(out_dir, manifest))
    return summary


async def _debate_jobs(
    topics: list[Topic],
    config: DebateRunConfig,
    client: ModelClient,
    out_dir: Path,
    summary: RunSummary,
    concurrency: int,
    limit: int | None,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    """One job per (topic, stance, argument), the first `limit` of them; lists are proposed.

    Generated argument lists go through `run_items` in rounds: the first asks for every missing
    list (with a `limit`, for the fewest that can give `limit` debates, counting a full list each);
    another round follows only when lists came back short of the `limit`.
    """
    identity = config.identity()
    k = config.arguments_per_stance
    pairs = [(topic, stance) for topic in topics for stance in STANCES]
    lists = {i: list(t.arguments[s][:k]) for i, (t, s) in enumerate(pairs) if t.arguments}
    log = ResultLog(out_dir / "arguments.jsonl")
    asked: list[str] = []
    rounds = 0

    async def propose(item: dict[str, Any]) -> dict[str, Any]:
        seed = call_seed(config.seed, item["id"], item["attempt"])
        arguments = await propose_arguments(
            client, config.debater_a, item["topic"], item["stance"], k, seed=seed
        )
        return _argument_record(
            item, arguments, None if arguments else "no arguments could be parsed from the reply"
        )

    while wanted := _lists_wanted(lists, len(pairs), k, limit):
        known = log.load()
        items = []
        for i in wanted:
            topic, stance = pairs[i]
            key = stable_id("arguments", topic.topic, stance, identity)
            # a reply that held no list is cached: a retry must ask anew, with the next seed
            attempt = known.get(key, {}).get("attempt", -1) + 1
            items.append({"id": key, "topic": topic.topic, "stance": stance, "attempt": attempt})
        result = await run_items(
            items,
            propose,
            log,
            unit="argument lists",
            concurrency=concurrency,
            failed=_is_failed,
            on_error=lambda item, exc: _argument_record(item, [], str(exc)),
            progress=progress,
        )
        summary.tallies.append(result.tally)
        summary.failures += _failures("arguments", result.records)
        by_id = {record["id"]: record for record in result.records}
        lists.update(
            (i, by_id[item["id"]]["arguments"])
            for i, item in zip(wanted, items, strict=True)
            if by_id[item["id"]]["status"] != STOPPED  # --budget: no list, no debates yet
        )
        asked += [item["id"] for item in items]
        rounds += 1
        if result.tally.stopped:
            break
    if rounds != 1:  # none: merge still needs the file; several: each put its own lists first
        log.compact_current_first(asked)

    jobs: dict[str, dict[str, Any]] = {}  # by id: an argument listed twice is one debate
    for i, (topic, stance) in enumerate(pairs):
        for argument in lists.get(i, []):
            debate_id = stable_id("debate", topic.topic, stance, argument, identity)
            jobs.setdefault(
                debate_id,
                {"id": debate_id, "topic": topic.topic, "stance": stance, "argument": argument},
            )
    return list(jobs.values())[:limit]


def _lists_wanted(lists: dict[int, list[str]], pairs: int, k: int, limit: int | None) -> list[int]:
    """The pairs whose argument lists to propose next (a missing list counts as `k` debates)."""
    wanted, debates = [], 0
    for i in range(pairs):
        if limit is not None and debates >= limit:
            break
        if i not in lists:
            wanted.append(i)
        debates += len(lists[i]) if i in lists else k
    return wanted


def _argument_record(item: dict[str, Any], arguments: list[str], error: str | None) -> dict:
    """An argument list's record (``failed`` with the error when there is one)."""
    return {
        "id": item["id"],
        "topic": item["topic"],
        "stance": item["stance"],
        "arguments": arguments,
        "status": "failed" if error else "ok",
        "error": error and f"arguments for {item['stance']} on {item['topic']!r}: {error}",
        "attempt": item["attempt"],
    }


def _is_failed(record: dict[str, Any]) -> bool:
    return record["status"] == "failed"


def _failures(kind: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's failure entries for the failed `records`."""
    return [{"id": r["id"], "kind": kind, "error": r["error"]} for r in records if _is_failed(r)]


#: Finished debates whose checkpoints are deleted together (one transaction).
FORGET_BATCH = 64


class _Debates:
    """The debate task; its checkpoints are opened (and LangGraph imported) for the first debate.

    A rerun that finds every debate done so loads neither (about a second of imports). A
    finished debate's checkpoints are deleted once its record is logged, in batches of
    `FORGET_BATCH` (`LoopSqliteSaver.forget_threads`): a failed one keeps its turns for
    the rerun.

    Args:
        stack: Closes the checkpoints when the run ends.
        out_dir: The run folder.
        config: What to generate.
        client: The model layer.
        shard: Which share of the topics, for the records.
    """

    def __init__(
        self,
        stack: contextlib.AsyncExitStack,
        out_dir: Path,
        config: DebateRunConfig,
        client: ModelClient,
        shard: Shard,
    ) -> None:
        self._stack, self._out_dir, self._config = stack, out_dir, config
        self._client, self._shard = client, shard
        self._task: Any = None
        self._opening = asyncio.Lock()
        self._saver: Any = None
        self._finished: list[str] = []  # logged, their checkpoints not yet deleted

    async def __call__(self, job: dict[str, Any]) -> dict[str, Any]:
        if self._task is None:
            async with self._opening:  # the first debates wait for the one that opens them
                if self._task is None:
                    self._task = await self._open()
        return await self._task(job)

    async def _open(self) -> Any:
        from moot.graphs.checkpoints import durability_for, open_checkpoints
        from moot.graphs.debatune_debate import debaters, debatune_protocol
        from moot.graphs.protocol_debate import ProtocolContext, build_protocol_graph

        config = self._config
        saver = self._saver = await self._stack.enter_async_context(open_checkpoints(self._out_dir))
        protocol = debatune_protocol(config.rounds, config.turn_tokens, config.conclusion_tokens)
        roles = debaters(config.debater_a, config.debater_b)
        context = ProtocolContext(protocol, roles, self._client, config.seed)
        return functools.partial(
            _debate, build_protocol_graph(saver), context, self._shard, durability_for(self._client)
        )

    async def logged(self, record: dict[str, Any]) -> None:
        """A debate's record is in the log: a finished one needs its checkpoints no more."""
        if record["status"] == "ok":
            self._finished.append(record["id"])
            if len(self._finished) >= FORGET_BATCH:
                self.forget()

    def forget(self) -> None:
        """Delete the checkpoints of the finished debates logged so far."""
        finished, self._finished = self._finished, []
        if finished and self._saver is not None:
            self._saver.forget_threads(finished)


async def _debate(
    graph: Any, context: ProtocolContext, shard: Shard, durability: str, job: dict[str, Any]
) -> dict:
    """Run (or resume) one debate and return its result record (a failed one keeps its turns)."""
    from moot.graphs.checkpoints import run_thread
    from moot.graphs.debatune_debate import transcript
    from moot.graphs.protocol_debate import recursion_limit, start

    inputs = {"topic": job["topic"], "stance": job["stance"], "argument": job["argument"]}
    final, error = await run_thread(
        graph,
        job["id"],
        start(context.protocol, job["id"], inputs),
        context=context,
        steps=recursion_limit(context.protocol),
        durability=durability,
        done=lambda state: bool(state.get("final")),
    )
    conclusion = None if error else final["final"]["text"]
    turns = transcript(job["stance"], final.get("turns", []))
    roles = context.roles
    record = _debate_record(
        job, roles["A"], roles["B"], context.protocol.rounds, shard, turns, conclusion
    )
    return record | ({"status": "failed", "error": str(error)} if error else {})


def _debate_record(
    job: dict[str, Any],
    debater_a: Role,
    debater_b: Role,
    rounds: int,
    shard: Shard,
    turns: list[dict[str, Any]],
    conclusion: str | None,
) -> dict[str, Any]:
    """A finished debate's record in ``debates.jsonl`` (docs/schemas.md)."""
    return {
        **job,
        "status": "ok",
        "error": None,
        "transcript": turns,
        "conclusion": conclusion,
        "models": {"debater_a": debater_a.spec.name, "debater_b": debater_b.spec.name},
        "rounds": rounds,
        "shard": str(shard),
    }


def check_run_folder(out_dir: Path, config: DebateRunConfig, shard: Shard) -> dict[str, Any]:
    """Check that `out_dir` is new or holds a run of this configuration and shard.

    It writes nothing, so the CLI can check before it prints anything; `run_debatune` checks
    again before it claims the folder (`CLAIM`: ``.moot/run.json``).

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
    folder = RunFolder(out_dir)
    for path in (folder.claim_path(CLAIM), folder.manifest_path):
        if not path.exists():
            continue
        data = read_json_object(path, "move it aside or use a new --out")
        if data.get("identity") != identity:
            raise ConfigError(
                f"{out_dir} holds a run with a different configuration; use a new --out "
                "(or the same options as before)"
            )
        if data.get("shard") != str(shard):
            raise ConfigError(f"{out_dir} holds shard {data.get('shard')}, not {shard}")
        if path == folder.manifest_path:
            previous = data
    return previous


def read_json_object(path: Path, remedy: str) -> dict[str, Any]:
    """The JSON object in a run's file (a claim or a manifest).

    Args:
        path: The file.
        remedy: What the user should do if it is unreadable.

    Raises:
        InputError: It is unreadable, or not a JSON object.
    """
    try:
        data = read_json_file(path)
    except InputError as exc:  # also nested too deeply, or a lone surrogate
        raise InputError(path, f"unreadable ({exc.problem}); {remedy}") from None
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
) -> dict[str, Any]:
    ledger = summary.ledger
    before = (
        UsageLedger.from_json(previous["ledger_total"]) if previous.get("ledger_total") else None
    )
    total = UsageLedger.merged([ledger, before]) if before else ledger
    manifest = {
        "kind": "debatune",
        "identity": config.identity(),
        "roles": [config.debater_a.describe(), config.debater_b.describe()],
        "shard": str(shard),
        "topics_source": source,
        "counts": {
            "debates": summary.planned,
            "debates_ok": summary.planned
            - sum(1 for f in summary.failures if f["kind"] == "debate")
            - summary.tallies[-1].stopped,
            "failures": len(summary.failures),
            # --budget: argument lists and debates not done (the rerun does them)
            "stopped": sum(t.stopped for t in summary.tallies),
            "dataset_records": summary.dataset_records,
        },
        "failures": summary.failures,
        "ledger": ledger.to_json(),
        "ledger_total": total.to_json(),
        "runs": [
            *previous.get("runs", []),
            {"started": started, "seconds": round(summary.seconds, 3)},
        ],
        "versions": package_versions(*PACKAGES),
        "outputs": {
            "debates": "debates.jsonl",
            "arguments": "arguments.jsonl",
            "dataset_jsonl": "dataset.jsonl",
            "dataset": "dataset/",
        },
    }
    if overrides := overridden():  # `--prompts`: only then, so faithful manifests stay as they were
        manifest["prompt_overrides"] = overrides
    RunFolder(out_dir).write_manifest(manifest)
    return manifest


#: The paper's sections each template follows (for the card).
_SECTIONS = {
    "debatune/debater_system.j2": "DEBATunE, Section 3.1 (Debate)",
    "debatune/arguments.j2": "DEBATunE, Section 2 (Debate Dataset: arguments per stance)",
    "debatune/turn.j2": "DEBATunE, Section 3.1 (Debate)",
    "debatune/conclusion_system.j2": "DEBATunE, Section 3.1 (the supporting agent concludes)",
    "debatune/conclusion.j2": "DEBATunE, Section 3.1 (the supporting agent concludes)",
    INSTRUCTIONS_FILE: "DEBATunE, Section 3.2 (Training: the reference's SFT instructions)",
}


def _card(out_dir: Path, manifest: dict[str, Any]) -> Card:
    """The card of a debate run's dataset (`moot.core.hub.cards`)."""
    counts = manifest["counts"]
    models = [role["spec"] for role in manifest["roles"]]
    return Card(
        kind="dataset",
        title="DEBATunE debate data",
        summary=(
            "Controllable controversial statements made by debate, as chat SFT records: for each "
            "topic, stance and argument two LLM agents with opposite stances debate "
            f"{manifest['identity']['rounds']} round(s), then the supporting agent concludes "
            "with a statement, the record's assistant turn; the user turn is one of the "
            "reference's instructions. Made by `moot debate` (DEBATunE, Li et al., ACL 2024, "
            f"Section 3). Topics: `{manifest['topics_source']}`; shard {manifest['shard']}."
        ),
        schema="Output folder of `moot debate`",
        sizes=[
            ("records", counts["dataset_records"]),
            ("debates planned / failed / stopped", _slashed(counts, "debates")),
            ("`dataset.jsonl` bytes", (out_dir / "dataset.jsonl").stat().st_size),
            ("folder bytes", folder_bytes(out_dir)),
        ],
        papers=["debatune"],
        prompts=[(name, _SECTIONS[name]) for name in (*PROMPTS, INSTRUCTIONS_FILE)],
        overrides=manifest.get("prompt_overrides", {}),
        models=list(dict.fromkeys(models)),
        ledger=manifest["ledger_total"],
        tags=["debate", "debatune", "synthetic", "sft"],
        data_files={"train": "dataset.jsonl"},
    )


def _slashed(counts: dict[str, int], what: str) -> str:
    return f"{counts[what]} / {counts['failures']} / {counts['stopped']}"
