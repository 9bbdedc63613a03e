"""The loop as one resumable pipeline (`moot run RECIPE.yaml`): recipe, keys, manifest, report.

A recipe names stages in order; each stage is one moot command with that command's own options
(the CLI parses them with the command's parser). A stage writes under the run's folder
(``OUT/<stage>``; ``OUT/<stage>.json`` for a command whose ``--out`` is a file) and later stages
refer to it as ``{stage}`` in any string option (``{debate}/dataset.jsonl``). A stage's key is a
hash of what changes its results: its command, its options but those that only say how it runs
(`HOW_TO_RUN`), the contents of the files and folders they name (and its SFT config names), and
the keys of the earlier stages whose outputs it reads (by ``{stage}`` or by path). A stage is
skipped when the manifest records it done under the same key, so a changed stage reruns, and so
does every stage that depends on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from moot.core.data.records import (
    atomic_write,
    package_versions,
    read_json_file,
    refuse_surrogates,
    write_json,
)
from moot.core.errors import InputError
from moot.core.loader import Unreadable, load_yaml
from moot.core.metrics.debatune import SUMMARY_KEYS
from moot.core.redaction import scrub
from moot.core.runs import format_cost
from moot.core.tables import render_table, show
from moot.core.validation import ConfigModel, problem

#: What a recipe may say of the whole run (`moot run`'s flags; the command line wins).
RUN_OPTIONS = ("budget", "prices")
#: The run's own files in its folder. No stage is named after one, whatever the case: a stage's
#: output is ``OUT/<name>`` or ``OUT/<name>.json``, and ``manifest`` would write over the manifest.
MANIFEST, REPORT, VIEW = "manifest.json", "report.md", "view.html"
#: ``{name}``: the output of the stage called name.
REFERENCE = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: What the report compares, and the command each entry must be.
REPORT_STAGES = {
    "controllability": "eval controllability",
    "quality": "eval quality",
    "debatrix": "judge",
}
#: What the report shows of a Debatrix `moot judge` stage's summary.json.
DEBATRIX_KEYS = (
    "judgments",
    "complete",
    "incomplete",
    "errors",
    "stopped",
    "parse_failures",
    "final_winners",
)


@dataclass(frozen=True)
class Stage:
    """One stage of a recipe.

    Args:
        name: Its name: its output is ``OUT/<name>``, later stages refer to it as ``{name}``.
        command: The moot command, as words after ``moot`` (``("eval", "quality")``).
        options: Its options as the recipe gives them (keys: the command's flag names).
    """

    name: str
    command: tuple[str, ...]
    options: dict[str, Any]

    @property
    def title(self) -> str:
        """``moot eval quality``."""
        return " ".join(("moot", *self.command))


@dataclass(frozen=True)
class Recipe:
    """A parsed recipe.

    Args:
        path: The recipe file.
        stages: Its stages, in the order they run.
        report: What ``report.md`` compares: ``controllability`` (a column label per ``eval
            controllability`` stage: ``base`` and ``tuned``, or base, SFT and SFT+DPO),
            ``quality`` (an ``eval quality`` stage, or a label per stage) and ``debatrix`` (a
            `moot judge` stage over a sample of the debates).
        digest: SHA-256 of the file.
        options: What it says of the whole run (`RUN_OPTIONS`), as written (the CLI checks
            them as `moot run`'s own flags).
    """

    path: Path
    stages: list[Stage]
    report: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    options: dict[str, Any] = field(default_factory=dict)


class _StageFile(ConfigModel, extra="allow"):
    """A stage as written: ``command:`` and that command's options (the CLI checks those)."""

    command: str


class _ReportFile(ConfigModel):
    """``report:``: which stages the report compares (`REPORT_STAGES`).

    ``controllability`` maps a column's label to its stage (``{base: .., tuned: ..}``, or base,
    SFT and SFT+DPO); ``quality`` is one stage (tuned vs base) or a label per stage
    (``{"dpo vs sft": ..}``).
    """

    controllability: dict[str, str] | None = Field(None, min_length=1)
    quality: str | Annotated[dict[str, str], Field(min_length=1)] | None = None
    debatrix: str | None = None


class _RecipeFile(ConfigModel):
    """A recipe file's shape; `RUN_OPTIONS` are checked by the CLI as `moot run`'s flags."""

    stages: dict[str, _StageFile]
    report: _ReportFile | None = None
    budget: Any = None
    prices: Any = None

    @field_validator("stages")
    @classmethod
    def _names(cls, stages: dict[str, _StageFile]) -> dict[str, _StageFile]:
        """Names that make paths, and whose outputs never meet the run's files or each other."""
        taken = {Path(file).stem: f"the run's own {file}" for file in (MANIFEST, REPORT, VIEW)}
        for name in stages:
            if not _NAME.fullmatch(name):
                raise ValueError(f"stage {name!r}: a name of letters, digits, - and _ expected")
            if name.casefold() in taken:
                raise ValueError(
                    f"stage {name!r}: its output would be {taken[name.casefold()]}; choose "
                    "another name"
                )
            taken[name.casefold()] = f"stage {name!r}'s (on a disk that ignores case)"
        return stages


def load_recipe(path: Path) -> Recipe:
    """Read and check a recipe's shape (the stages' options are the CLI's to check).

    Raises:
        InputError: Unreadable, not a mapping, an unknown key, a stage without ``command``, a
            bad stage name, a reference to no earlier stage, or a bad ``report`` section: one
            line naming the file and the key.
    """
    try:
        raw = Path(path).read_bytes()
        data = load_yaml(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read recipe: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:
        raise InputError(path, f"cannot read recipe: {exc.problem}", exc.place) from None
    refuse_surrogates(path, None, data)
    if not isinstance(data, dict):
        raise InputError(path, "expected a mapping with `stages:` (stage name: its options)")
    try:
        shape = _RecipeFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(path, problem(exc, _RecipeFile)) from None
    stages: list[Stage] = []
    for name, body in shape.stages.items():
        options = dict(body.model_extra or {})
        earlier = {stage.name for stage in stages}
        for ref in references(options):
            if ref not in earlier:
                raise InputError(path, f"stage {name}: {{{ref}}} names no earlier stage")
        stages.append(Stage(name, tuple(body.command.split()), options))
    options = {key: data[key] for key in RUN_OPTIONS if key in data}
    report = shape.report.model_dump(exclude_none=True) if shape.report else {}
    recipe = Recipe(Path(path), stages, report, hashlib.sha256(raw).hexdigest(), options)
    _check_report(recipe)
    return recipe


def _check_report(recipe: Recipe) -> None:
    """Each stage the report names is a stage of the recipe running the right command."""
    by_name = {stage.name: stage for stage in recipe.stages}
    for key, value in recipe.report.items():
        for name in value.values() if isinstance(value, dict) else [value]:
            stage = by_name.get(name)
            if stage is None or " ".join(stage.command) != REPORT_STAGES[key]:
                raise InputError(
                    recipe.path, f"report.{key}: {name!r} is not a `{REPORT_STAGES[key]}` stage"
                )


def references(value: Any) -> list[str]:
    """The stage names ``{name}`` references in `value` (strings, lists, mappings), in order."""
    if isinstance(value, str):
        return [match.group(1) for match in REFERENCE.finditer(value)]
    items: Iterable[Any] = value.values() if isinstance(value, dict) else value
    if isinstance(value, dict | list):
        return list(dict.fromkeys(ref for item in items for ref in references(item)))
    return []


def resolve(value: Any, outputs: dict[str, Path]) -> Any:
    """`value` with every ``{name}`` replaced by that stage's output path."""
    if isinstance(value, str):
        return REFERENCE.sub(lambda match: str(outputs[match.group(1)]), value)
    if isinstance(value, dict):
        return {key: resolve(item, outputs) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, outputs) for item in value]
    return value


#: Options that say how a stage runs, not what it makes: changing them (a larger ``budget`` after
#: a stop, more ``concurrency``, a server that moved, a push added, ``batch`` or not: a batch's
#: replies are the live ones) leaves its key, so a finished
#: stage stays finished and an unfinished one resumes. A local model's ``device`` and
#: ``batch-size`` leave its float32 replies as they were; ``dtype`` and ``backend`` change them,
#: so they count.
HOW_TO_RUN = frozenset(
    {"budget", "prices", "concurrency", "max-concurrency", "timeout", "max-retries", "cache",
     "no-cache", "quiet", "verbose", "debug", "device", "batch-size",
     "api-base", "api-base-a", "api-base-b", "api-base-agent", "router", "api-key-env",
     "endpoint-cooldown", "endpoint-max-fails", "search-api-base", "search-key-env",
     "push-to-hub", "hub-private", "rpm", "tpm",
     "batch", "no-wait", "batch-fallback", "batch-poll"}
)  # fmt: skip


def what_to_make(
    options: dict[str, Any], how_to_run: frozenset[str] = HOW_TO_RUN
) -> dict[str, Any]:
    """`options` less those that only say how a stage runs (`HOW_TO_RUN`)."""
    return {k: v for k, v in options.items() if k.replace("_", "-") not in how_to_run}


def stage_key(
    stage: Stage,
    inputs: dict[str, str],
    upstream: dict[str, str],
    how_to_run: frozenset[str] = HOW_TO_RUN,
) -> str:
    """What makes a stage the same work: command, options, inputs' contents, upstream keys.

    The options count as the recipe writes them (``{debate}``, not the path it stands for), so
    a run's folder can be moved or copied and still be skipped; what the references stand for
    counts through the upstream stages' keys. Options that only say how it runs (`HOW_TO_RUN`)
    do not count.

    Args:
        stage: The stage.
        inputs: The digests of the files and folders it reads (`read_inputs`).
        upstream: The keys of the earlier stages whose outputs it reads.
        how_to_run: The options that do not count (`LEGACY_HOW_TO_RUN` for `legacy_stage_key`).
    """
    identity = {
        "command": list(stage.command),
        "options": what_to_make(stage.options, how_to_run),
        "inputs": inputs,
        "upstream": upstream,
    }
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: `HOW_TO_RUN` before issue 29, for `legacy_stage_key`.
LEGACY_HOW_TO_RUN = frozenset(
    {"budget", "prices", "concurrency", "max-concurrency", "timeout", "max-retries", "cache",
     "no-cache", "quiet", "verbose", "debug", "device", "batch-size"}
)  # fmt: skip


def legacy_stage_key(
    stage: Stage,
    resolved: dict[str, Any],
    upstream: dict[str, str],
    out: Path,
    digests: dict[str, list[str]],
) -> str:
    """A stage's key as moot made it before issue 29, to take over a run folder keyed so.

    The options less `LEGACY_HOW_TO_RUN`, and of the strings they hold, those naming a file
    (not a folder) outside the run's folder, by content; `upstream` holds the legacy keys of the
    stages it names as ``{stage}``. A stage finished under this key did what it does now by the
    rules of its day (a folder's edits went unseen then), so it is not redone for the change of
    formula: its entry takes the new key (`moot.cli.loop.to_do`). A file's digest is the one
    `content_digest` keeps in `digests` (the same SHA-256 of its bytes), so it is read once.
    """
    inputs, run = {}, Path(out).resolve()
    for text in option_strings(what_to_make(resolved, LEGACY_HOW_TO_RUN)):
        path = Path(text.partition("=")[2] if "=" in text else text)
        if len(text) < 4096 and path.is_file() and run not in path.resolve().parents:
            inputs[text] = content_digest(path, digests)
    return stage_key(stage, inputs, upstream, LEGACY_HOW_TO_RUN)


def read_inputs(
    texts: Iterable[str], outputs: dict[str, Path], out: Path, digests: dict[str, list[str]]
) -> tuple[dict[str, str], list[str]]:
    """The files and folders `texts` name, by content; the earlier stages whose outputs they name.

    A text names a path as itself, after ``=`` (``data.train=FILE``) or after ``hf/`` (a model
    folder). A path inside an earlier stage's output, named as ``{stage}`` or by its own path,
    stands for that stage: its key counts instead (the file is not written yet when the run
    starts). Other paths in the run's folder (the stage's own output) are not inputs, nor is a
    folder that holds the run's folder or the recipe's (``.``, ``/``: a text that is no path).

    Args:
        texts: Every string of a stage's options (`option_strings`) and of its SFT config.
        outputs: The earlier stages' outputs, by name.
        out: The run's folder.
        digests: The files' digests known so far (`content_digest`).

    Returns:
        ``{text: sha256}`` of the paths that exist, and the stages named, in order.
    """
    inputs, stages = {}, []
    run, here = os.path.abspath(out), os.getcwd()  # the run works in the recipe's folder
    folders = {name: os.path.abspath(path) for name, path in outputs.items()}
    for text in texts:
        value = text.partition("=")[2] if "=" in text else text
        for named in dict.fromkeys((value, value.removeprefix("hf/"))):  # model spec hf/PATH
            if not named or len(named) > 4096 or "\0" in named:  # no path
                continue
            path = os.path.abspath(named)
            owner = [name for name, folder in folders.items() if _within(path, folder)]
            in_run = _within(path, run)
            holds_run = _within(run, path) or _within(here, path)
            if owner:
                stages += owner
            elif os.path.exists(path) and not (in_run or holds_run):
                inputs[text] = content_digest(Path(path), digests)
    return inputs, list(dict.fromkeys(stages))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)  # `/` too


def content_digest(path: Path, digests: dict[str, list[str]]) -> str:
    """SHA-256 of a file's bytes, or of a folder's files (names and bytes; ``.moot/`` left out).

    `digests` (the manifest's) keeps each path's digest with a stamp of its files' names, sizes
    and modification times: a path whose stamp is unchanged is not read again, so a rerun of a
    recipe naming a large corpus or model folder costs a ``stat`` per file.
    """
    files = [path] if path.is_file() else sorted(
        file for file in path.rglob("*")
        if file.is_file() and ".moot" not in file.relative_to(path).parts
    )  # fmt: skip
    listing = [(file.relative_to(path).as_posix(), file.stat()) for file in files]
    stamp = _sha256(json.dumps([(name, st.st_size, st.st_mtime_ns) for name, st in listing]))
    key = os.path.abspath(path)
    if digests.get(key, [None])[0] == stamp:
        return digests[key][1]
    shas = {name: _file_sha256(file) for file, (name, _) in zip(files, listing, strict=True)}
    sha = shas["."] if path.is_file() else _sha256("".join(f"{n}\0{s}\n" for n, s in shas.items()))
    digests[key] = [stamp, sha]
    return sha


def _file_sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def option_strings(value: Any) -> Iterable[str]:
    """Every string in options (inside lists and mappings too): where paths can be named."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from option_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from option_strings(item)


class Manifest:
    """``OUT/manifest.json``: every stage's options, key, status, time, ledger and outputs.

    Written atomically after every change of a stage's status, so a killed run leaves the
    last state it reached.
    """

    def __init__(self, out: Path, recipe: Recipe) -> None:
        self.path = Path(out) / MANIFEST
        old = read_json_file(self.path) if self.path.exists() else {}
        self.stages: dict[str, dict[str, Any]] = old.get("stages", {})
        #: The inputs' digests by path, with a stamp of their files (`content_digest`).
        self.digests: dict[str, list[str]] = old.get("digests", {})
        self.data: dict[str, Any] = {
            "kind": "moot-run",
            "recipe": str(recipe.path),
            "recipe_sha256": recipe.digest,
            "versions": package_versions("moot", "transformers", "peft", "trl", "litellm"),
            "order": [stage.name for stage in recipe.stages],
            "stages": self.stages,
            "report": REPORT,
            "view": None,  # `view.html` once a stage has a run folder to show
            "digests": self.digests,
        }

    def done(self, name: str, key: str) -> bool:
        """Whether stage `name` finished under `key`."""
        entry = self.stages.get(name, {})
        return entry.get("status") == "done" and entry.get("key") == key

    def changed(self, name: str, key: str) -> bool:
        """Whether stage `name` ran before under another key (its output is stale)."""
        entry = self.stages.get(name)
        return entry is not None and entry.get("key") != key

    def pushed(self, name: str, repo: str) -> bool:
        """Whether stage `name`'s last run had ``push-to-hub`` `repo` (done: it pushed there)."""
        options = self.stages.get(name, {}).get("options", {})
        return any(k.replace("_", "-") == "push-to-hub" and v == repo for k, v in options.items())

    def update(self, name: str, **values: Any) -> None:
        """Set stage `name`'s fields and write the manifest."""
        self.stages.setdefault(name, {}).update(values)
        self.write()

    def write(self) -> None:
        """Write the manifest atomically, scrubbed: a stage's ``api-base`` may hold a key."""
        self.data["stages"] = self.stages
        write_json(self.path, scrub(self.data))


def discard(paths: Iterable[Path]) -> None:
    """Remove a changed stage's stale outputs, so its command starts afresh."""
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        for sibling in path.parent.glob(f".{path.name}.*"):  # an --out FILE's progress log
            sibling.unlink()


def written_ledger(output: Path | None) -> dict[str, Any] | None:
    """The usage ledger a stage's command wrote (``manifest.json`` or ``summary.json``), if any.

    A `moot debate` manifest's ``ledger_total`` (every run on its folder) wins over its
    ``ledger`` (the last run's). `moot generate` and the training commands write none.
    """
    if output is None or not output.is_dir():
        return None
    for name in ("manifest.json", "summary.json"):
        path = output / name
        if path.is_file():
            data = read_json_file(path)
            ledger = data.get("ledger_total") or data.get("ledger")
            if isinstance(ledger, dict):
                return ledger
    return None


def listed(output: Path | None) -> list[str]:
    """A stage's output files (top level of its folder, or the file), for the manifest."""
    if output is None or not output.exists():
        return []
    if output.is_file():
        return [str(output)]
    return sorted(str(p) for p in output.iterdir() if not p.name.startswith("."))


def now() -> str:
    """The time, UTC, ISO 8601 to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_report(out: Path, recipe: Recipe, manifest: Manifest) -> Path:
    """``OUT/report.md``: the stages, then the judges' summaries the recipe's ``report:`` compares.

    The judges' counts (items, unreadable replies, errors) are shown next to every score.
    """
    outputs = {name: entry.get("out") for name, entry in manifest.stages.items()}
    lines = [f"# moot run {recipe.path.name}", "", "## Stages", ""]
    rows = [("stage", "command", "status", "seconds", "calls", "tokens", "cost")]
    for stage in recipe.stages:
        entry = manifest.stages.get(stage.name, {})
        total = (entry.get("ledger") or {}).get("total") or {}
        tokens = total.get("prompt_tokens", 0) + total.get("completion_tokens", 0) if total else "-"
        rows.append(
            (
                stage.name,
                stage.title,
                entry.get("status", "not run"),
                entry.get("seconds", "-"),
                total.get("calls", "-"),
                tokens,
                format_cost(total["cost_usd"]) if "cost_usd" in total else "-",
            )
        )
    lines += [render_table(rows, left=3, markdown=True), ""]
    control = recipe.report.get("controllability")
    if control:
        lines += ["## Controllability (DEBATunE, Li et al. 2024, Section 4.2)", ""]
        lines += [_compared(control, SUMMARY_KEYS["controllability"], outputs), ""]
    quality = recipe.report.get("quality")
    if isinstance(quality, str):
        lines += [f"## Pairwise quality: tuned vs base ({quality}, both orders)", ""]
        lines += [_compared({"value": quality}, SUMMARY_KEYS["quality"], outputs, named=False), ""]
    elif quality:
        lines += ["## Pairwise quality (responses vs baseline, both orders)", ""]
        lines += [_compared(quality, SUMMARY_KEYS["quality"], outputs), ""]
    debatrix = recipe.report.get("debatrix")
    if debatrix:
        lines += [f"## Debatrix judgments of the debates ({debatrix}, Liang et al. 2024)", ""]
        lines += [_compared({"value": debatrix}, DEBATRIX_KEYS, outputs, named=False), ""]
    lines += ["## Browse", "", "Every stage's records are in its folder (see `manifest.json`)."]
    if manifest.data.get("view"):
        lines.append(
            f"[{manifest.data['view']}]({manifest.data['view']}): every stage's items, failures "
            "and ledger in one page (`moot view`), base and tuned side by side."
        )
    path = Path(out) / REPORT
    atomic_write(path, lambda f: f.write("\n".join([*lines, ""])))
    return path


def write_run_view(out: Path, manifest: Manifest) -> None:
    """``OUT/view.html``: `moot view` of every stage with a run folder, named in the manifest.

    Left out (the manifest's ``view`` stays null) while no stage has a folder to show.
    """
    from moot.core.view.page import write_view

    try:
        write_view([out], Path(out) / VIEW)
    except InputError:  # no stage has a run folder yet (a first stage that failed)
        return
    manifest.data["view"] = VIEW
    manifest.write()


def _compared(
    columns: dict[str, str],
    keys: Iterable[str],
    outputs: dict[str, str | None],
    named: bool = True,
) -> str:
    """A table of `keys` (rows) from each column's stage's summary (``label (stage)``)."""
    summaries = {label: _summary(outputs.get(name)) for label, name in columns.items()}
    head = [f"{label} ({name})" if named else label for label, name in columns.items()]
    rows = [("metric", *head)]
    rows += [(key, *(_shown(summaries[label], key) for label in columns)) for key in keys]
    return render_table(rows, markdown=True)


def _summary(output: str | None) -> dict[str, Any] | None:
    path = Path(output) / "summary.json" if output else None
    if path is None or not path.is_file():
        return None
    return read_json_file(path)


def _shown(summary: dict[str, Any] | None, key: str) -> str:
    if summary is None:
        return "not run"
    value = summary.get(key)
    if isinstance(value, dict):  # Debatrix's final winners
        return ", ".join(f"{name}: {count}" for name, count in value.items()) or "none"
    return show(value)
