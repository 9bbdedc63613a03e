"""`moot data preferences`: judged run folders into one preference dataset, trl's format.

Each input is a folder a moot evaluation wrote; its command says which source it is
(`moot.training.preference_data`): `moot eval quality` (its responses and baseline read from the
files its ``summary.json`` names), `moot eval controllability` (all such inputs together: their
responses to one instruction are compared across runs), `moot eval compqa` (its judged answers,
paired over one question by their 0-19 totals), `moot eval judge` (a custom judge: what its
fields mean read from the spec its ``summary.json`` records), `moot judge` (Debatrix judgments of
`moot debate` records, all such inputs together: the conclusions read from the debates file its
``summary.json`` names). Pairs are deduplicated (the same prompt and answers from two inputs are
one; two inputs preferring them in opposite directions drop both), split by a seeded hash of
their prompt (as `moot data mix` splits rows: every pair of an eval prompt is held out), and
written as a whole,
atomically: ``train.jsonl``, ``eval.jsonl``, ``dataset/`` (a DatasetDict), ``manifest.json`` and
a card, both naming who judged each input (`JUDGES`, read from its ``summary.json``). The same
inputs and options give byte-identical files; a rerun rebuilds them (nothing is paid for).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moot.core.data.compqa import load_judged
from moot.core.data.debates import is_debatune_record, judgment_id, load_debates
from moot.core.data.folders import EVAL_CLAIM, RunFolder, owners
from moot.core.data.records import (
    ResultLog,
    atomic_replace_dir,
    check_out_dir,
    package_versions,
    read_json_file,
    read_records,
    stable_id,
    write_json,
)
from moot.core.data.responses import Response, align, load_responses
from moot.core.errors import ConfigError, InputError
from moot.core.hub.cards import Card, folder_bytes, write_card
from moot.core.tables import render_table
from moot.training.compqa_data import question
from moot.training.defaults import DEFAULT_EVAL_FRACTION, DEFAULT_MIN_MARGIN
from moot.training.mixing import is_eval, write_splits
from moot.training.preference_data import (
    Built,
    Pair,
    Scored,
    controllability_pairs,
    debatrix_pairs,
    judge_order_pairs,
    judge_score_pairs,
    prompt_of,
    quality_pairs,
    scored_pairs,
    unique,
)

KIND = "preferences"
#: The commands whose folders are read, by the name each registers.
SOURCES = {
    "moot eval quality": "quality",
    "moot eval controllability": "controllability",
    "moot eval compqa": "compqa",
    "moot eval judge": "judge",
    "moot judge": "debatrix",
}


#: Who judged an input, as its ``summary.json`` records it: the manifest's key → the summary's.
JUDGES = {
    "quality": {"model": "judge"},
    "controllability": {"model": "judge"},
    "compqa": {"model": "judge"},
    "judge": {"spec": "judge", "jurors": "jurors"},  # the spec's name, and its models
    "debatrix": {"model": "judge", "framework": "framework"},
}

#: Each source's rule, as the card says it ({} the margin).
RULES = {
    "quality": "pairwise quality judgments whose two orders agree",
    "controllability": "controllability verdicts (a response judged 100% on its side over one "
    "that is not)",
    "compqa": "CompQA totals at least {:g} apart",
    "judge": "a custom judge's verdicts (means at least {:g} apart, or both orders agreeing)",
    "debatrix": "moot debate conclusions whose debater A's Debatrix scores are at least {:g} apart",
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

    def no_pair(self) -> str:
        """Why the train split is empty, in one line: the drops and the pairs held out."""
        why = [f"{why} {n}" for why, n in sorted(self.dropped.items())]
        if self.eval:
            why.insert(0, f"all {self.eval} pair(s) in the eval split")
        return "; ".join(why) or "the inputs hold no judgment"


def build_preferences(
    sources: Sequence[str | Path],
    out: str | Path,
    *,
    min_margin: float = DEFAULT_MIN_MARGIN,
    eval_fraction: float = DEFAULT_EVAL_FRACTION,
    seed: int = 0,
    prompt_field: str | None = None,
    answer_field: str | None = None,
) -> PreferenceSummary:
    """Read judged run folders, build their pairs and write the dataset to `out`.

    Args:
        sources: Folders of `moot eval quality`, `controllability`, `compqa`, `judge`, or of
            `moot judge` (of `moot debate` records).
        out: The output folder: new, empty, or an earlier ``moot data preferences`` output.
        min_margin: The least score difference of a scored pair, in each source's own points
            (CompQA's 0-19 totals, Debatrix's 1-10 scores, a custom judge's verdicts).
        eval_fraction: The expected share of prompts in ``eval`` (with all their pairs), in
            [0, 1); 0: no eval split.
        seed: Seeds the split.
        prompt_field: A custom judge's item field that is the prompt (default: its one input).
        answer_field: A ``mean`` custom judge's field that is the answer (default: its one
            judged field).

    Raises:
        ConfigError: A bad option, an input given twice, an unusable `out`, or no pair at all.
        InputError: An input that is not such a folder, whose files cannot be read (a corrupt
            line of its judgments; a torn last line is counted as dropped), or a custom judge
            that votes or whose prompt or answer field is not said.
    """
    if not sources:
        raise ConfigError("no judged runs to read")
    if not 0 <= eval_fraction < 1:
        raise ConfigError(f"--eval-fraction must be in [0, 1), got {eval_fraction:g}")
    if not min_margin > 0:
        raise ConfigError(f"--min-margin must be above 0, got {min_margin:g}")
    out = Path(out)
    given = [Path(source).resolve() for source in sources]
    if twice := next((s for n, s in enumerate(sources) if given[n] in given[:n]), None):
        raise ConfigError(f"{twice} is given twice: its judgments would count twice")
    check_out_dir(out, KIND, sources)
    summary = PreferenceSummary(out)
    built: list[Built] = []
    control: list[tuple[list[dict[str, Any]], list[Response], dict[str, Any]]] = []
    debated: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for source in map(Path, sources):
        kind = next(
            (SOURCES[command] for command in owners(source) or () if command in SOURCES), None
        )
        if kind is None:
            raise InputError(source, f"not a folder of {_COMMANDS}")
        judge = _judge(source, kind)
        summary.inputs.append({"source": str(source), "kind": kind, "judge": judge})
        judgments, torn = ResultLog(source / "judgments.jsonl").load_checked()
        if torn:
            summary.dropped[f"{kind}: {TORN}"] += 1
        records = list(judgments.values())
        if kind == "quality":
            claim = _claim(source, EVAL_CLAIM)
            responses, baseline = _judged_responses(source, "responses", "baseline")
            identity = _judge_identity(claim)
            built.append(quality_pairs(records, responses, baseline, identity, claim["mask"]))
        elif kind == "controllability":
            (responses,) = _judged_responses(source, "responses")
            control.append((records, responses, _judge_identity(_claim(source, EVAL_CLAIM))))
        elif kind == "compqa":
            built.append(scored_pairs(_compqa_answers(source), min_margin, "compqa"))
        elif kind == "judge":
            built.append(_judge_pairs(source, records, prompt_field, answer_field, min_margin))
        else:
            debated += _debatrix_judged(source, records)
    if control:
        built.append(controllability_pairs(control))
    if debated:
        built.append(debatrix_pairs(debated, min_margin))
    pairs = _unique(built, summary)
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "eval": []}
    for pair in pairs:
        held = is_eval(stable_id(pair.prompt), seed, eval_fraction)
        splits["eval" if held else "train"].append(pair.to_json())
    summary.train, summary.eval = len(splits["train"]), len(splits["eval"])
    if not splits["train"]:
        raise ConfigError(f"no preference pair in the train split ({summary.no_pair()})")
    if not splits["eval"]:  # none asked for, or too few rows: the trainer evaluates nothing
        del splits["eval"]
    options = {
        "min_margin": min_margin,
        "eval_fraction": eval_fraction,
        "seed": seed,
        "prompt_field": prompt_field,
        "answer_field": answer_field,
    }
    atomic_replace_dir(lambda tmp: _write(tmp, splits, summary, options), out)
    return summary


def _unique(built: list[Built], summary: PreferenceSummary) -> list[Pair]:
    """Every source's pairs, deduplicated (`unique`); the drops counted by source."""
    for found in built:
        summary.dropped.update({f"{found.source}: {why}": n for why, n in found.dropped.items()})
    pairs, summary.duplicates, dropped = unique(pair for found in built for pair in found.pairs)
    summary.dropped.update(dropped)
    summary.pairs.update(pair.source for pair in pairs)
    return pairs


