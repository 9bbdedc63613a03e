"""Mixing SFT datasets into one train/eval dataset (``moot data mix``).

Each input is read with `read_sft_rows` (its ``train`` split). Rows are deduplicated on their
messages, whitespace collapsed and case kept: the first occurrence in input order wins. A weight
then scales each input: its integer part is how many times every row is repeated, its fraction a
seeded sample of the rows that get one more copy (1 = all rows, 0.5 = a seeded half, 2 = every row
twice, 1.5 = every row once and a seeded half twice). Finally each row goes to ``eval`` when a
seeded hash of its id falls below the eval fraction: the split depends on nothing else, so adding
data never moves a row between splits, and every copy of a row lands in the same split.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.records import (
    atomic_replace_dir,
    check_out_dir,
    package_versions,
    write_json,
    write_jsonl,
)
from moot.core.errors import ConfigError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.tables import render_table
from moot.training.dataset_folder import save_splits
from moot.training.defaults import DEFAULT_EVAL_FRACTION
from moot.training.sft_data import read_sft_rows, sft_features, source_digest

KIND = "mix"


@dataclass
class MixSummary:
    """What `mix_datasets` wrote.

    Attributes:
        out_dir: The output folder.
        sources: Per input, in order: ``{source, sha256, rows_sha256, weight, rows, duplicates,
            train, eval}`` (``rows``: rows read; ``train``/``eval``: rows written, copies counted).
        train: Rows in the train split.
        eval: Rows in the eval split (0, and no split, when the eval fraction is 0).
        duplicates: Rows dropped as repeats of an earlier row.
    """

    out_dir: Path
    sources: list[dict[str, Any]] = field(default_factory=list)
    train: int = 0
    eval: int = 0
    duplicates: int = 0

    def table(self, markdown: bool = False) -> str:
        """A table of rows read, dropped and written per input: plain text, or Markdown."""
        header = ("source", "weight", "rows", "duplicates", "train", "eval")
        rows = [header] + [
            (s["source"], f"{s['weight']:g}", *(str(s[k]) for k in header[2:]))
            for s in self.sources
        ]
        return render_table(rows, markdown=markdown)


def unit_hash(*parts: object) -> float:
    """A number in [0, 1) from a seeded SHA-256 of `parts` (stable across runs and machines)."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_eval(record_id: str, seed: int, eval_fraction: float) -> bool:
    """Whether the row with `record_id` belongs to the eval split."""
    return unit_hash(seed, "split", record_id) < eval_fraction


def mix_datasets(
    sources: Sequence[str | Path],
    out: str | Path,
    *,
    weights: Sequence[float] | None = None,
    eval_fraction: float = DEFAULT_EVAL_FRACTION,
    seed: int = 0,
) -> MixSummary:
    """Combine SFT datasets, deduplicated, weighted and split, and write them to `out`.

    Writes `out` as a whole, atomically (built in a temporary sibling, then swapped in):
    ``dataset/`` (a DatasetDict with ``train`` and, unless `eval_fraction` is 0, ``eval``),
    ``train.jsonl``, ``eval.jsonl`` (likewise), ``manifest.json`` and ``README.md``. The same
    inputs and options give byte-identical files.

    Args:
        sources: Anything `read_sft_rows` reads, one per input.
        out: The output folder: new, empty, or an earlier ``moot data mix`` output.
        weights: One weight > 0 per input (default all 1; see the module docstring).
        eval_fraction: The expected share of rows in ``eval``, in [0, 1); 0 writes no eval split.
        seed: Seeds the weight sampling and the split.

    Raises:
        ConfigError: Bad weights or eval fraction, an unusable `out`, or an empty train split.
        InputError: An input that `read_sft_rows` rejects.
    """
    weights = [1.0] * len(sources) if weights is None else [float(w) for w in weights]
    if not sources:
        raise ConfigError("no inputs to mix")
    if len(weights) != len(sources):
        raise ConfigError(f"--weights: got {len(weights)} for {len(sources)} input(s)")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise ConfigError(f"--weights must be numbers above 0, got {' '.join(map(str, weights))}")
    if not 0 <= eval_fraction < 1:  # also rejects nan
        raise ConfigError(f"--eval-fraction must be in [0, 1), got {eval_fraction:g}")
    out = Path(out)
    check_out_dir(out, KIND, sources)
    summary = MixSummary(out)
    seen: set[str] = set()
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    for source, weight in zip(sources, weights, strict=True):
        rows = read_sft_rows(source)
        fresh = []
        for row in rows:
            key = json.dumps([[m["role"], " ".join(m["content"].split())] for m in row["messages"]])
            if key not in seen:
                seen.add(key)
                fresh.append(row)
        counts = {"train": 0, "eval": 0}
        for row, copies in zip(fresh, _copies(fresh, weight, seed), strict=True):
            split = "eval" if is_eval(row["id"], seed, eval_fraction) else "train"
            splits[split] += [row] * copies
            counts[split] += copies
        summary.sources.append(
            {
                "source": str(source),
                "sha256": source_digest(source),
                "rows_sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest(),
                "weight": weight,
                "rows": len(rows),
                "duplicates": len(rows) - len(fresh),
                **counts,
            }
        )
        summary.duplicates += len(rows) - len(fresh)
    summary.train, summary.eval = len(splits["train"]), len(splits["eval"])
    if not splits["train"]:
        raise ConfigError("the train split would be empty: lower --eval-fraction or add data")
    if not splits["eval"]:  # none asked for, or too few rows: the trainer evaluates nothing
        del splits["eval"]
    options = {"weights": weights, "eval_fraction": eval_fraction, "seed": seed}
    atomic_replace_dir(lambda tmp: _write(tmp, splits, summary, options), out)
    return summary


