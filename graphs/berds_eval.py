"""BERDS on the run engine: MRecall@k and Precision@k of retrieved documents, and the detector.

Each judged unit (a question's (document, perspective) pair for BERDS; a labelled pair for the
detector) has a stable id and goes through `moot.core.runs.run_items` into ``judgments.jsonl``: a
rerun judges only what is missing, the folder is claimed for one detector and its settings, a call
that failed for good is an error (exit 1, retried on rerun) and an unparsable reply is a final
parse failure, counted apart and never scored. Their summaries are written by
`moot.graphs.judging.write_summary`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.agents.label_judges import DETECTION_PROMPTS, detect_perspective
from moot.core.data.questions import Question, question_id, read_perspectives
from moot.core.data.records import (
    read_input_text,
    read_records,
    stable_id,
    write_jsonl,
)
from moot.core.errors import InputError
from moot.core.llm.spec import Role
from moot.core.metrics.berds import berds_summary, detector_scores
from moot.core.runs import outcome_counts
from moot.graphs.judging import EvalResult, Judging, judge_identity

TSV_COLUMNS = ("question", "id", "document", "perspective", "label")


@dataclass(frozen=True)
class Retrieved:
    """One question's ranked retrieval output (moot's or BERDS' layout, see `load_retrieved`)."""

    id: str
    question: str
    documents: tuple[str, ...]  # chunk text, then a space and the title if any (as BERDS)
    chunk_ids: tuple[str, ...]
    perspectives: tuple[str, ...] | None = None  # BERDS' layout carries its gold perspectives


@dataclass(frozen=True)
class BerdsInstance:
    """A question's top documents and its gold perspectives."""

    id: str
    question: str
    documents: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    perspectives: tuple[str, ...]


@dataclass(frozen=True)
class DetectorPair:
    """A labelled (document, perspective) pair of BERDS ``pers_det.test.tsv``."""

    id: str
    question: str
    document: str
    perspective: str
    label: int


def load_retrieved(path: Path) -> list[Retrieved]:
    """Read retrieval output in either layout, record by record.

    * moot's (``moot retrieve``): ``{"id", "question", "status", "chunks": [{"id", "text",
      "title"?, ...}]}``; its ``perspectives`` (query expansions, not gold) are ignored.
    * BERDS' (the input of the released ``Eval/eval.py``, timchen0618/berds README):
      ``{"question"?, "perspectives": [...], "ctxs": [{"text", "title"?, "id"?, "score"?,
      ...}]}``, any other fields kept out of the way (``dataset``/``id`` of the released data
      name the question as `load_questions` does; without an id, the question text's hash,
      else the record's place). A document is ``text + " " + title`` when the ``title`` key is
      present, as ``Eval/eval.py`` builds it.

    Raises:
        InputError: A record in neither layout, a moot record without id or whose retrieval
            failed, a document lacking text, bad perspectives, or a repeated id.
    """
    records, seen = [], set()
    for where, record in read_records(path):
        if not isinstance(record, dict) or (("chunks" in record) == ("ctxs" in record)):
            raise InputError(
                path,
                "expected moot retrieve output (an object with 'chunks') or BERDS retrieval "
                "output (an object with 'ctxs')",
                where,
            )
        read = _moot_retrieved if "chunks" in record else _berds_retrieved
        item = read(path, where, record)
        if item.id in seen:
            raise InputError(path, "repeated id", f"id {item.id}")
        seen.add(item.id)
        records.append(item)
    if not records:
        raise InputError(path, "no records")
    return records


def _moot_retrieved(path: Path, where: str, record: dict[str, Any]) -> Retrieved:
    if record.get("id") in (None, ""):
        raise InputError(path, "expected an object with an 'id'", where)
    if record.get("status", "ok") != "ok":
        problem = f"retrieval {record['status']} for this question; rerun moot retrieve"
        raise InputError(path, problem, f"id {record['id']}")
    documents, ids = _documents(path, where, record, "chunks", lambda title: bool(title))
    return Retrieved(str(record["id"]), str(record.get("question", "")), documents, ids)


def _berds_retrieved(path: Path, where: str, record: dict[str, Any]) -> Retrieved:
    question = record.get("question")
    question = question if isinstance(question, str) else ""
    default = stable_id("question", question) if question.strip() else where
    perspectives = read_perspectives(path, where, record)
    documents, ids = _documents(path, where, record, "ctxs", lambda title: title is not None)
    return Retrieved(question_id(record, default), question, documents, ids, perspectives or None)


