"""PanelBench evaluation of `moot judge` outputs against gold verdicts (Debatrix, ACL 2024).

DebateArt (1v1): RMSE × 100 between predicted and gold labels (0 pro wins, 0.5 tie, 1 con wins)
for the final verdict and each dimension, in two modes: ``score`` (the label implied by the
debaters' 1-10 scores, a tie within a margin) and ``direct`` (the judge's named winner), each
computed per run (repeat) and averaged over the runs, as the paper reports "the average
performance" of 3 runs (Sec. 5.1); the final column also by debate length (Figure 5: fewer or
at least 8 speeches, fewer or at least 4,000 tokens). The gold itself is described as in
Table 2: each column's pro/tie/con split and D2G, the RMSE of each dimension's labels against
the final ones, weighted by the debate's vote count (the paper's figures; unweighted beside).
BP: accuracy of the final winner, completion, and which team positions the judge picks.

Every (debate, repeat) item is counted: predicted, parse failures (a score or winner could not be
read), incomplete (over the context window), errors, or unjudged (never judged). Metrics are over
the predicted items only, with those counts beside them; nothing is imputed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from moot.core.charts import NEUTRAL, chart, save_png
from moot.core.data.debates import (
    BP_TEAMS,
    LABELS,
    TIE_MARGINS,
    Debate,
    Debates,
    load_debates,
    score_label,
)
from moot.core.data.records import ResultLog, atomic_write, read_json_file, write_json
from moot.core.errors import InputError
from moot.core.labels import LABELS_FOLDER, label_fields, read_labels, sides
from moot.core.llm.tokens import count_tokens
from moot.core.tables import render_table

MODES = ("score", "direct")
MODE_TITLES = {"score": "Score comparison", "direct": "Direct prediction"}
STATUSES = ("complete", "incomplete", "error")
BASELINES = ("tie", "con", "pro")  # constant predictions, in the paper's order
# Figure 5's buckets (Sec. 6.1: "34 have no fewer than 8 speeches, and 51 contain at least 4,000
# tokens"; the released gold's is_many_round and is_long flags mark exactly these)
MANY_SPEECHES, LONG_TOKENS = 8, 4000
BUCKETS = ("speeches<8", "speeches>=8", "tokens<4000", "tokens>=4000")


class Missing(StrEnum):
    """Why an item has no prediction (the value is its count's key in the summary)."""

    PARSE_FAILURE = "parse_failures"
    INCOMPLETE = "incomplete"
    ERROR = "errors"


UNFINISHED = {"incomplete": Missing.INCOMPLETE, "error": Missing.ERROR}  # by judgment status


def winner_label(debate: Debate, winner: str | None) -> float | None:
    """The label of a named winner (or ``tie``), or None when the winner could not be read."""
    return None if winner is None else debate.label(winner)


def rmse(
    predicted: Sequence[float], gold: Sequence[float], weights: Sequence[float] | None = None
) -> float | None:
    """Root mean squared error × 100 (weighted if `weights`), or None when nothing is compared."""
    if not predicted:
        return None
    weights = weights or [1.0] * len(predicted)
    squares = [w * (p - g) ** 2 for p, g, w in zip(predicted, gold, weights, strict=True)]
    return 100 * math.sqrt(sum(squares) / sum(weights))


def gold_statistics(debates: Sequence[Debate]) -> dict[str, Any] | None:
    """Table 2 of the paper from the gold labels of 1v1 debates.

    Returns:
        ``{"debates", "split": {column: {"pro", "tie", "con"}}, "d2g": {dimension: {"weighted",
        "unweighted", "debates"}}}``, or None without final labels. D2G is the RMSE × 100 of a
        dimension's labels against the final ones over the debates holding both; ``weighted``
        weighs each debate by its ``vote_count`` (the paper's 23.85 / 41.02 / 47.20 come out
        so from the released gold) and is None unless every such debate has votes.
    """
    finals = [d for d in debates if d.format == "1v1" and d.gold.get("final") is not None]
    if not finals:
        return None
    names = list(dict.fromkeys(n for d in finals for n in d.gold.get("dimensions") or {}))
    sides = {label: side for side, label in LABELS.items()}
    split, d2g = {}, {}
    for column in ["final", *names]:
        labelled = [(d, _gold_label(d, column)) for d in finals]
        labelled = [(d, label) for d, label in labelled if label is not None]
        counts = Counter(sides[label] for _, label in labelled)
        split[column] = {side: counts[side] for side in LABELS}
        if column == "final":
            continue
        dims, gold = [label for _, label in labelled], [d.gold["final"] for d, _ in labelled]
        votes = [d.gold.get("vote_count") or 0 for d, _ in labelled]
        d2g[column] = {
            "weighted": rmse(dims, gold, votes) if all(v > 0 for v in votes) else None,
            "unweighted": rmse(dims, gold),
            "debates": len(labelled),
        }
    return {"debates": len(finals), "split": split, "d2g": d2g}


def buckets(debate: Debate) -> tuple[str, str]:
    """The debate's Figure 5 buckets: by number of speeches and by tokens.

    The gold's ``is_long`` flag wins where present (the paper counted ChatGPT's tokens); else
    the speeches are counted with the model layer's tokenizer (cl100k_base, ChatGPT's).
    """
    many = len(debate.speeches) >= MANY_SPEECHES
    long = debate.gold.get("is_long")
    if long is None:
        long = sum(count_tokens(s.content) for s in debate.speeches) >= LONG_TOKENS
    return BUCKETS[1] if many else BUCKETS[0], BUCKETS[3] if long else BUCKETS[2]


def constant_baselines(gold: Sequence[float]) -> dict[str, Any]:
    """RMSE × 100 of always predicting a tie, a con win or a pro win."""
    return {
        "debates": len(gold),
        **{f"always_{name}": rmse([LABELS[name]] * len(gold), gold) for name in BASELINES},
    }


def rmse_summary(
    items: Sequence[tuple[float | Missing, float]],
    unjudged: int = 0,
    runs: Sequence[int] | None = None,
) -> dict[str, Any]:
    """RMSE × 100 over the predicted items, with the count of every other kind of item.

    Args:
        items: (predicted label or why it is missing, gold label) per judged item.
        unjudged: Items never judged.
        runs: The run (repeat) of each item; all one run if not given.

    Returns:
        ``rmse``: the mean over runs of each run's RMSE (the paper's "average performance" of
        its runs; a run without a prediction has no RMSE and is left out); ``rmse_runs``: each
        run's, by run number; ``rmse_pooled``: over all predicted items at once; the counts.
    """
    runs = runs or [0] * len(items)
    predicted = [
        (p, g, r) for (p, g), r in zip(items, runs, strict=True) if not isinstance(p, Missing)
    ]
    missing = Counter(p for p, _ in items if isinstance(p, Missing))
    per_run = {}
    for run in sorted(set(runs)):
        mine = [(p, g) for p, g, r in predicted if r == run]
        per_run[str(run)] = rmse([p for p, _ in mine], [g for _, g in mine])
    measured = [value for value in per_run.values() if value is not None]
    return {
        "rmse": sum(measured) / len(measured) if measured else None,
        "rmse_runs": per_run,
        "rmse_pooled": rmse([p for p, _, _ in predicted], [g for _, g, _ in predicted]),
        "predicted": len(predicted),
        **{reason.value: missing[reason] for reason in Missing},
        "unjudged": unjudged,
    }


def bp_summary(
    items: Sequence[tuple[str | Missing, Sequence[str]]], unjudged: int = 0
) -> dict[str, Any]:
    """Accuracy, completion and the winners' team positions of BP judgments.

    Args:
        items: (predicted winning team or why it is missing, gold winners) per judged item.
        unjudged: Items never judged.

    Returns:
        ``accuracy`` over the predicted items; ``accuracy_all`` over every expected item (missing
        ones count as wrong); ``completion``: complete judgments over expected items; predicted
        ``winners`` per team and the ``closing_share`` (CG or CO) among them; and the counts.
    """
    predicted = [(w, gold) for w, gold in items if not isinstance(w, Missing)]
    missing = Counter(w for w, _ in items if isinstance(w, Missing))
    correct = sum(winner in gold for winner, gold in predicted)
    expected = len(items) + unjudged
    teams = Counter(winner for winner, _ in predicted)
    return {
        "accuracy": _ratio(correct, len(predicted)),
        "accuracy_all": _ratio(correct, expected),
        "completion": _ratio(len(predicted) + missing[Missing.PARSE_FAILURE], expected),
        "expected": expected,
        "predicted": len(predicted),
        **{reason.value: missing[reason] for reason in Missing},
        "unjudged": unjudged,
        "winners": {team: teams[team] for team in BP_TEAMS},
        "closing_share": _ratio(teams["CG"] + teams["CO"], len(predicted)),
    }


def load_judgments(folder: Path, debates: Mapping[str, Debate]) -> list[dict[str, Any]]:
    """The judgments of a `moot judge` output folder, checked against the gold debates.

    A line torn by a crash is skipped (that item counts as unjudged).

    Raises:
        InputError: No judgments.jsonl, no judgments, or a judgment that does not fit the gold.
    """
    path = Path(folder) / "judgments.jsonl"
    if not path.is_file():
        raise InputError(path, "file not found (expected a `moot judge` output folder)")
    records = list(ResultLog(path).load().values())
    if not records:
        raise InputError(path, "no judgments")
    seen: set[tuple[str, int]] = set()
    for record in records:
        _check(path, record, debates)
        key = (record["debate"], record["repeat"])
        if key in seen:
            raise InputError(path, f"two judgments of repeat {key[1]}", f"debate {key[0]!r}")
        seen.add(key)
    return records


def _check(path: Path, record: dict[str, Any], debates: Mapping[str, Debate]) -> None:
    name = record.get("debate")
    where = f"debate {name!r}"
    debate = debates.get(name) if isinstance(name, str) else None
    if debate is None:
        raise InputError(path, "not in the gold file", where)
    if record.get("status") not in STATUSES:
        raise InputError(path, f"unknown status {record.get('status')!r}", where)
    if not isinstance(record.get("repeat"), int) or record["repeat"] < 0:
        raise InputError(
            path, f"repeat must be a number 0 or more, got {record.get('repeat')!r}", where
        )
    sides = [record.get("pro"), record.get("con")]
    if sides != [list(debate.pro), list(debate.con)]:
        gold = [list(debate.pro), list(debate.con)]
        raise InputError(path, f"debaters {sides} differ from the gold file's {gold}", where)
    if record["status"] != "complete":
        return
    dimensions = record.get("dimensions")
    if not isinstance(dimensions, dict):
        raise InputError(path, "a complete judgment without its dimensions", where)
    for verdict in [record.get("final"), *dimensions.values()]:
        if not isinstance(verdict, dict):
            raise InputError(path, "a complete judgment without its verdicts", where)
        if verdict.get("winner") not in (None, "tie", *debate.debaters):
            raise InputError(path, f"unknown winner {verdict['winner']!r}", where)


def evaluate_panelbench(
    prediction_dirs: Sequence[Path],
    gold_path: Path,
    *,
    margins: Mapping[str, float] = TIE_MARGINS,
    labels: Path | None = None,
) -> dict[str, Any]:
    """Evaluate each `moot judge` output folder against PanelBench gold.

    Args:
        prediction_dirs: `moot judge` output folders, one per framework.
        gold_path: Anything `load_debates` accepts, with gold labels.
        margins: Score-comparison tie margin per column (final or dimension); unlisted ones 0.
        labels: A labelled `moot judge` run: its people's labels (`labelled_gold`) are the gold
            in place of the file's, whose debates are then read for what they are.

    Returns:
        ``{"evaluation", "gold", "debates": {"1v1", "bp"}, "tie_margins": {column: margin},
        "baselines": {"debates", "always_tie", "always_con", "always_pro"} | None,
        "gold_statistics": gold_statistics(...), "frameworks": [...]}``; per folder ``{"name",
        "predictions", "judge", "repeats", "judgments", "complete", "incomplete", "errors",
        "debateart", "bp"}`` where ``debateart`` is ``{"columns", "score": {column: cell},
        "direct": {column: cell}, "buckets": {mode: {bucket: cell}}}`` (buckets: the final
        column by `BUCKETS`), a cell is `rmse_summary` plus ``no_gold`` (judged items without
        that gold label), and
        ``bp`` is `bp_summary` plus ``no_gold``; each is None when the gold has no such debates;
        ``labels``: the labelled run, or None.

    Raises:
        InputError: Unreadable gold or predictions, a prediction for a debate not in the gold,
            or labels `labelled_gold` refuses or for a debate not in the gold file.
    """
    debates = load_debates(gold_path)
    if labels is not None:
        gold = labelled_gold(labels)
        unknown = sorted(set(gold) - {debate.id for debate in debates})
        if unknown:
            raise InputError(labels, f"labels a debate {gold_path} does not hold: {unknown[0]!r}")
        debates = Debates(replace(d, gold=gold.get(d.id, {})) for d in debates)
    by_id = {debate.id: debate for debate in debates}
    duels = [d for d in debates if d.format == "1v1"]
    dimensions = list(dict.fromkeys(n for d in duels for n in d.gold.get("dimensions") or {}))
    finals = [d.gold["final"] for d in duels if d.gold.get("final") is not None]
    frameworks = []
    for folder in map(Path, prediction_dirs):
        records = load_judgments(folder, by_id)
        frameworks.append(_evaluate_folder(folder, records, debates, dimensions, margins))
    names = Counter(f["name"] for f in frameworks)
    for framework in frameworks:  # tell apart two runs of one framework
        if names[framework["name"]] > 1:
            framework["name"] += f" ({Path(framework['predictions']).name})"
    return {
        "evaluation": "panelbench",
        "gold": str(gold_path),
        "labels": None if labels is None else str(labels),
        "debates": {"1v1": len(duels), "bp": len(debates) - len(duels)},
        "tie_margins": {c: margins.get(c, 0.0) for c in ["final", *dimensions]},
        "baselines": constant_baselines(finals) if finals else None,
        "gold_statistics": gold_statistics(duels),
        "frameworks": frameworks,
    }


def labelled_gold(run: Path) -> dict[str, dict[str, Any]]:
    """The gold of the debates people labelled in a `moot judge` run (``RUN/labels``).

    Per debate, the final label (``winner``) and each dimension's (``score:<dimension>``): the
    mean of its labels on PanelBench's scale (a 1v1 winner by their side), below 0.5 the pro
    side, above it the con side, else a tie, as DebateArt's votes decide a winner; its
    ``vote_count`` the labellers. A BP debate's ``winners``: the teams named most.

    Raises:
        InputError: No judgments, no labels folder, or a label that is none of the run's.
    """
    path = Path(run) / "judgments.jsonl"
    if not path.is_file():
        raise InputError(path, "file not found (expected a labelled `moot judge` run)")
    records = ResultLog(path).load()
    summary_path = Path(run) / "summary.json"
    summary = read_json_file(summary_path) if summary_path.is_file() else {}
    fields = {i: label_fields("judge", r, summary or {}) for i, r in records.items()}
    votes: dict[str, dict[str, list[Any]]] = {}
    labellers: dict[str, set[str]] = {}
    for label in read_labels(Path(run) / LABELS_FOLDER, fields):
        record, value = records[label["item"]], label["value"]
        column = "final" if label["field"] == "winner" else label["field"].removeprefix("score:")
        if column == "final" and record.get("format") != "bp":
            value = sides(record).label(value)
        votes.setdefault(record["debate"], {}).setdefault(column, []).append(value)
        labellers.setdefault(record["debate"], set()).add(label["labeller"])
    gold: dict[str, dict[str, Any]] = {}
    for debate, columns in votes.items():
        entry: dict[str, Any] = {"vote_count": len(labellers[debate])}
        for column, values in columns.items():
            if isinstance(values[0], str):  # BP teams
                counts = Counter(values)
                entry["winners"] = [t for t in BP_TEAMS if counts[t] == max(counts.values())]
                continue
            mean = sum(values) / len(values)
            side = "pro" if mean < LABELS["tie"] else "con" if mean > LABELS["tie"] else "tie"
            if column == "final":
                entry["final"] = LABELS[side]
            else:
                entry.setdefault("dimensions", {})[column] = LABELS[side]
        gold[debate] = entry
    return gold


def _evaluate_folder(
    folder: Path,
    records: list[dict[str, Any]],
    debates: Sequence[Debate],
    dimensions: Sequence[str],
    margins: Mapping[str, float],
) -> dict[str, Any]:
    repeats = max(r["repeat"] for r in records) + 1
    statuses = Counter(r["status"] for r in records)
    result: dict[str, Any] = {
        "name": records[0].get("framework") or folder.name,
        "predictions": str(folder),
        "judge": records[0].get("judge"),
        "repeats": repeats,
        "judgments": len(records),
        "complete": statuses["complete"],
        "incomplete": statuses["incomplete"],
        "errors": statuses["error"],
        "debateart": None,
        "bp": None,
    }
    duels = [d for d in debates if d.format == "1v1"]
    if duels:
        result["debateart"] = _debateart(records, duels, dimensions, margins, repeats)
    parliaments = [d for d in debates if d.format == "bp"]
    if parliaments:
        result["bp"] = _bp(records, parliaments, repeats)
    return result


def _debateart(
    records: list[dict[str, Any]],
    debates: Sequence[Debate],
    dimensions: Sequence[str],
    margins: Mapping[str, float],
    repeats: int,
) -> dict[str, Any]:
    by_id = {debate.id: debate for debate in debates}
    mine = [r for r in records if r["debate"] in by_id]
    present = {name for r in mine if r["status"] == "complete" for name in r["dimensions"]}
    columns = ["final", *(name for name in dimensions if name in present)]
    result: dict[str, Any] = {"columns": columns, **{mode: {} for mode in MODES}}
    for column in columns:
        gold = {d.id: label for d in debates if (label := _gold_label(d, column)) is not None}
        for mode in MODES:
            result[mode][column] = _cell(mine, by_id, gold, column, mode, margins, repeats)
    finals = {d.id: d.gold["final"] for d in debates if d.gold.get("final") is not None}
    where = {d.id: buckets(d) for d in debates if d.id in finals}
    result["buckets"] = {
        mode: {
            bucket: _cell(
                [r for r in mine if bucket in where.get(r["debate"], ())],
                by_id,
                {i: label for i, label in finals.items() if bucket in where[i]},
                "final",
                mode,
                margins,
                repeats,
            )
            for bucket in BUCKETS
        }
        for mode in MODES
    }
    return result


def _cell(
    records: list[dict[str, Any]],
    by_id: Mapping[str, Debate],
    gold: Mapping[str, float],
    column: str,
    mode: str,
    margins: Mapping[str, float],
    repeats: int,
) -> dict[str, Any]:
    """`rmse_summary` of one column and mode over `records`, run by run."""
    judged = Counter(r["debate"] for r in records)
    unjudged = sum(repeats - judged[debate_id] for debate_id in gold)
    labelled = [r for r in records if r["debate"] in gold]
    items = [
        (_prediction(r, by_id[r["debate"]], column, mode, margins), gold[r["debate"]])
        for r in labelled
    ]
    summary = rmse_summary(items, unjudged, runs=[r["repeat"] for r in labelled])
    return {**summary, "no_gold": len(records) - len(labelled)}


def _gold_label(debate: Debate, column: str) -> float | None:
    if column == "final":
        return debate.gold.get("final")
    return (debate.gold.get("dimensions") or {}).get(column)


def _prediction(
    record: dict[str, Any], debate: Debate, column: str, mode: str, margins: Mapping[str, float]
) -> float | Missing:
    if record["status"] != "complete":
        return UNFINISHED[record["status"]]
    verdict = record["final"] if column == "final" else record["dimensions"].get(column)
    if verdict is None:
        return Missing.PARSE_FAILURE  # this judgment has no verdict on the column
    if mode == "score":
        label = score_label(debate, verdict.get("debaters") or {}, margins.get(column, 0.0))
    else:
        label = winner_label(debate, verdict.get("winner"))
    return Missing.PARSE_FAILURE if label is None else label


def _bp(records: list[dict[str, Any]], debates: Sequence[Debate], repeats: int) -> dict[str, Any]:
    gold = {d.id: d.gold["winners"] for d in debates if d.gold.get("winners")}
    names = {d.id for d in debates}
    mine = [r for r in records if r["debate"] in names]
    judged = Counter(r["debate"] for r in mine)
    items: list[tuple[str | Missing, Sequence[str]]] = []
    for record in mine:
        if record["debate"] not in gold:
            continue
        winner = UNFINISHED.get(record["status"]) or record["final"].get("winner")
        items.append((winner or Missing.PARSE_FAILURE, gold[record["debate"]]))
    unjudged = sum(repeats - judged[debate_id] for debate_id in gold)
    summary = {**bp_summary(items, unjudged), "no_gold": len(mine) - len(items)}
    return {**summary, "gold_winners": gold_winners(gold.values(), repeats)}


def gold_winners(golds: Iterable[Sequence[str]], repeats: int) -> dict[str, float]:
    """Table 7's Gold row: how often each team is expected to win over `repeats` runs.

    It is "the expectation number each debater is chosen if we select one of the true winners
    randomly for each trial" (paper, Table 7): a debate with two winners gives each half a win.
    """
    expected = dict.fromkeys(BP_TEAMS, 0.0)
    for winners in golds:
        for team in winners:
            expected[team] += repeats / len(winners)
    return expected


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def write_panelbench_report(summary: dict[str, Any], out_dir: Path) -> None:
    """Write ``summary.json``, ``summary.md`` and ``chart.png`` into `out_dir`."""
    out_dir = Path(out_dir)
    write_json(out_dir / "summary.json", summary)
    markdown = summary_markdown(summary)
    atomic_write(out_dir / "summary.md", lambda f: f.write(markdown))
    _chart(summary, out_dir / "chart.png")


def summary_markdown(summary: dict[str, Any]) -> str:
    """The summary as Markdown tables: DebateArt RMSE per mode, baselines, BP."""
    counts = summary["debates"]
    margins = ", ".join(f"{c} ±{m:g}" for c, m in summary["tie_margins"].items() if m)
    lines = [
        "# PanelBench",
        "",
        f"Gold: {summary['gold']} ({counts['1v1']} 1v1 debates, {counts['bp']} BP debates).",
    ]
    if summary.get("labels"):  # an earlier version's summary has none
        lines[-1] += f" Labels: the people's labels of {summary['labels']}."
    frameworks = summary["frameworks"]
    if counts["1v1"]:
        columns = list(dict.fromkeys(c for f in frameworks for c in f["debateart"]["columns"]))
        lines += [
            "",
            "## DebateArt: RMSE × 100 (lower is better)",
            "",
            "Cells: RMSE × 100 (n predicted items). Items without a prediction are counted, "
            "never imputed: unparsed (a score or winner could not be read), incomplete (over the "
            "context window), errors, unjudged (debate × repeat never judged). Score comparison "
            f"ties within {margins or 'no margin'}; elsewhere only equal scores tie.",
        ]
        for mode in MODES:
            header = ["framework", "judge", *columns, "unparsed", "incomplete", "errors"]
            rows = [[*header, "unjudged"]]
            for framework in frameworks:
                cells = framework["debateart"][mode]
                final = cells["final"]
                unparsed = [
                    f"{c} {v['parse_failures']}" for c, v in cells.items() if v["parse_failures"]
                ]
                rows.append(
                    [
                        framework["name"],
                        str(framework["judge"]),
                        *(_rmse_cell(cells.get(c)) for c in columns),
                        ", ".join(unparsed) or "0",
                        str(final["incomplete"]),
                        str(final["errors"]),
                        str(final["unjudged"]),
                    ]
                )
            lines += ["", f"### {MODE_TITLES[mode]}", "", render_table(rows, left=2, markdown=True)]
        rows = [["mode", "framework", *BUCKETS]]
        for mode in MODES:
            for framework in frameworks:
                cells = framework["debateart"]["buckets"][mode]
                rows.append([mode, framework["name"], *(_rmse_cell(cells[b]) for b in BUCKETS)])
        lines += [
            "",
            "### Final verdict by debate length (Figure 5)",
            "",
            render_table(rows, left=2, markdown=True),
        ]
        stats = summary.get("gold_statistics")
        if stats:
            rows = [["column", *LABELS, "D2G (vote-weighted, paper)", "D2G (unweighted)"]]
            for column, split in stats["split"].items():
                d2g = stats["d2g"].get(column) or {}
                rows.append(
                    [
                        column,
                        *(str(n) for n in split.values()),
                        *(_number(d2g.get(k)) if d2g else "-" for k in ("weighted", "unweighted")),
                    ]
                )
            lines += [
                "",
                f"### Gold winners and D2G (Table 2; {stats['debates']} debates)",
                "",
                "D2G: RMSE × 100 of each dimension's gold labels against the final ones.",
                "",
                render_table(rows, left=1, markdown=True),
            ]
        baselines = summary["baselines"]
        if baselines:
            lines += [
                "",
                f"Constant baselines on the gold final labels ({baselines['debates']} debates): "
                + ", ".join(f"always {n} {_number(baselines[f'always_{n}'])}" for n in BASELINES)
                + ".",
            ]
    if counts["bp"]:
        header = [
            "framework",
            "judge",
            "accuracy",
            "accuracy (missing = wrong; paper)",
            "completion",
        ]
        header += [*BP_TEAMS, "closing share", "unparsed", "incomplete", "errors", "unjudged"]
        rows = [header]
        for framework in frameworks:
            bp = framework["bp"]
            rows.append(
                [
                    framework["name"],
                    str(framework["judge"]),
                    *(_percent(bp[k]) for k in ("accuracy", "accuracy_all", "completion")),
                    *(str(bp["winners"][team]) for team in BP_TEAMS),
                    _percent(bp["closing_share"]),
                    *(str(bp[k]) for k in ("parse_failures", "incomplete", "errors", "unjudged")),
                ]
            )
            gold = bp["gold_winners"]
            rows.append(
                [f"gold (expected, {framework['repeats']} runs)", "", "", "", ""]
                + [f"{gold[team]:g}" for team in BP_TEAMS]
                + [_percent((gold["CG"] + gold["CO"]) / (sum(gold.values()) or 1)), *[""] * 4]
            )
        lines += [
            "",
            "## BP: final winner (any gold winner counts)",
            "",
            "Accuracy over predicted items, and over every debate × repeat with missing ones "
            "counted wrong; completion = complete judgments / (debates × repeats); team columns "
            "count predicted winners; closing share = CG or CO; the gold row is Table 7's: the "
            "expected wins if one true winner is picked at random per run.",
            "",
            render_table(rows, left=2, markdown=True),
        ]
    return "\n".join(lines) + "\n"


def _rmse_cell(cell: dict[str, Any] | None) -> str:
    return "—" if cell is None else f"{_number(cell['rmse'])} ({cell['predicted']})"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _chart(summary: dict[str, Any], path: Path) -> None:
    """RMSE × 100 per column and framework, one panel per mode; BP in a panel of its own."""
    frameworks = summary["frameworks"]
    panels = [
        *(MODES if summary["debates"]["1v1"] else ()),
        *(("bp",) if summary["debates"]["bp"] else ()),
    ]
    with chart(5.5 * len(panels), 4.4, panels=len(panels)) as (fig, axes):
        for ax, panel in zip(axes, panels, strict=True):
            if panel == "bp":
                groups = {"accuracy": "accuracy", "accuracy_all": "missing = wrong"}
                groups["closing_share"] = "closing share"
                values = [[f["bp"][k] for k in groups] for f in frameworks]
                _bars(ax, list(groups.values()), values, frameworks, "%.2f")
                ax.set_ylim(0, 1.1)
                ax.set_ylabel("share of items")
                ax.set_title("BP: final winner")
                continue
            columns = list(dict.fromkeys(c for f in frameworks for c in f["debateart"]["columns"]))
            cells = [f["debateart"][panel] for f in frameworks]
            values = [[(c.get(k) or {}).get("rmse") for k in columns] for c in cells]
            _bars(ax, columns, values, frameworks, "%.1f")
            ax.set_ylim(0, 110)  # labels lie in [0, 1], so RMSE × 100 lies in [0, 100]
            ax.set_ylabel("RMSE × 100 (lower is better)")
            ax.set_title(f"DebateArt: {MODE_TITLES[panel].lower()}")
            for name, style in zip(BASELINES, ("--", ":", "-."), strict=True):
                if summary["baselines"]:  # reference lines across the final column
                    value = summary["baselines"][f"always_{name}"]
                    label = f"always {name} ({value:.1f})"
                    ax.hlines(value, -0.45, 0.45, NEUTRAL, style, label=label, zorder=3)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False)
        fig.tight_layout(rect=(0, 0.14, 1, 1))
        save_png(fig, path)


def _bars(
    ax: Any,
    groups: Sequence[str],
    values: Sequence[Sequence[float | None]],
    frameworks: list,
    fmt: str,
) -> None:
    """One bar per framework in each group, labelled with its value; none where n/a."""
    width = 0.8 / len(frameworks)
    for i, (framework, row) in enumerate(zip(frameworks, values, strict=True)):
        shown = [(x, v) for x, v in enumerate(row) if v is not None]
        xs = [x - 0.4 + width * (i + 0.5) for x, _ in shown]
        bars = ax.bar(xs, [v for _, v in shown], width, label=framework["name"])
        ax.bar_label(bars, fmt=fmt, fontsize=7)
    ax.set_xticks(range(len(groups)), groups)