def _copies(rows: list[dict[str, Any]], weight: float, seed: int) -> list[int]:
    """How many times each row goes into the mix under `weight`."""
    whole = math.floor(weight)
    extra = round((weight - whole) * len(rows))
    ranked = sorted(range(len(rows)), key=lambda i: unit_hash(seed, "weight", rows[i]["id"], i))
    chosen = set(ranked[:extra])
    return [whole + (i in chosen) for i in range(len(rows))]


def write_splits(tmp: Path, splits: dict[str, list[dict[str, Any]]], features: Any) -> None:
    """Each split as ``<name>.jsonl`` and all of them as ``dataset/`` (a DatasetDict).

    The table holds the rows' `features` columns; the JSONL files hold the rows whole.
    """
    for name, rows in splits.items():
        write_jsonl(tmp / f"{name}.jsonl", rows)
    save_splits(splits, tmp / "dataset", features)


def _write(
    tmp: Path,
    splits: dict[str, list[dict[str, Any]]],
    summary: MixSummary,
    options: dict[str, Any],
) -> None:
    write_splits(tmp, splits, sft_features())
    manifest = {
        "kind": KIND,
        "inputs": summary.sources,
        **options,
        "counts": {"train": summary.train, "eval": summary.eval, "duplicates": summary.duplicates},
        "versions": package_versions("moot", "datasets"),
        "outputs": {"dataset": "dataset/", **{name: f"{name}.jsonl" for name in splits}},
    }
    write_json(tmp / "manifest.json", manifest)
    write_card(tmp, _card(tmp, summary, options))


def _card(tmp: Path, summary: MixSummary, options: dict[str, Any]) -> Card:
    """The mix's card (`moot.core.hub.cards`), from the folder being built."""
    fraction = options["eval_fraction"]
    splits = {"train": "train.jsonl", **({"eval": "eval.jsonl"} if summary.eval else {})}
    return Card(
        kind="dataset",
        title="SFT data mix",
        summary=(
            f"Chat SFT rows combined by `moot data mix` from {len(summary.sources)} input(s): "
            "deduplicated on their messages (whitespace collapsed, the first occurrence kept), "
            "weighted, and split by a seeded hash of each row's id "
            f"(seed {options['seed']}, eval fraction {fraction:g})."
        ),
        schema="Output folder of `moot data mix`",
        sizes=[
            ("records", summary.train + summary.eval),
            ("train / eval rows", f"{summary.train} / {summary.eval}"),
            ("duplicates dropped", summary.duplicates),
            ("bytes", folder_bytes(tmp)),
        ],
        tags=["sft", "moot-mix"],
        data_files=splits,
        notes=[
            ("Inputs", summary.table(markdown=True)),
            (
                "Train on it",
                "Set `data.train` to this folder in the config of `moot train sft --config "
                "FILE`; without `data.eval`, its `eval` split is used.\n\n"
                f"```yaml\ndata:\n  train: {summary.out_dir}\n```",
            ),
        ],
        inputs=[s["source"] for s in summary.sources],
    )