def _documents(
    path: Path, where: str, record: dict[str, Any], field: str, titled: Any
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ranked documents of `field` and their ids; `titled(title)` says when to append it."""
    docs = record[field]
    if not isinstance(docs, list):
        raise InputError(path, f"'{field}' must be a list", where)
    documents, ids = [], []
    for rank, doc in enumerate(docs):
        text = doc.get("text") if isinstance(doc, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise InputError(path, f"{field[:-1]} {rank} has no text", where)
        title = doc.get("title")
        if title is not None and not isinstance(title, str):
            raise InputError(path, f"{field[:-1]} {rank}: 'title' must be a string", where)
        documents.append(f"{text} {title}" if titled(title) else text)
        ids.append(str(doc.get("id", rank)))
    return tuple(documents), tuple(ids)


def join_perspectives(
    retrieved: Sequence[Retrieved],
    retrieved_path: Path,
    questions: Sequence[Question] | None,
    questions_path: Path | None,
    k: int,
) -> list[BerdsInstance]:
    """Pair each retrieved question with its gold perspectives, checking k.

    A record's own perspectives (BERDS' layout) are used as they are; the others are joined by
    id with `questions`.

    Raises:
        InputError: A retrieved question with no perspectives, or fewer than k documents.
    """
    by_id = {q.id: q for q in questions or ()}
    instances = []
    for item in retrieved:
        perspectives, text = item.perspectives, item.question
        if perspectives is None:
            question = by_id.get(item.id)
            if question is None or not question.perspectives:
                where = f"in {questions_path}" if questions_path else "and no --perspectives"
                raise InputError(retrieved_path, f"no perspectives {where}", f"id {item.id}")
            perspectives, text = question.perspectives, question.text
        if len(item.documents) < k:
            problem = f"{len(item.documents)} documents retrieved, fewer than -k {k}"
            raise InputError(retrieved_path, problem, f"id {item.id}")
        instances.append(
            BerdsInstance(item.id, text, item.documents[:k], item.chunk_ids[:k], perspectives)
        )
    return instances


def load_pairs(path: Path) -> list[DetectorPair]:
    """Read a BERDS detector TSV (header ``question id document perspective label``, label 0/1).

    Raises:
        InputError: A wrong header, a row without 5 fields, an empty document or perspective,
            or a label other than 0 or 1 (named by line).
    """
    reader = csv.reader(io.StringIO(read_input_text(path)), delimiter="\t")
    header = next(reader)
    if tuple(h.strip().lower() for h in header) != TSV_COLUMNS:
        raise InputError(path, f"expected the header {' '.join(TSV_COLUMNS)}", "line 1")
    pairs = []
    for row in reader:
        where = f"line {reader.line_num}"
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(TSV_COLUMNS):
            raise InputError(path, f"expected 5 tab-separated fields, got {len(row)}", where)
        question, pair_id, document, perspective, label = row
        if not document.strip() or not perspective.strip():
            raise InputError(path, "empty document or perspective", where)
        if label.strip() not in ("0", "1"):
            raise InputError(path, f"label must be 0 or 1, got {label!r}", where)
        pairs.append(DetectorPair(pair_id, question, document, perspective, int(label)))
    if not pairs:
        raise InputError(path, "no rows")
    return pairs


async def evaluate_berds(
    instances: Sequence[BerdsInstance],
    judging: Judging,
    *,
    k: int,
    prompt: str = "zero-shot",
) -> EvalResult:
    """BERDS MRecall@k and Precision@k, judging each (top-k document, perspective) pair.

    Per-question scores go to ``scores.jsonl``; questions with an unparsed detection are
    counted apart (``parse_failures``), questions with a failed call as ``incomplete``.

    Args:
        instances: Questions with their top-k documents and perspectives (`join_perspectives`).
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.
        k: The cutoff; every instance holds at least k documents.
        prompt: The detector prompt, a key of `DETECTION_PROMPTS` (BERDS Table 15).

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    identity, claim, items, texts, grid = _berds_items(
        instances, judging.role, k, judging.seed, prompt
    )

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        document, perspective = texts[item["id"]]
        judged = await detect_perspective(
            judging.client, judging.role, document, perspective, seed=judging.seed, prompt=prompt
        )
        return {**item, "status": "ok", "judgment": judged.to_json()}

    run = await judging.run(items, task, claim, unit="detections")
    records = run.records
    by_id = {r["id"]: r for r in records}
    complete = {
        qid: [[_label(by_id[i]) for i in row] for row in rows]
        for qid, rows in grid.items()
        if all(by_id[i]["status"] == "ok" for row in rows for i in row)
    }
    scores = berds_summary(complete, k)
    per_question = scores.pop("per_question")
    write_jsonl(
        Path(judging.out_dir) / "scores.jsonl",
        [
            {
                "id": inst.id,
                "question": inst.question,
                **per_question.get(inst.id, {"mrecall": None, "precision": None}),
                "incomplete": inst.id not in complete,
                "supported": [_covered(row) for row in complete.get(inst.id, [])],
                # what was judged, for `moot view`: the gold perspectives, the top-k documents
                "perspectives": list(inst.perspectives),
                "documents": [
                    {"id": chunk, "text": text}
                    for chunk, text in zip(inst.chunk_ids[:k], inst.documents[:k], strict=True)
                ],
            }
            for inst in instances
        ],
    )
    summary = {
        "evaluation": "berds",
        **identity,
        "detector_prompt": prompt,
        **scores,
        "questions": len(instances),
        "incomplete": len(instances) - len(complete),
        "detections": len(records),
        "detection_parse_failures": sum(
            1 for r in records if r["status"] == "ok" and not r["judgment"]["ok"]
        ),
        **outcome_counts(records),
        "ledger": judging.client.ledger.to_json(),
    }
    return EvalResult(records, summary, [run.tally])