#: What `build_preferences` reads, in its one-line refusal of anything else.
_COMMANDS = "moot eval quality, controllability, compqa or judge, or moot judge"


#: The drop of a judgments log's torn last line: a run stopped mid-append, its item unfinished.
TORN = "a torn last line (a stopped run: rerun it)"


def _rerun(path: Path, missing: str) -> InputError:
    """The refusal of a run whose `path` records no `missing` thing."""
    return InputError(path, f"{missing} (unfinished, or made by an earlier moot: rerun it)")


def _claim(folder: Path, name: str) -> dict[str, Any]:
    """The settings a run claimed its folder for (``.moot/<name>.json``): its ids hold them."""
    claim = RunFolder(folder).claimed(name)
    if not isinstance(claim, dict):
        raise _rerun(RunFolder(folder).claim_path(name), "no claim of its settings")
    return claim


def _summary(folder: Path) -> tuple[Path, dict[str, Any]]:
    """A judged run's ``summary.json`` and what it holds ({} when it is not there yet)."""
    path = folder / "summary.json"
    summary = read_json_file(path) if path.is_file() else None
    return path, summary if isinstance(summary, dict) else {}


def _judge_identity(claim: dict[str, Any]) -> dict[str, Any]:
    """The judge identity a DEBATunE evaluation's ids hold: its claim less its other settings."""
    return {k: v for k, v in claim.items() if k not in ("evaluation", "stride", "mask")}


def _judge(folder: Path, kind: str) -> dict[str, Any]:
    """Who judged a run of `kind` (`JUDGES`), read from its ``summary.json``."""
    path, summary = _summary(folder)
    judge = {}
    for key, recorded in JUDGES[kind].items():
        if summary.get(recorded) is None:
            raise _rerun(path, f"records no {recorded}")
        judge[key] = summary[recorded]
    return judge


def _source(path: Path, summary: dict[str, Any], name: str) -> Path:
    """The file (or folder) a run read as `name`, as its summary at `path` names it."""
    given = (summary.get("sources") or {}).get(name)
    if not isinstance(given, str):
        raise _rerun(path, f"names no {name} file")
    if not Path(given).exists():
        raise InputError(path, f"its {name} file {given} is not there (run from its folder)")
    return Path(given)


def _judged_responses(folder: Path, *names: str) -> list[list[Response]]:
    """The responses a judged run read, per name, from the files its ``summary.json`` names.

    Raises:
        InputError: A file that cannot be read, or a second that does not align with the first
            (as the run itself would refuse it).
    """
    path, summary = _summary(folder)
    files = [_source(path, summary, name) for name in names]
    found = [load_responses(file) for file in files]
    for file, responses in zip(files[1:], found[1:], strict=True):
        align(found[0], responses, file)
    return found


def _judge_pairs(
    folder: Path,
    records: list[dict[str, Any]],
    prompt_field: str | None,
    answer_field: str | None,
    min_margin: float,
) -> Built:
    """A `moot eval judge` run's pairs, its fields read from the spec its summary records."""
    path, summary = _summary(folder)
    spec = summary.get("judge_spec")
    if not isinstance(spec, dict):
        raise _rerun(path, "records no judge_spec")
    aggregation = spec["aggregation"]
    if aggregation["method"] == "majority":
        raise InputError(
            path,
            f"judge {spec['name']!r} votes (aggregation majority): a vote is not a score, "
            "so it makes no preference pair",
        )
    prompt = _field(path, spec, "prompt", prompt_field, spec["inputs"])
    if aggregation["method"] == "both_orders":
        answers = [aggregation["a"], aggregation["b"]]
        if prompt in answers:
            raise InputError(path, f"--prompt-field {prompt!r} is one of the two answers judged")
        return judge_order_pairs(records, prompt, *answers)
    answer = _field(path, spec, "answer", answer_field, spec["judged"])
    if answer == prompt:
        raise InputError(path, f"{prompt!r} cannot be both the prompt and the answer")
    return judge_score_pairs(records, prompt, answer, min_margin)


def _field(
    path: Path, spec: dict[str, Any], role: str, given: str | None, defaults: list[str]
) -> str:
    """The item field that is the `role` (prompt, answer): `given`, else the spec's only one."""
    fields = f"inputs: {', '.join(spec['inputs']) or 'none'}; judged: {', '.join(spec['judged'])}"
    if given is not None:
        if given not in (*spec["inputs"], *spec["judged"]):
            raise InputError(
                path,
                f"--{role}-field {given!r} is not a field of judge {spec['name']!r} ({fields})",
            )
        return given
    if len(defaults) != 1:
        raise InputError(
            path,
            f"judge {spec['name']!r} has no single {role} field ({fields}): "
            f"name it with --{role}-field",
        )
    return defaults[0]


def _debatrix_judged(
    folder: Path, judgments: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """A `moot judge` run's judgments, each with the record it judged in its debates file.

    None where the file no longer holds that record as it was judged: no debate of that id, or
    one whose speeches have changed since (the judgment's id is not the one it would get now).
    """
    path, summary = _summary(folder)
    debates = _source(path, summary, "debates")
    records = [] if debates.is_dir() else read_records(debates)  # an id's last line wins
    found = {str(r.get("id")): r for _, r in records if isinstance(r, dict)}
    if not any(map(is_debatune_record, found.values())):
        raise InputError(
            path,
            f"its debates {debates} hold no moot debate record: a pair needs debater A's "
            "conclusion, which only moot debate writes",
        )
    identity = _claim(folder, "judge")
    debates_now = {debate.id: debate for debate in load_debates(debates)}
    judged = []
    for j in judgments:
        now = debates_now.get(str(j.get("debate")))
        current = now is not None and judgment_id(identity, now, j.get("repeat", 0)) == j.get("id")
        judged.append((j, found[now.id] if current else None))  # type: ignore[union-attr]
    return judged


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
    kinds = dict.fromkeys(given["kind"] for given in summary.inputs)
    rules = "; ".join(RULES[kind].format(options["min_margin"]) for kind in kinds)
    return Card(
        kind="dataset",
        title="Preference pairs",
        summary=(
            "Preference pairs in trl's conversational format (`prompt`, `chosen`, `rejected` as "
            f"chat messages), built by `moot data preferences` from {len(summary.inputs)} judged "
            f"run(s): {rules}; deduplicated, split by a seeded hash of each pair's prompt (seed "
            f"{options['seed']}, eval fraction {options['eval_fraction']:g})."
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
        notes=[("Sources", summary.table(markdown=True)), ("Judges", _judges(summary.inputs))],
        inputs=[s["source"] for s in summary.inputs],
    )


def _judges(inputs: list[dict[str, Any]]) -> str:
    """The card's table of who judged each input (a list value's items joined)."""
    rows = [("input", "source", "judge")]
    for given in inputs:
        said = [
            f"{key} " + ", ".join(f"`{v}`" for v in (value if isinstance(value, list) else [value]))
            for key, value in given["judge"].items()
        ]
        rows.append((f"`{given['source']}`", given["kind"], "; ".join(said)))
    return render_table(rows, left=3, markdown=True)
