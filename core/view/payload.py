"""Run folders as one JSON payload for `moot view`: each item with what the page filters on.

A folder's kind is what its owner's command registered (`moot.core.data.folders.Output.view`;
the owner from the owner mark, or an earlier version's claim files and manifests). Each kind
names the log it keeps one record per item in and how an item is summed up for the list: a title,
its status (a failure stays a failure, with its error), the model, a number the page can filter
by range, a label, and the key that aligns it with the same item in another run (e.g. base and
tuned model on the same instructions). The record itself travels whole, for the page to show.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.core.data.folders import EVAL_CLAIM, PROGRESS, RunFolder, output_of, owners
from moot.core.data.records import ResultLog, read_json_file, read_records
from moot.core.errors import InputError
from moot.core.labels import LABELS_FOLDER, judge_values, label_fields, read_labels, run_fields

Record = dict[str, Any]

#: Statuses that mean an item failed (a rerun retries it); the page shows them as failures.
FAILED = ("failed", "error")


@dataclass(frozen=True)
class Kind:
    """How `moot view` reads one command's folder.

    Attributes:
        name: The page's name for it (chooses how an item is drawn).
        log: The file with one record per item, or None for a summary-only folder.
        summary: The file with the run's settings, counts and ledger.
        item: The list fields of one record (`title`, `model`, `score`, `label`, `key`).
        also: The other files its items are read from (`moot view --serve` reads the whole
            run again when one of them, or the summary, changes; the log it follows).
    """

    name: str
    log: str | None
    summary: str
    item: Callable[[Record, Record], Record]
    also: tuple[str, ...] = ()


def _debate(r: Record, summary: Record) -> Record:
    models = r.get("models") or {}
    return {
        "title": r.get("topic"),
        "model": models.get("debater_a"),
        "label": r.get("stance"),
        "key": _key(r.get("topic"), r.get("stance"), r.get("argument")),
    }


def _judgment(r: Record, summary: Record) -> Record:
    final = r.get("final") or {}
    pro, con = " & ".join(r.get("pro") or []), " & ".join(r.get("con") or [])
    return {
        "title": f"{r.get('debate')}: {pro} vs {con}",
        "model": r.get("judge"),
        "label": final.get("winner"),
        "key": _key(r.get("debate"), r.get("repeat")),
    }


def _debatune_eval(r: Record, summary: Record) -> Record:
    value = (r.get("judgment") or {}).get("value") or {}
    return {
        "title": r.get("topic"),
        "model": summary.get("judge"),
        "score": value.get("support"),
        "label": r.get("outcome") or r.get("side"),
        "key": _key(r.get("topic"), r.get("side"), r.get("argument")),
    }


def _verdict(r: Record) -> Record:
    """A label judge's verdict: the label, or the reply it could not read, or the failed call."""
    judgment = r.get("judgment") or {}
    if r.get("status") in FAILED or judgment.get("ok", True):
        return {"score": judgment.get("label")}
    failure = judgment.get("parse_failure") or {}
    return {"status": "unparsed", "error": failure.get("error") or "the reply could not be read"}


def _da(r: Record, summary: Record) -> Record:
    unit = r.get("answer_id")
    return {
        **_verdict(r),
        "title": r.get("question") or unit,
        "model": summary.get("judge"),
        "key": _key(unit),  # the answer's id, as `moot answer` and `moot eval pd` key it
    }


def _detector(r: Record, summary: Record) -> Record:
    verdict = _verdict(r)
    gold, label = r.get("label"), verdict.get("score")
    return {
        **verdict,
        "title": f"{r.get('pair_id')}: {r.get('perspective') or ''}",
        "model": summary.get("judge"),
        "label": None if label is None else "right" if label == gold else "wrong",
        "key": _key(r.get("pair_id")),
    }


def _question(r: Record, summary: Record) -> Record:
    return {
        "title": r.get("question") or r.get("id"),
        "model": summary.get("model"),
        "label": r.get("mode"),
        "key": _key(r.get("id")),
    }


def _curated(r: Record, summary: Record) -> Record:
    failure = r.get("failure") or {}
    povs = r.get("partial_answers") or []
    kept = sum("duplicate_of" not in p for p in povs)
    found = {
        "title": r.get("question") or r.get("id"),
        "model": summary.get("model"),
        "label": f"kept, {kept} of {len(povs)} POVs" if r.get("status") == "ok" else None,
        "key": _key(r.get("id")),
    }
    if failure:  # no POV could be read: the question is dropped from partial_answers.jsonl
        found |= {"status": "unparsed", "error": failure.get("error"), "label": "dropped"}
    return found