async def evaluate_detector(
    pairs: Sequence[DetectorPair],
    judging: Judging,
    *,
    prompt: str = "zero-shot",
) -> EvalResult:
    """Score a perspective detector on labelled pairs: accuracy and F1 (positive = Yes).

    Args:
        pairs: Labelled pairs (`load_pairs`).
        judging: The judge, its output folder (``judgments.jsonl``, claimed for the
            judge and its settings) and how the run goes.
        prompt: The detector prompt, a key of `DETECTION_PROMPTS` (BERDS Table 15).

    Raises:
        ConfigError: The output folder holds a run with other settings.
    """
    identity, claim, items, texts = _detector_items(pairs, judging.role, judging.seed, prompt)
    ids = [item["id"] for item in items]

    async def task(item: dict[str, Any]) -> dict[str, Any]:
        judged = await detect_perspective(
            judging.client, judging.role, *texts[item["id"]], seed=judging.seed, prompt=prompt
        )
        return {**item, "status": "ok", "judgment": judged.to_json()}

    run = await judging.run(items, task, claim, unit="pairs")
    records = run.records
    by_id = {r["id"]: r for r in records}
    done = [(p.label, by_id[i]) for i, p in zip(ids, pairs, strict=True)]
    scores = detector_scores([(label, _label(r)) for label, r in done if r["status"] == "ok"])
    summary = {
        "evaluation": "detector",
        **identity,
        "detector_prompt": prompt,
        **scores,
        "pairs": len(pairs),
        **outcome_counts(records),
        "ledger": judging.client.ledger.to_json(),
    }
    return EvalResult(records, summary, [run.tally])


def _covered(row: Sequence[int | None]) -> bool | None:
    """Whether some document supports the perspective; None when unparsed detections decide."""
    return True if 1 in row else None if None in row else False


def _label(record: Mapping[str, Any]) -> int | None:
    return record["judgment"]["label"] if record["judgment"]["ok"] else None


def _berds_items(
    instances: Sequence[BerdsInstance], role: Role, k: int, seed: int, prompt: str
) -> tuple[dict, dict, list[dict[str, Any]], dict[str, tuple[str, str]], dict[str, list]]:
    """The identity, claim, items (question x top-k document x perspective), texts and grid.

    The grid maps a question id to ``[perspective][rank]`` -> item id; texts map an item id to
    its (document, perspective).
    """
    identity = judge_identity(role, DETECTION_PROMPTS[prompt], seed=seed)
    texts: dict[str, tuple[str, str]] = {}
    grid: dict[str, list[list[str]]] = {}
    items = []
    for inst in instances:
        grid[inst.id] = []
        for p_index, perspective in enumerate(inst.perspectives):
            row = []
            for rank, document in enumerate(inst.documents[:k]):
                item_id = stable_id("berds", identity, inst.id, document, perspective)
                texts[item_id] = (document, perspective)
                items.append(
                    {
                        "id": item_id,
                        "question_id": inst.id,
                        "chunk_id": inst.chunk_ids[rank],
                        "rank": rank,
                        "perspective_index": p_index,
                    }
                )
                row.append(item_id)
            grid[inst.id].append(row)
    return identity, {"evaluation": "berds", **identity, "k": k}, items, texts, grid


def _detector_items(
    pairs: Sequence[DetectorPair], role: Role, seed: int, prompt: str
) -> tuple[dict, dict, list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """The identity, the claim, one item per pair, and each item's (document, perspective)."""
    identity = judge_identity(role, DETECTION_PROMPTS[prompt], seed=seed)
    ids = [stable_id("detector", identity, p.document, p.perspective) for p in pairs]
    texts = {i: (p.document, p.perspective) for i, p in zip(ids, pairs, strict=True)}
    items = [
        {"id": i, "pair_id": p.id, "label": p.label, "question": p.question,
         "document": p.document, "perspective": p.perspective}
        for i, p in zip(ids, pairs, strict=True)
    ]  # fmt: skip
    return identity, {"evaluation": "detector", **identity}, items, texts
