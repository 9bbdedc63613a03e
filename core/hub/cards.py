"""The card of every dataset and model moot saves: ``README.md`` with Hub metadata, written always.

One `Card` holds what a command knows about its artifact; `render_card` turns it into the card
text: YAML front matter from ``huggingface_hub``'s `DatasetCardData` / `ModelCardData` (licence,
tags, task categories, size categories, ``base_model`` and ``datasets`` for models, ``configs``
naming the data files), then a body in fixed sections (what made it, the schema, sizes, the
ledger, the licence). `write_card` writes it atomically beside the artifact, so a rerun rewrites
it and a reader never sees half of one. The command line shown has every secret of the
environment and every credential in a URL taken out.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from moot.core.data.records import atomic_write, package_versions
from moot.core.redaction import scrub
from moot.core.tables import render_table

#: Where moot's file formats are described (a card points at its section).
SCHEMAS = "docs/schemas.md"

#: The papers moot's data comes from: who wrote it, where its release is, what licence it states.
PAPERS = {
    "debatune": (
        "DEBATunE: Li et al., Can LLMs Speak For Diverse People? Tuning LLMs via Debate to "
        "Generate Controllable Controversial Statements, ACL 2024",
        "github.com/tianyi-lab/DEBATunE",
        None,
    ),
    "compqa": (
        "CompQA: Nikishina et al., Argument-Based Comparative Question Answering Evaluation "
        "Benchmark, 2025",
        "github.com/lilaspourpre/cqa-evaluation-framework",
        None,
    ),
    "debatrix": (
        "Debatrix: Liang et al., Multi-dimensional Debate Judge with Iterative Chronological "
        "Analysis Based on LLM, ACL 2024",
        "github.com/ljcleo/debatrix",
        "mit",
    ),
}

#: The Hub's size categories: the upper bound of each, and its name.
_SIZES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)


@dataclass
class Card:
    """What a command knows about the artifact it saved, for its card.

    Attributes:
        kind: ``dataset`` or ``model``.
        title: The card's heading.
        summary: What the artifact is, in a paragraph (Markdown).
        schema: The section of `SCHEMAS` that describes its files (its heading).
        sizes: Rows of (what, how much): records, splits, bytes, parameters.
        papers: Keys of `PAPERS` whose method or release it derives from.
        prompts: Prompt templates used (``debatune/turn.j2``) with their paper and section.
        overrides: The templates ``--prompts`` replaced, name → digest of the text used.
        models: The models that made it (specs), or the base model of a trained one.
        ledger: The run's `UsageLedger.to_json()`, where model calls made it.
        tags: Hub tags (``moot`` is always added).
        task_categories: Hub task categories of a dataset.
        data_files: Split → file in the folder, for the ``configs`` metadata (datasets).
        base_model: The Hub id of a model's base, if it is one (a local path is not).
        datasets: Hub ids of the datasets a model was trained on.
        library_name: ``peft`` for an adapter, ``transformers`` for a whole model.
        notes: Further Markdown sections (title, text), after the sizes.
        inputs: The datasets or models it was made from (paths or Hub ids); each one's licence
            is read from its own card (`card_licence`), unknown without one.
    """

    kind: Literal["dataset", "model"]
    title: str
    summary: str
    schema: str
    sizes: list[tuple[str, object]]
    papers: Sequence[str] = ()
    prompts: Sequence[tuple[str, str]] = ()
    overrides: Mapping[str, str] = field(default_factory=dict)
    models: Sequence[str] = ()
    ledger: dict[str, Any] | None = None
    tags: Sequence[str] = ()
    task_categories: Sequence[str] = ("text-generation",)
    data_files: dict[str, str] = field(default_factory=dict)
    base_model: str | None = None
    datasets: Sequence[str] = ()
    library_name: str | None = None
    notes: Sequence[tuple[str, str]] = ()
    inputs: Sequence[str | Path] = ()


def size_category(records: int) -> str:
    """The Hub's size category of a dataset of `records` rows (``n<1K``, ``1K<n<10K`` ...)."""
    for bound, name in _SIZES:
        if records < bound:
            return name
    return "n>10M"


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder`, moot's own marks (``.moot/``) left out."""
    return sum(
        p.stat().st_size for p in Path(folder).rglob("*") if p.is_file() and ".moot" not in p.parts
    )


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that is running, as a shell would take it, with its secrets taken out.

    It goes through the one scrubber of records of options (`moot.core.redaction.scrub`): every
    URL without its ``user:password@`` and with its query's values masked, every key moot sends
    and every value of an environment key or token as ``[redacted]``.

    Args:
        argv: The arguments (default: this process's ``sys.argv``, shown as ``moot ...`` when
            it is the moot command).
    """
    if argv is None:
        program = Path(sys.argv[0])
        # the `moot` script, or `python -m moot` (whose argv[0] is moot/__main__.py)
        moot = program.name == "moot" or program.parent.name == "moot"
        argv = ["moot", *sys.argv[1:]] if moot else list(sys.argv)
    return str(scrub(shlex.join(argv)))


def card_licence(source: str | Path) -> str | None:
    """The licence a dataset or model folder's card states (its ``license:``), or None.

    None when `source` is not a folder with a readable card (a JSONL file, a Hub id).
    """
    from huggingface_hub import RepoCard

    path = Path(source) / "README.md"
    if not path.is_file():
        return None
    try:
        found = RepoCard.load(path).data.to_dict().get("license")
    except (OSError, ValueError):
        return None
    return found if isinstance(found, str) else None


def licence(card: Card) -> str:
    """The Hub licence id of `card`'s artifact: MIT only when every paper and input states MIT."""
    stated = [PAPERS[p][2] for p in card.papers] + [card_licence(i) for i in card.inputs]
    return "mit" if stated and set(stated) == {"mit"} else "unknown"


def render_card(card: Card, command: str | None = None) -> str:
    """The card's text: YAML front matter from ``huggingface_hub``'s card data, then its body.

    Args:
        card: What the command knows about the artifact.
        command: The command line shown (default: this process's, `command_line`).
    """
    from huggingface_hub import DatasetCard, DatasetCardData, ModelCard, ModelCardData

    tags = list(dict.fromkeys(["moot", *card.tags]))
    if card.kind == "dataset":
        records = int(dict(card.sizes)["records"])  # every dataset card counts its records
        data: Any = DatasetCardData(
            license=licence(card),
            tags=tags,
            task_categories=list(card.task_categories),
            size_categories=[size_category(records)],
            pretty_name=card.title,
        )
        if card.data_files:
            files = [{"split": s, "path": p} for s, p in card.data_files.items()]
            data.configs = [{"config_name": "default", "data_files": files}]
        made = DatasetCard
    else:
        data = ModelCardData(
            license=licence(card),
            base_model=card.base_model,
            datasets=list(card.datasets) or None,
            library_name=card.library_name,
            pipeline_tag="text-generation",
            tags=tags,
        )
        made = ModelCard
    body = _body(card, command if command is not None else command_line())
    return str(made(f"---\n{data.to_yaml()}\n---\n\n{body}"))


def write_card(folder: Path, card: Card, command: str | None = None) -> Path:
    """Write `card` as ``folder/README.md``, atomically (replacing any earlier card); its path."""
    path = Path(folder) / "README.md"
    text = render_card(card, command)
    atomic_write(path, lambda f: f.write(text))
    return path


def _body(card: Card, command: str) -> str:
    version = package_versions("moot").get("moot", "unknown")
    made = [f"- command: `{command}`", f"- moot {version}"]
    if card.models:
        made.append("- models: " + ", ".join(f"`{m}`" for m in card.models))
    parts = [f"# {card.title}", card.summary.strip(), "## How it was made", "\n".join(made)]
    if card.prompts:
        rows = [("prompt template", "from")] + [(f"`prompts/{t}`", w) for t, w in card.prompts]
        parts.append(render_table(rows, left=2, markdown=True))
    if card.overrides:
        rows = [("overridden template", "SHA-256 of the text used")]
        rows += [(f"`prompts/{t}`", f"`{d}`") for t, d in card.overrides.items()]
        parts += [
            "These templates were replaced by the run's own (`--prompts`): the artifact "
            "deviates from the paper's method.",
            render_table(rows, left=2, markdown=True),
        ]
    parts += [
        "## Schema",
        f"The files and their fields are described in moot's `{SCHEMAS}`, section "
        f'"{card.schema}".',
        "## Size",
        render_table([("what", "how much"), *((w, str(n)) for w, n in card.sizes)], markdown=True),
    ]
    for title, text in card.notes:
        parts += [f"## {title}", text.strip()]
    if card.ledger is not None:
        parts += ["## Model calls", _ledger(card.ledger)]
    parts += ["## Licence", _licence_note(card)]
    return "\n\n".join(parts) + "\n"


def _ledger(ledger: dict[str, Any]) -> str:
    """The ledger's rows and total, as the run's summary table shows them."""
    head = ("role", "stage", "model", "calls", "cached", "prompt tokens", "completion tokens")
    rows: list[tuple[object, ...]] = [head + ("cost $",)]
    for row in [*ledger.get("by_role", []), {"role": "total", **ledger.get("total", {})}]:
        cost = row.get("cost_usd")
        rows.append(
            (
                row.get("role", ""),
                row.get("stage", ""),
                row.get("model", ""),
                row.get("calls", 0),
                row.get("cache_hits", 0),
                row.get("prompt_tokens", 0),
                row.get("completion_tokens", 0),
                "unpriced" if cost is None else f"{cost:.4f}",
            )
        )
    return render_table(rows, left=3, markdown=True)


def _licence_note(card: Card) -> str:
    lines = []
    for key in card.papers:
        paper, release, stated = PAPERS[key]
        said = f"states the {stated.upper()} licence" if stated else "states no licence"
        lines.append(f"- {paper}; its release ({release}) {said}.")
    for source in card.inputs:
        stated = card_licence(source)
        said = f"`{stated}`, by its card" if stated else "not known (no moot card)"
        lines.append(f"- `{source}`: licence {said}.")
    chosen = licence(card)
    if chosen == "unknown":
        verdict = (
            "The licence here is `unknown`: treat it as third-party research data, and check the "
            "terms of the models that wrote any generated text before you redistribute it."
        )
    else:
        verdict = f"The licence here is `{chosen}`."
    if not lines:
        return verdict
    return "It derives from:\n\n" + "\n".join(lines) + "\n\n" + verdict