def _pd(r: Record, summary: Record) -> Record:
    return {
        "title": r.get("question") or r.get("id"),
        "model": summary.get("scorer"),
        "score": r.get("pd"),
        "label": "truncated" if r.get("truncated") else None,
        "key": _key(r.get("id")),
    }


def _berds(r: Record, summary: Record) -> Record:
    found = {
        "title": r.get("question") or r.get("id"),
        "model": summary.get("judge"),
        "score": r.get("mrecall"),
        "key": _key(r.get("id")),
        "status": "ok",
    }
    if r.get("incomplete"):  # a detection failed for good: `_join_detections` says which
        found |= {"status": "error", "label": "incomplete"}
    elif r.get("parse_failure"):
        found |= {"status": "unparsed", "label": "set apart", "error": "an unread detection"}
    return found


def _compare(r: Record, summary: Record) -> Record:
    aspect = f" ({r['aspect']})" if r.get("aspect") else ""
    failure = r.get("parse_failure") or {}
    found = {
        "title": f"{r.get('object1')} vs {r.get('object2')}{aspect}",
        "model": summary.get("model"),
        "label": "parse failure" if failure else None,
        "key": _key(r.get("question_id") or r.get("id")),
    }
    if r.get("status") == "no_arguments":
        found |= {"label": None, "error": "no arguments for this question"}
    elif failure:
        found |= {"status": "unparsed", "error": failure.get("error")}
    return found


def _compqa_judged(r: Record, summary: Record) -> Record:
    aspect = f" ({r['aspect']})" if r.get("aspect") else ""
    return {
        "title": f"{r.get('object1')} vs {r.get('object2')}{aspect}",
        "model": r.get("judge"),
        "score": r.get("score"),
        "label": r.get("problem") if r.get("status") == "invalid" else None,
        "key": _key(
            r.get("object1"),
            r.get("object2"),
            r.get("aspect"),
            r.get("generator"),
            r.get("scenario"),
        ),
    }


def _protocol(r: Record, summary: Record) -> Record:
    inputs = r.get("inputs") or {}
    final = r.get("final") or {}
    failure = r.get("failure") or {}
    ended = r.get("ended") or {}
    label = final.get("answer") or final.get("verdict") or final.get("mean") or ended.get("by")
    found = {
        "title": " · ".join(str(value) for value in inputs.values())[:200] or r.get("id"),
        "model": next(iter((r.get("models") or {}).values()), None),
        "label": label if isinstance(label, str) else json.dumps(label, ensure_ascii=False),
        "key": _key(json.dumps(inputs, sort_keys=True, ensure_ascii=False)),
    }
    if failure:  # a structured reply that could not be read ended the item
        found |= {"status": "unparsed", "error": f"{failure.get('step')}: {failure.get('error')}"}
    return found


def _custom_judge(r: Record, summary: Record) -> Record:
    verdict, source = r.get("verdict"), r.get("input") or {}
    found = {
        "title": next((str(v) for v in source.values() if isinstance(v, str)), r.get("place")),
        "model": ", ".join(summary.get("jurors") or []),
        "score": verdict
        if isinstance(verdict, int | float) and not isinstance(verdict, bool)
        else None,
        "label": None if verdict is None else str(verdict),
        "key": _key(r.get("place")),
    }
    if r.get("status") == "ok" and verdict is None:  # no juror's reply read, or a split jury
        read = any(v is not None for v in (r.get("verdicts") or {}).values())
        found |= {"status": "unparsed", "error": "a split jury" if read else "no reply read"}
    return found


def _key(*parts: Any) -> str:
    return "\x1f".join(["" if p is None else str(p) for p in parts])


def _none(r: Record, summary: Record) -> Record:
    return {}


#: How `moot view` reads each kind of folder, by the name a command registers for its output
#: (`moot.core.data.folders.Output.view`).
KINDS: dict[str, Kind] = {
    "debate": Kind("debate", "debates.jsonl", "manifest.json", _debate, ("arguments.jsonl",)),
    "judge": Kind("judge", "judgments.jsonl", "summary.json", _judgment),
    "controllability": Kind("controllability", "judgments.jsonl", "summary.json", _debatune_eval),
    "quality": Kind("quality", "judgments.jsonl", "summary.json", _debatune_eval),
    "da": Kind("da", "judgments.jsonl", "summary.json", _da),
    "detector": Kind("detector", "judgments.jsonl", "summary.json", _detector),
    "berds": Kind("berds", "scores.jsonl", "summary.json", _berds, ("judgments.jsonl",)),
    "pd": Kind("pd", "scores.jsonl", "summary.json", _pd),
    "answer": Kind("answer", "answers.jsonl", "summary.json", _question),
    "curate": Kind("curate", "curation.jsonl", "summary.json", _curated),
    "compare": Kind("compare", "answers.jsonl", "summary.json", _compare),
    "compqa": Kind("compqa", "judged", "summary.json", _compqa_judged),
    "protocol": Kind("protocol", "transcripts.jsonl", "summary.json", _protocol),
    "custom_judge": Kind("custom_judge", "judgments.jsonl", "summary.json", _custom_judge),
    "panelbench": Kind("summary", None, "summary.json", _none),
    "report": Kind("summary", None, "report.json", _none),
}

