"""`moot eval judge`: a judge as data run over an items file, by one model or a jury.

Each input record is an item with a stable id (the judge's identity and the record), judged
through the run engine (`Judging.run`, `moot.core.runs.run_claimed`) into ``judgments.jsonl``:
a rerun judges only what is missing, a call that failed for good is the item's error record,
an unread reply a parse failure counted apart. The identity holds the spec's and its templates'
digest, so an edited judge is a new run (its folder refuses it: use a new ``--out``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moot.agents.custom_judge import ask, verdict
from moot.agents.judge_spec import JudgeFile
from moot.core.data.records import atomic_write, read_records, stable_id, write_json
from moot.core.errors import InputError
from moot.core.llm.spec import Role
from moot.core.metrics import debatune as pairwise
from moot.core.metrics import jury as metrics
from moot.core.metrics.stats import mean
from moot.core.runs import gather_all, outcome_counts
from moot.core.tables import render_table, show
from moot.graphs.judging import EvalResult, Judging


def load_items(path: Path, judge: JudgeFile) -> list[dict[str, Any]]:
    """The records of `path` (JSON or JSONL), each checked to hold every field the judge names.

    Raises:
        InputError: The file is unreadable, or a record is not an object or lacks a field the
            templates use, or holds one that is not text or a number (its line named).
    """
    spec = judge.spec
    needed = [*spec.inputs, *spec.judged]
    items = []
    for place, record in read_records(path):
        if not isinstance(record, dict):
            raise InputError(path, "expected a JSON object", place)
        for name in needed:
            value = record.get(name)
            if value is None:
                raise InputError(path, f"no field {name!r}, which {judge.where} uses", place)
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise InputError(path, f"{name!r} must be text or a number", place)
        _render(judge, record, path, place)
        items.append({"place": place, "input": record})
    return items


def _render(judge: JudgeFile, record: dict[str, Any], path: Path, place: str) -> None:
    """Render the record's requests once, so a template that fails on it fails before any call."""
    try:
        judge.messages(record)
        if judge.spec.aggregation.method == "both_orders":
            judge.messages(record, swapped=True)
    except Exception as exc:  # noqa: BLE001 - whatever the template raised, said in one line
        problem = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        raise InputError(path, f"{judge.where}'s templates fail on it: {problem}", place) from None


async def run_judge(
    items: Sequence[dict[str, Any]],
    judge: JudgeFile,
    judging: Judging,
    jurors: Sequence[Role],
    *,
    constrained: bool = False,
) -> EvalResult:
    """Ask every juror about every item; aggregate; summarise.

    Args:
        items: `load_items`' records (``--limit`` applied).
        judge: The checked judge.
        judging: Its output folder, model layer and how the run goes.
        jurors: The jury (one model: a judge alone).
        constrained: Ask for schema-constrained JSON.

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    spec = judge.spec
    identity = {
        "evaluation": "judge",
        "judge": spec.name,
        "jurors": [role.spec.name for role in jurors],
        "temperature": jurors[0].temperature,
        "spec": judge.digest,
        "constrained": constrained,
    }
    work = [{"id": stable_id("judge", identity, i["input"]), **i} for i in items]

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        asked = [
            ask(
                judging.client,
                role,
                judge,
                item["input"],
                seed=judging.seed,
                constrained=constrained,
            )
            for role in jurors
        ]
        judged = dict(zip(identity["jurors"], await gather_all(*asked), strict=True))
        verdicts = [verdict(j, judge) for j in judged.values()]
        return {
            **item,
            "status": "ok",
            "verdict": metrics.verdict_of(verdicts, _method(judge)),
            "verdicts": dict(zip(judged, verdicts, strict=True)),
            "jurors": {name: j.to_json() for name, j in judged.items()},
        }

    run = await judging.run(work, task, identity)
    # the spec as read, so what its fields mean stays readable where the file has moved
    summary = {**identity, "judge_spec": spec.model_dump(mode="json")}
    summary |= summarise(run.records, judge, judging.seed)
    summary["ledger"] = judging.client.ledger.to_json()
    return EvalResult(run.records, summary, [run.tally])


def summarise(records: Sequence[dict[str, Any]], judge: JudgeFile, seed: int) -> dict[str, Any]:
    """The verdicts' figures over finished items (an unread verdict counted apart, never a 0).

    ``parse_failures``: items no juror's reply could be read for; ``split``: items a jury read
    but gave no majority.
    """
    judged = [r for r in records if r["status"] == "ok"]
    verdicts = [r["verdict"] for r in judged]
    read = [v for v in verdicts if v is not None]
    unread = sum(all(v is None for v in r["verdicts"].values()) for r in judged)
    summary: dict[str, Any] = {"items": len(judged), "parse_failures": unread}
    summary |= outcome_counts(records)
    method = judge.spec.aggregation.method
    if method == "both_orders":
        scored = pairwise.pairwise(verdicts, [], seed=seed)
        summary |= {key: scored[key] for key in _PAIRWISE}
        swaps = [j["inconsistent"] for r in judged for j in r["jurors"].values()]
        summary |= {
            "order_consistent": swaps.count(False),
            "order_inconsistent": swaps.count(True),
            "order_inconsistency": mean([s for s in swaps if s is not None]),
        }
    elif method == "mean":
        summary |= {"mean": mean(read), "mean_ci95": metrics.mean_ci95(read, seed=seed)}
    else:
        summary["verdicts"] = dict(sorted(Counter(map(str, read)).items()))
    jurors = list(judged[0]["verdicts"]) if judged else []
    if len(jurors) > 1:
        level = "interval" if method == "mean" else "nominal"
        table = {name: [r["verdicts"][name] for r in judged] for name in jurors}
        summary["split"] = len(verdicts) - len(read) - unread
        summary["agreement"] = metrics.agreement(table, verdicts, level)
    return summary


#: What a pairwise judge's summary takes from DEBATunE's pairwise scores.
_PAIRWISE = ("wins", "ties", "losses", "win_score", "win_score_ci95")


def _method(judge: JudgeFile) -> str:
    """How a jury's verdicts combine: both orders' outcomes by majority."""
    method = judge.spec.aggregation.method
    return "majority" if method == "both_orders" else method


def write_report(result: EvalResult, out_dir: Path, sources: dict[str, str]) -> str:
    """Write ``summary.json`` and ``summary.md`` (nested figures as dotted rows); the Markdown."""
    summary = {**result.summary, "sources": sources}
    write_json(Path(out_dir) / "summary.json", summary)
    hidden = ("ledger", "sources", "evaluation", "judge_spec")
    shown = {k: v for k, v in summary.items() if k not in hidden}
    rows = [(key, show(value, 4)) for key, value in _flat(shown)]
    table = render_table([("metric", "value"), *rows], markdown=True)
    text = f"# judge {summary['judge']}\n\n{table}\n"
    atomic_write(Path(out_dir) / "summary.md", lambda f: f.write(text))
    return text


def _flat(values: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, dict):
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows
