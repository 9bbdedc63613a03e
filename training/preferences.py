"""`moot data preferences`: judged run folders into one preference dataset, trl's format.

Each input is a folder a moot evaluation wrote; its command says which source it is
(`moot.training.preference_data`): `moot eval quality` (its responses and baseline read from the
files its ``summary.json`` names), `moot eval controllability` (all such inputs together: their
responses to one instruction are compared across runs), `moot eval compqa` (its judged answers,
paired over one question by their 0-19 totals). Pairs are deduplicated (the same prompt and
answers from two inputs are one), split by a seeded hash of their id as `moot data mix` splits
rows, and written as a whole, atomically: ``train.jsonl``, ``eval.jsonl``, ``dataset/`` (a
DatasetDict), ``manifest.json`` and a card. The same inputs and options give byte-identical
files; a rerun rebuilds them (nothing is paid for).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.compqa import load_judged
from moot.core.data.folders import owners
from moot.core.data.records import (
    ResultLog,
    atomic_replace_dir,
    check_out_dir,
    package_versions,
    read_json_file,
    write_json,
)
from moot.core.data.responses import Response, load_responses
from moot.core.errors import ConfigError, InputError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.tables import render_table
from moot.training.compqa_data import question
from moot.training.mixing import is_eval, write_splits
from moot.training.preference_data import (
    Built,
    Pair,
    Scored,
    controllability_pairs,
    prompt_of,
    quality_pairs,
    scored_pairs,
)

KIND = "preferences"
#: The least score margin of a CompQA pair (points of its 0-19 total), unless told otherwise.
DEFAULT_MIN_MARGIN = 2.0
#: The commands whose folders are read, by the name each registers.
SOURCES = {
    "moot eval quality": "quality",
    "moot eval controllability": "controllability",
    "moot eval compqa": "scores",
}


@dataclass
class PreferenceSummary:
    """What `build_preferences` wrote: counts per input and source, and why pairs were dropped."""

    out_dir: Path
    inputs: list[dict[str, Any]] = field(default_factory=list)
    pairs: Counter[str] = field(default_factory=Counter)  # kept, by source
    dropped: Counter[str] = field(default_factory=Counter)  # by "source: why"
    duplicates: int = 0
    train: int = 0
    eval: int = 0

    def table(self, markdown: bool = False) -> str:
        """Pairs kept per source and dropped by why: plain text, or Markdown."""
        rows = [("source", "pairs", "dropped")]
        for source in sorted({*self.pairs, *(k.split(":")[0] for k in self.dropped)}):
            lost = sum(n for k, n in self.dropped.items() if k.startswith(f"{source}:"))
            rows.append((source, str(self.pairs[source]), str(lost)))
        rows += [(f"  {why}", "", str(n)) for why, n in sorted(self.dropped.items())]
        return render_table(rows, markdown=markdown)


def build_preferences(
    sources: Sequence[str | Path],
    out: str | Path,
    *,
    min_margin: float = DEFAULT_MIN_MARGIN,
    eval_fraction: float = 0.05,
    seed: int = 0,
) -> PreferenceSummary:
    """Read judged run folders, build their pairs and write the dataset to `out`.

    Args:
        sources: Folders of `moot eval quality`, `controllability` or `compqa`.
        out: The output folder: new, empty, or an earlier ``moot data preferences`` output.
        min_margin: The least score difference of a scored pair (CompQA's 0-19 totals).
        eval_fraction: The expected share of pairs in ``eval``, in [0, 1); 0: no eval split.
        seed: Seeds the split.

    Raises:
        ConfigError: A bad option, an unusable `out`, or no pair at all.
        InputError: An input that is not such a folder, or whose files cannot be read.
    """
    if not sources:
        raise ConfigError("no judged runs to read")
    if not 0 <= eval_fraction < 1:
        raise ConfigError(f"--eval-fraction must be in [0, 1), got {eval_fraction:g}")
    if not min_margin > 0:
        raise ConfigError(f"--min-margin must be above 0, got {min_margin:g}")
    out = Path(out)
    check_out_dir(out, KIND, sources)
    summary = PreferenceSummary(out)
    built: list[Built] = []
    control: list[tuple[list[dict[str, Any]], list[Response]]] = []
    for source in map(Path, sources):
        kind = next(
            (SOURCES[command] for command in owners(source) or () if command in SOURCES), None
        )
        if kind is None:
            raise InputError(source, "not a folder of moot eval quality, controllability or compqa")
        summary.inputs.append({"source": str(source), "kind": kind})
        if kind == "quality":
            responses, baseline = _judged_responses(source, "responses", "baseline")
            built.append(quality_pairs(_judgments(source), responses, baseline))
        elif kind == "controllability":
            (responses,) = _judged_responses(source, "responses")
            control.append((_judgments(source), responses))
        else:
            built.append(scored_pairs(_compqa_answers(source), min_margin))
    if control:
        built.append(controllability_pairs(control))
    pairs = _unique(built, summary)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    for pair in pairs:
        splits["eval" if is_eval(pair.id, seed, eval_fraction) else "train"].append(pair.to_json())
    summary.train, summary.eval = len(splits["train"]), len(splits["eval"])
    if not splits["train"]:
        raise ConfigError(
            "no preference pair in the train split: "
            + (summary.table() if summary.dropped else "the inputs hold no judgment")
        )
    if not splits["eval"]:  # none asked for, or too few rows: the trainer evaluates nothing
        del splits["eval"]
    options = {"min_margin": min_margin, "eval_fraction": eval_fraction, "seed": seed}
    atomic_replace_dir(lambda tmp: _write(tmp, splits, summary, options), out)
    return summary


def _unique(built: list[Built], summary: PreferenceSummary) -> list[Pair]:
    """Every source's pairs, the first of each id kept; the drops counted by source."""
    seen: set[str] = set()
    pairs = []
    for found in built:
        for why, count in found.dropped.items():
            summary.dropped[f"{found.source}: {why}"] += count
        for pair in found.pairs:
            if pair.id in seen:
                summary.duplicates += 1
                continue
            seen.add(pair.id)
            summary.pairs[pair.source] += 1
            pairs.append(pair)
    return pairs


def _judgments(folder: Path) -> list[dict[str, Any]]:
    return list(ResultLog(folder / "judgments.jsonl").records())


def _judged_responses(folder: Path, *names: str) -> list[list[Response]]:
    """The responses a judged run read, per name, from the files its ``summary.json`` names."""
    path = folder / "summary.json"
    summary = read_json_file(path) if path.is_file() else None
    sources = (summary.get("sources") or {}) if isinstance(summary, dict) else {}
    found = []
    for name in names:
        given = sources.get(name)
        if not isinstance(given, str):
            raise InputError(path, f"names no {name} file (is the run finished?)")
        if not Path(given).is_file():
            raise InputError(path, f"its {name} file {given} is not there (run from its folder)")
        found.append(load_responses(given))
    return found


def _compqa_answers(folder: Path) -> list[Scored]:
    """A `moot eval compqa` folder's judged answers, each with its question and 0-19 total."""
    answers = []
    for path in sorted((folder / "judged").iterdir()):
        for judged in load_judged(path):
            answer = judged.answer
            asked = prompt_of(question(answer.object1, answer.object2, answer.aspect))
            total = judged.total if judged.status == "ok" else None
            answers.append(Scored(asked, answer.text, total, answer.generator or path.name))
    return answers


def _write(
    tmp: Path,
    splits: dict[str, list[dict[str, Any]]],
    summary: PreferenceSummary,
    options: dict[str, Any],
) -> None:
    import datasets

    string = datasets.Value("string")
    messages = datasets.List({"role": string, "content": string})
    turns = dict.fromkeys(("prompt", "chosen", "rejected"), messages)
    write_splits(tmp, splits, datasets.Features({"id": string, "source": string, **turns}))
    manifest = {
        "kind": KIND,
        "inputs": summary.inputs,
        **options,
        "counts": {
            "train": summary.train,
            "eval": summary.eval,
            "pairs": dict(sorted(summary.pairs.items())),
            "duplicates": summary.duplicates,
            "dropped": dict(sorted(summary.dropped.items())),
        },
        "versions": package_versions("moot", "datasets"),
        "outputs": {"dataset": "dataset/", **{name: f"{name}.jsonl" for name in splits}},
    }
    write_json(tmp / "manifest.json", manifest)
    write_card(tmp, _card(tmp, summary, options, list(splits)))


def _card(tmp: Path, summary: PreferenceSummary, options: dict[str, Any], names: list[str]) -> Card:
    """The dataset's card (`moot.core.hub.cards`): sources, counts, and what was dropped and why."""
    return Card(
        kind="dataset",
        title="Preference pairs",
        summary=(
            "Preference pairs in trl's conversational format (`prompt`, `chosen`, `rejected` as "
            f"chat messages), built by `moot data preferences` from {len(summary.inputs)} judged "
            "run(s): pairwise quality judgments whose two orders agree, controllability verdicts "
            "(a response judged 100% on its side over one that is not), CompQA totals at least "
            f"{options['min_margin']:g} apart; deduplicated, split by a seeded hash of each "
            f"pair's id (seed {options['seed']}, eval fraction {options['eval_fraction']:g})."
        ),
        schema="Output folder of `moot data preferences`",
        sizes=[
            ("records", summary.train + summary.eval),
            ("train / eval", f"{summary.train} / {summary.eval}"),
            ("duplicates dropped", summary.duplicates),
            ("bytes", folder_bytes(tmp)),
        ],
        tags=["preferences", "dpo", "moot-preferences"],
        data_files={name: f"{name}.jsonl" for name in names},
        notes=[("Sources", summary.table(markdown=True))],
        inputs=[s["source"] for s in summary.inputs],
    )