#: The kind of a folder that holds runs (`moot run`'s): its stages are shown, each as a run.
STAGES = "stages"


def _view(command: str) -> str | None:
    """How `moot view` shows `command`'s folders (a key of `KINDS`, or `STAGES`), or None."""
    output = output_of(command)
    return output.view if output else None


def _view_of(folder: Path) -> str | None:
    """How `moot view` shows `folder`, by its (first) owner's output; None: not at all."""
    return _view((owners(folder) or ("",))[0])


def command_of(folder: Path) -> str:
    """The command whose folder `folder` is, if `moot view` can show it.

    Raises:
        InputError: The folder is missing, not moot's, or of a command with nothing to show.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder" if folder.exists() else "folder not found")
    found = owners(folder)
    if not found:
        raise InputError(folder, "not a run folder moot made (no .moot/owner.json)")
    if len({_view(command) for command in found}) > 1:  # an earlier version's .moot/eval.json
        claim = RunFolder(folder).claimed(EVAL_CLAIM)
        setting = claim.get("evaluation") or claim.get("run") if isinstance(claim, dict) else None
        # its claim's setting says which command made it: the one whose kind it names
        found = tuple(command for command in found if _view(command) == setting) or ("",)
    if _view(found[0]) not in KINDS:
        raise InputError(folder, f"a `{found[0] or 'moot'}` folder: `moot view` shows run folders")
    return found[0]


def kind_of(folder: Path) -> Kind:
    """How `moot view` reads `folder` (`command_of` says whether it can)."""
    return KINDS[str(_view(command_of(folder)))]


def read_run(
    folder: Path,
    name: str | None = None,
    records: Callable[[Path], list[Record]] | None = None,
) -> Record:
    """One run folder as the page's run: its command, summary, ledger, progress and items.

    Args:
        folder: The run folder.
        name: What the page calls it (default: the folder as given).
        records: Reads the records of the folder's log (by its path) instead of `ResultLog`
            (`moot view --serve`, which follows the log from where this read ends); a run
            whose folder holds nothing yet is then shown empty, not refused.

    Raises:
        InputError: `command_of` refuses it, or a file it needs cannot be read.
    """
    folder = Path(folder)
    command = command_of(folder)
    kind = KINDS[str(_view(command))]
    summary = read_summary(folder, kind)
    empty = kind.log is not None and summary is None and not inside(folder, kind.log).exists()
    if empty and records is None:
        raise InputError(folder, f"holds neither {kind.log} nor {kind.summary}: nothing to show")
    logged = []
    if kind.log and records is not None and kind.name != "compqa":  # compqa's log: a folder
        logged = records(inside(folder, kind.log))
    elif kind.log:
        logged = _records(folder, kind)
    items = items_of(folder, kind, logged, summary)
    if kind.name == "debate":
        items += _failed_argument_lists(folder)
    progress = inside(folder, PROGRESS)
    return {
        "name": name or str(folder),
        "command": command,
        "kind": kind.name,
        "summary": summary,
        "ledger": (summary or {}).get("ledger"),
        "progress": read_json_file(progress) if progress.is_file() else None,
        "labelled": bool(label_fields(kind.name, {}, summary or {})),  # a kind people label
        "items": items,
    }


def with_labels(folder: Path, run: Record) -> Record:
    """`run` (`read_run` of `folder`) with every labeller's labels of its items (``labels``).

    Raises:
        InputError: A labels file with a line that is no label of the run's items.
    """
    labels = inside(folder, LABELS_FOLDER)
    return {**run, "labels": read_labels(labels, run_fields(run)) if labels.is_dir() else []}


def read_summary(folder: Path, kind: Kind) -> Record | None:
    """The folder's summary file (`Kind.summary`), or None while there is none."""
    path = inside(folder, kind.summary)
    summary = read_json_file(path) if path.is_file() else None
    if summary is not None and not isinstance(summary, dict):
        raise InputError(path, "expected a JSON object")
    return summary


def items_of(
    folder: Path, kind: Kind, records: list[Record], summary: Record | None
) -> list[Record]:
    """The page's items of `records` logged in `folder` (a BERDS question with its detections)."""
    items = [_item(r, summary or {}, kind) for r in records]
    for item in items:  # what a person can label on it, and what the judge said
        fields = label_fields(kind.name, item["record"], summary or {})
        item["fields"] = [field.to_json() for field in fields] or None
        item["judged"] = judge_values(kind.name, item["record"], summary or {}) if fields else None
    if kind.name == "berds":
        _join_detections(folder, items)
    return items


def run_folders(folder: Path) -> list[tuple[Path, str | None]]:
    """The run folders `folder` shows, each with its name on the page (None: as given).

    A `moot run` folder shows every stage whose folder `moot view` can show (``OUT/<stage>``, in
    the recipe's order, named ``OUT: <stage>``); its SFT and `moot generate` outputs are not
    run folders and are left out.

    Raises:
        InputError: A `moot run` folder none of whose stages can be shown yet.
    """
    folder = Path(folder)
    if folder.is_dir() and _view_of(folder) == STAGES:
        path = inside(folder, "manifest.json")
        manifest = read_json_file(path) if path.is_file() else {}
        order = manifest.get("order", []) if isinstance(manifest, dict) else []
        stages = [inside(folder, str(name)) for name in order]
        shown = [s for s in stages if s.is_dir() and _view_of(s) in KINDS]
        if not shown:
            raise InputError(folder, "no stage of this `moot run` has a run folder to show yet")
        return [(stage, f"{folder}: {stage.name}") for stage in shown]
    return [(folder, None)]


def read_runs(folder: Path) -> list[Record]:
    """A folder's runs, each with its labels: the folder itself, or a `moot run`'s stages.

    Raises:
        InputError: As `read_run` and `run_folders`.
    """
    return [with_labels(path, read_run(path, name)) for path, name in run_folders(folder)]


def inside(folder: Path, name: str) -> Path:
    """``folder / name``, which `moot view` may read: inside the run `folder`, and no FIFO.

    The page embeds nothing from elsewhere: a symlink leading out of the folder, or a name
    that does (``..``, an absolute path in a `moot run` manifest's ``order``), is refused, as is
    a FIFO or a device, whose reading would wait for ever.

    Raises:
        InputError: Naming the path and the problem.
    """
    path = Path(folder) / name
    try:
        root, real = Path(folder).resolve(), path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        raise InputError(path, "a symlink that leads nowhere (a loop)") from None
    if real != root and root not in real.parents:
        raise InputError(path, f"leads outside {folder}: moot view shows what run folders hold")
    if path.exists() and not (path.is_file() or path.is_dir()):
        raise InputError(path, "not a regular file (a FIFO or a device)")
    return path


def _records(folder: Path, kind: Kind) -> list[Record]:
    path = inside(folder, str(kind.log))
    if kind.name == "compqa":  # one judged file per --answers file, each record in input order
        names = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
        files = [file for file in (inside(path, name) for name in names) if file.is_file()]
        found = []
        for file in files:
            for where, record in read_records(file):
                if not isinstance(record, dict):
                    raise InputError(file, "expected a JSON object", where)
                found.append({"id": f"{file.name}:{where}", "file": file.name, **record})
        return found
    return list(ResultLog(path).load().values())  # a line torn by a crash is left out


def _item(record: Record, summary: Record, kind: Kind) -> Record:
    fields = kind.item(record, summary)
    status = str(fields.pop("status", None) or record.get("status") or "unknown")
    score = fields.get("score")
    # why an item is not done: what its kind says, else `error`, a judgment's `reason`, a CompQA
    # judgment's `problem`
    why = [fields.get("error")]
    if status not in ("ok", "complete"):
        why += [record.get(k) for k in ("error", "reason", "problem")]
    error = next((text for text in why if isinstance(text, str) and text), None)
    return {
        "id": str(record.get("id")),
        "status": status,
        "failed": status in FAILED,
        "error": error,
        "title": str(fields.get("title") or record.get("id")),
        "model": fields.get("model") if isinstance(fields.get("model"), str) else None,
        "score": score if isinstance(score, int | float) and not isinstance(score, bool) else None,
        "label": fields.get("label") if isinstance(fields.get("label"), str) else None,
        "key": fields.get("key") or str(record.get("id")),
        "record": record,
    }


def _join_detections(folder: Path, items: list[Record]) -> None:
    """Each BERDS question's detections (``judgments.jsonl``), as ``[perspective][rank]``.

    A cell is the detection's record (its label, replies, or error) or None when none was
    logged; a question left incomplete by a failed detection takes that detection's error.
    """
    by_question: dict[str, list[Record]] = {}
    for record in ResultLog(inside(folder, "judgments.jsonl")).load().values():
        by_question.setdefault(str(record.get("question_id")), []).append(record)
    for item in items:
        record = item["record"]
        cells = [
            (d["perspective_index"], d["rank"], d)
            for d in by_question.get(item["id"], [])
            if isinstance(d.get("perspective_index"), int) and isinstance(d.get("rank"), int)
        ]
        # an earlier version's scores name neither perspectives nor documents: the cells do
        height = max([len(record.get("perspectives") or record.get("supported") or [])]
                     + [p + 1 for p, _, _ in cells])  # fmt: skip
        width = max([len(record.get("documents") or [])] + [rank + 1 for _, rank, _ in cells])
        grid: list[list[Record | None]] = [[None] * width for _ in range(height)]
        for p, rank, detection in cells:
            if p >= 0 and rank >= 0:
                grid[p][rank] = detection
        found = [d for _, _, d in cells]
        item["detections"] = grid
        failed = [d for d in found if d.get("status") in FAILED]
        if item["failed"] and failed and not item["error"]:
            item["error"] = failed[0].get("error")


def _failed_argument_lists(folder: Path) -> list[Record]:
    """Argument lists that failed: they are a debate run's failures too, never hidden."""
    lists = ResultLog(inside(folder, "arguments.jsonl")).load().values()
    return [
        {
            "id": str(r.get("id")),
            "status": "failed",
            "failed": True,
            "error": r.get("error"),
            "title": f"arguments for {r.get('stance')} on {r.get('topic')}",
            "model": None,
            "score": None,
            "label": "arguments",
            "key": _key("arguments", r.get("topic"), r.get("stance")),
            "record": r,
            "fields": None,
            "judged": None,
        }
        for r in lists
        if r.get("status") == "failed"
    ]


def view_payload(folders: list[Path], debates: Path | None = None) -> Record:
    """The page's data: every run folder read (`read_run`), in the order given.

    Args:
        folders: The run folders.
        debates: The debates a `moot judge` folder judged (its ``--debates``): each judgment
            then shows the motion, the speeches and the gold verdict, where the file has one.

    Raises:
        InputError: A folder `moot view` cannot show (named, with why), or a bad debates file.
    """
    runs = [run for folder in folders for run in read_runs(folder)]
    if debates is not None:
        by_id = judged_debates(debates)
        for run in runs:
            if run["kind"] == "judge":
                join_debates(run["items"], by_id)
    return {"format": 1, "runs": runs}


def judged_debates(debates: Path) -> dict[str, Any]:
    """The debates a `moot judge` run judged (its ``--debates`` file), by id.

    Raises:
        InputError: A bad debates file.
    """
    from moot.core.data.debates import load_debates

    return {d.id: d for d in load_debates(debates)}


def join_debates(items: list[Record], by_id: dict[str, Any]) -> None:
    """Each judgment item with its debate (`judged_debates`): motion, speeches, gold winner."""
    for item in items:
        debate = by_id.get(item["record"].get("debate"))
        if debate is not None:
            item.update(_judged_debate(debate))


def _judged_debate(debate: Any) -> Record:
    """A judgment's debate: its motion as the title, its speeches, and its gold winners."""
    speeches = [{"speaker": s.speaker, "content": s.content} for s in debate.speeches]
    gold = debate.gold or {}
    dimensions = gold.get("dimensions") or {}
    return {
        "title": debate.motion,
        "debate": {"motion": debate.motion, "info_slide": debate.info_slide, "speeches": speeches},
        "gold": _gold_winner(gold.get("final"), gold.get("winners"), debate),
        "gold_dimensions": {k: _gold_winner(v, None, debate) for k, v in dimensions.items()},
    }


def _gold_winner(label: Any, winners: Any, debate: Any) -> str | None:
    """A gold label as the page says it: 0 the pro side won, 1 the con side, 0.5 a tie."""
    if winners:  # BP: the winning teams
        return ", ".join(winners) if isinstance(winners, list) else str(winners)
    if label is None:
        return None
    if label == 0.5:
        return "tie"
    return " & ".join(debate.pro if label < 0.5 else debate.con)
