"""`moot run RECIPE.yaml`: the loop (debate → dataset → SFT → generate → judge → report) in one.

The run works in the recipe's folder (`in_recipe_folder`). Each stage's options are parsed by its
own command's parser (`moot.cli.config.option_defaults`) and every stage that will run is checked
and planned as its ``--dry-run`` would (`check`), before the first one runs or any stale output
is discarded; the stages then run in this process, one after another, through the same path as
the command line (`moot.cli.runtime.execute`). The recipe, keys, manifest and report are
`moot.graphs.loop`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli.job import Job
from moot.cli.registry import Commands
from moot.cli.settings import flag
from moot.core.data.folders import Output
from moot.core.view.payload import STAGES
from moot.result import Result


class Run(Job):
    """`moot run`: a recipe's stages into one folder, resumably; its plan is the recipe's."""

    class Settings(opt.CostSettings, opt.CommonSettings):
        """`moot run`'s settings (a recipe's ``budget:`` and ``prices:`` come over them)."""

        recipe: Path = flag(
            parse=opt.input_file, metavar="RECIPE", help="the recipe (YAML)", positional=True
        )
        out: Path | None = opt.out_flag(
            "the run's folder: a folder per stage, manifest.json, report.md",
            default="runs/<recipe name>",
            resolve=lambda args: Path("runs") / args.recipe.stem,
            holds_runs=True,  # its stages' run folders
        )

    def run(self) -> Result:
        """Check every stage, then run each that is not done (`run_recipe`)."""
        return run_recipe(self.args)


def register(commands: Commands) -> None:
    """Add `moot run`."""
    commands.add(
        "run",
        Run,
        "run a recipe: debate, dataset, SFT, generate, judge, report, resumably",
        "Run the stages a recipe names, each a moot command with its own options, into one "
        "folder with a manifest and report.md. A finished stage is skipped on rerun, an "
        "interrupted one resumes, a changed one reruns with the stages that use it. See "
        "docs/cli.md.",
        plan=plan_recipe,
        output=Output(STAGES),
    )


@dataclass
class PlannedStage:
    """A stage ready to run: its parsed command line, output and key.

    Args:
        stage: The recipe's stage.
        args: Its command's parsed arguments (what `moot run --dry-run` will plan from).
        options: Its options with references resolved (recorded in the manifest).
        output: Its output (``OUT/<stage>`` or ``OUT/<stage>.json``), None if it writes none.
        key: Its key (`moot.graphs.loop.stage_key`).
        inputs: The digests of the files and folders it reads (`moot.graphs.loop.read_inputs`).
        depends_on: The earlier stages whose outputs it reads.
        legacy_key: Its key by the formula of earlier versions (`moot.graphs.loop.
            legacy_stage_key`): a run folder they made is taken over, not redone.
    """

    stage: Any
    args: argparse.Namespace
    options: dict[str, Any]
    output: Path | None
    key: str
    inputs: dict[str, str]
    depends_on: list[str]
    legacy_key: str


def plan(
    recipe: Any,
    out: Path,
    parser: argparse.ArgumentParser,
    digests: dict[str, Any],
    quiet: bool = False,
    verbose: bool = False,
) -> list[PlannedStage]:
    """Every stage parsed, and keyed by what changes its results, before any runs.

    Args:
        recipe: The recipe (`moot.graphs.loop.load_recipe`).
        out: The run's folder.
        parser: The whole ``moot`` parser (`moot.cli.main.build_parser`).
        digests: The input files' known digests (`moot.graphs.loop.Manifest.digests`).
        quiet: Run every stage ``--quiet``.
        verbose: Run every stage ``--verbose``.

    Raises:
        InputError: A stage names an unknown command, an unknown option, a value its flag
            refuses, lacks a required option, sets ``out``, or its SFT config does not load.
    """
    from moot.graphs.loop import (
        legacy_stage_key,
        option_strings,
        read_inputs,
        references,
        resolve,
        stage_key,
        what_to_make,
    )

    planned: list[PlannedStage] = []
    outputs: dict[str, Path] = {}
    keys: dict[str, str] = {}
    legacy: dict[str, str] = {}
    for stage in recipe.stages:
        options = resolve(stage.options, outputs)
        args, output, config = _parse(
            parser, recipe, stage, options, out / stage.name, quiet, verbose
        )
        texts = [*option_strings(what_to_make(options)), *option_strings(config)]
        inputs, named = read_inputs(texts, outputs, out, digests)
        depends_on = list(dict.fromkeys([*references(stage.options), *named]))
        key = stage_key(stage, inputs, {name: keys[name] for name in depends_on})
        refs = {name: legacy[name] for name in references(stage.options)}
        legacy[stage.name] = legacy_stage_key(stage, options, refs, out, digests)
        planned.append(
            PlannedStage(stage, args, options, output, key, inputs, depends_on, legacy[stage.name])
        )
        outputs[stage.name] = output if output is not None else out / stage.name
        keys[stage.name] = key
    return planned


def _parse(
    parser: argparse.ArgumentParser,
    recipe: Any,
    stage: Any,
    options: dict[str, Any],
    out: Path,
    quiet: bool,
    verbose: bool,
) -> tuple[argparse.Namespace, Path | None, dict[str, Any]]:
    """The stage's command line, its output, and its SFT config (`moot train sft`; else empty)."""
    from moot.cli.config import command_parser, option_defaults, parse_with, positional_argv
    from moot.core.errors import InputError

    where = f"stage {stage.name}: "
    command = command_parser(parser, stage.command)
    if command is None or command.get_default("command_fn") is run_recipe:  # not `run` itself
        raise InputError(recipe.path, f"{where}unknown command {' '.join(stage.command)!r}")
    if "out" in options:
        raise InputError(
            recipe.path, f"{where}`out` is set by moot run ({out}); refer to it as {{{stage.name}}}"
        )
    defaults = option_defaults(command, options, recipe.path, where, positionals=True)
    actions = {action.dest: action for action in command._actions}
    argv = positional_argv(command, defaults)
    output = None
    if "out" in actions:  # a folder, or a file for `moot generate`
        output = out.with_suffix(".json") if actions["out"].type is opt.output_file else out
        defaults["out"] = output
    if "overrides" in actions and "train_config" in actions:  # `moot train sft`
        if any(str(item).startswith("training.output_dir=") for item in argv):
            raise InputError(recipe.path, f"{where}training.output_dir is set by moot run ({out})")
        argv.append(f"training.output_dir={out}")
        output = out
    for dest, given in (("quiet", quiet), ("verbose", verbose)):
        if given and dest in actions:
            defaults.setdefault(dest, True)
    args = parse_with(parser, stage.command, argv, defaults)
    for dest in getattr(args, "required_flags", ()):
        if getattr(args, dest, None) is None:
            option = max(actions[dest].option_strings, key=len).lstrip("-")
            raise InputError(recipe.path, f"{where}missing option {option!r}")
    config = {}
    if "train_config" in actions:  # its config's keys are checked now too, not an hour in
        config = _check_sft(recipe, where, args, tuple(stage.command))
    return args, output, config


def _check_sft(
    recipe: Any, where: str, args: argparse.Namespace, command: tuple[str, ...]
) -> dict[str, Any]:
    """The SFT (or DPO) config the stage trains with, checked (the files it names are inputs)."""
    from moot.core.errors import InputError, MootError
    from moot.training.dpo_config import DPORunConfig
    from moot.training.sft_config import SFTRunConfig, load_run_config

    if not Path(args.train_config).is_file():
        raise InputError(recipe.path, f"{where}config {args.train_config}: file not found")
    schema = DPORunConfig if command == ("train", "dpo") else SFTRunConfig
    try:
        return load_run_config(schema, args.train_config, args.overrides).to_dict()
    except MootError as exc:
        raise InputError(recipe.path, f"{where}{exc}") from None


def run_recipe(args: argparse.Namespace) -> Result:
    """`moot run`."""
    from moot.graphs.loop import Manifest

    with in_recipe_folder(args) as recipe:
        run_options(args, recipe)
        manifest = Manifest(args.out, recipe)
        digests, quiet, verbose = manifest.digests, args.quiet, args.verbose
        stages = plan(recipe, args.out, args.root_parser, digests, quiet, verbose)
        check(args, stages, manifest)  # before the first request, and before anything is deleted
        return _run(args, recipe, stages, manifest)


def _run(
    args: argparse.Namespace, recipe: Any, stages: list[PlannedStage], manifest: Any
) -> Result:
    from moot.cli.runtime import execute, finish
    from moot.core.errors import BudgetReached, MootError, WriteError, machine_failure
    from moot.core.llm.ledger import UsageLedger
    from moot.graphs.loop import discard, now, write_report, write_run_view
    from moot.result import FAILED, STATUS, STOPPED, show

    live = getattr(args, "echo", True)  # the command line says each stage as it goes
    said: list[str] = []  # from Python: what the command line would have said, in the result
    heard: list[str] = []  # from Python: the stages' messages (the command line shows each)

    def say(line: str) -> None:
        if not live:
            said.append(line)
        elif not args.quiet:
            print(line)

    spent = 0.0  # USD this run's stages spent, against its --budget
    done: dict[str, Result] = {}
    for item in stages:
        name, todo = item.stage.name, to_do(item, manifest)
        if manifest.done(name, item.legacy_key):  # made by an earlier version: keyed anew
            manifest.update(name, key=item.key, inputs=item.inputs)
        if todo == "skip":
            say(f"stage {name}: done before (key {item.key}), skipped")
            continue
        if todo == "redo":
            redone = (
                f"moot: stage {name} changed since its last run (or a stage it uses did): "
                f"its output {item.output} is redone"
            )
            args.notes.append(redone)
            if live:  # even --quiet: what it discards
                print(redone, file=sys.stderr)
            discard([item.output])
        manifest.stages.get(name, {}).pop("prompt_overrides", None)  # its last run's: below
        how = {"push": " (done before: pushing it)", "run": " (resuming)", "redo": ""}[todo]
        say(f"stage {name}: {item.stage.title}" + (how if name in manifest.stages else ""))
        manifest.update(
            name,
            command=item.stage.title,
            options=item.options,
            key=item.key,
            inputs=item.inputs,
            depends_on=item.depends_on,
            out=str(item.output) if item.output is not None else None,
            status="running",
            started=now(),
            finished=None,
            exit_code=None,
            error=None,
        )
        for_the_run(item.args, args, spent)
        started = time.perf_counter()
        try:
            result = done[name] = execute(item.args)
        except KeyboardInterrupt:
            _record(manifest, item, started, "interrupted", 130)
            raise
        except (MootError, OSError, WriteError, BudgetReached) as exc:  # main prints its line
            stopped = isinstance(exc, BudgetReached)
            code = STOPPED if stopped else FAILED if machine_failure(exc) else 2
            _record(manifest, item, started, "stopped" if stopped else "failed", code, str(exc))
            write_run_view(args.out, manifest)
            write_report(args.out, recipe, manifest)
            raise
        if result.prompts:  # a deviation from the paper, said where the run is told
            manifest.update(name, prompt_overrides=result.prompts)
        if live:
            show(result, item.args.quiet)
        else:
            heard += result.messages
        code, used = result.exit_code, result.ledger or UsageLedger()
        spent += used.spent() or 0.0
        waiting = sum(t.waiting for t in result.tallies)  # --no-wait: its batches not ended
        status = "waiting" if waiting and not code else STATUS.get(code, "failed")
        _record(manifest, item, started, status, code, used=used)
        if code or waiting:
            write_run_view(args.out, manifest)
            write_report(args.out, recipe, manifest)
            how = "failed"
            if status == "waiting":
                how = f"waits for its batches ({waiting} items)"
            if status == "stopped":
                how = "stopped at its --budget"
                if args.budget is not None:
                    how = (
                        f"stopped at the run's --budget ${args.budget:.4f} "
                        f"(${spent:.4f} spent by this run)"
                    )
            message = (
                f"moot: stage {name} {how} (exit {code}); the stages after it did not run; "
                f"rerun `moot run {args.recipe} --out {args.out}` to resume it"
                + (" (with a larger --budget)" if status == "stopped" else "")
            )
            return _ran(finish(args, lines=said, messages=[*heard, message]), code, done)
    write_run_view(args.out, manifest)
    report = write_report(args.out, recipe, manifest)
    lines = [*said, f"report   {report}\nmanifest {manifest.path}"]
    outputs = {"report": report, "manifest": manifest.path}
    return _ran(finish(args, lines=lines, messages=heard, outputs=outputs), 0, done)


def _ran(result: Result, code: int, stages: dict[str, Result]) -> Result:
    """`moot run`'s result: its stages' results and what they spent, in one."""
    from moot.core.llm.ledger import UsageLedger

    ledgers = [stage.ledger for stage in stages.values() if stage.ledger is not None]
    result.exit_code, result.stages = code, stages
    result.ledger = UsageLedger.merged(ledgers) if ledgers else None
    return result


@contextlib.contextmanager
def in_recipe_folder(args: argparse.Namespace) -> Iterator[Any]:
    """The recipe, read, with the process in the recipe's folder until the run ends.

    So a relative path in the recipe, and in the files it names (an SFT config's ``data.train``),
    is relative to the recipe's folder, wherever moot runs from. `moot run`'s own paths (the
    recipe, ``--out``, ``--prices``) are the command line's: they are made absolute first.

    Raises:
        ConfigError: No recipe file.
        InputError: The recipe does not load (`moot.graphs.loop.load_recipe`).
    """
    from moot.core.errors import ConfigError
    from moot.graphs.loop import load_recipe

    if not args.recipe.is_file():
        raise ConfigError(f"{args.recipe}: recipe not found")
    for dest in ("recipe", "out", "prices"):
        if isinstance(getattr(args, dest), Path):
            setattr(args, dest, Path(os.path.abspath(getattr(args, dest))))
    recipe = load_recipe(args.recipe)
    with contextlib.chdir(args.recipe.parent):
        yield recipe


def to_do(item: PlannedStage, manifest: Any) -> str:
    """What a run does with a stage.

    Returns:
        ``skip``: done before under its key, output there, nothing to push. ``push``: the same,
        but it now has a ``push-to-hub`` it did not push to: its command runs, finds its work
        done and pushes (nothing is paid). ``redo``: it ran before under another key (what
        changes its results changed): its stale output is discarded first. ``run``: new, or
        unfinished (its command resumes it). A stage an earlier version finished under its
        `legacy_key` counts as done under its key.
    """
    name = item.stage.name
    done = manifest.done(name, item.key) or manifest.done(name, item.legacy_key)
    if done and (item.output is None or item.output.exists()):
        repo = getattr(item.args, "push_to_hub", None)
        return "push" if repo and not manifest.pushed(name, repo) else "skip"
    if manifest.changed(name, item.key) and item.output is not None:
        return "redo"
    return "run"


def run_options(args: argparse.Namespace, recipe: Any) -> None:
    """The whole run's ``--budget`` and ``--prices``: the command line's, else the recipe's.

    The recipe's are checked as the flags' own values; the prices (a file, or a mapping
    inline) are read now, so a wrong one is refused before any stage runs.

    Raises:
        InputError: A recipe value the flag refuses, or a wrong price file or mapping.
    """
    from moot.cli.config import option_defaults
    from moot.cli.runtime import check_paths, prices_from
    from moot.core.llm.prices import load_prices

    given = {key: value for key, value in recipe.options.items() if getattr(args, key) is None}
    inline = isinstance(given.get("prices"), dict)
    for dest, value in option_defaults(args.command_parser, given, recipe.path).items():
        setattr(args, dest, value)
    check_paths(args, "prices")
    if inline:
        load_prices(recipe.path, args.prices, where="prices")
    else:
        prices_from(args)


def for_the_run(stage: argparse.Namespace, args: argparse.Namespace, spent: float) -> None:
    """Give a stage the run's prices (unless it has its own), its budget's rest, and its folder.

    A stage's own ``budget`` still bounds it; its spending is read from its result's ledger. Its
    output lies inside the run's folder (``stage.run_folder``, `moot.cli.runtime.check_paths`).

    Args:
        stage: The stage's parsed command line.
        args: `moot run`'s.
        spent: USD the run's earlier stages spent.
    """
    stage.run_folder = args.out
    if hasattr(stage, "prices") and stage.prices is None:
        stage.prices = args.prices
    if hasattr(stage, "budget") and args.budget is not None:
        left = max(0.0, args.budget - spent)
        stage.budget = left if stage.budget is None else min(stage.budget, left)


def plan_recipe(args: argparse.Namespace) -> Any:
    """`moot run --dry-run`: every stage's plan in one (`check`); nothing run or written."""
    from moot.graphs.loop import Manifest

    with in_recipe_folder(args) as recipe:
        run_options(args, recipe)
        manifest = Manifest(args.out, recipe)  # read only: written by a run
        stages = plan(recipe, args.out, args.root_parser, manifest.digests, quiet=True)
        return check(args, stages, manifest, dry_run=True)


def check(
    args: argparse.Namespace, stages: list[PlannedStage], manifest: Any, dry_run: bool = False
) -> Any:
    """Check every stage a run would run as its command's ``--dry-run`` checks it, and plan it.

    A real run does this before its first request and before it discards any stale output, so
    a later stage's bad input (a missing file, ``shard: "3/2"``) costs nothing; a dry run prints
    the plan. A stage done before is skipped, as a run skips it. A stage to redo is planned as
    if its stale output were gone. A stage that reads the output of a stage not yet done is
    planned from what that stage's plan says it would write (`Plan.outputs`, read through
    `moot.core.data.planned`: the records done, stand-ins at their full budgets for the replies
    to come); a folder that a stage calling no model would make (`moot train sft`'s adapter)
    counts as there. A stage whose input no earlier plan can tell is named in a note and left
    out of the totals (a run checks it when it starts).

    Args:
        args: `moot run`'s parsed command line.
        stages: Its stages (`plan`).
        manifest: The run's manifest, read only.
        dry_run: For ``--dry-run``: a ``push-to-hub`` is not checked (as a command's own).

    Returns:
        The whole recipe's `moot.core.plan.Plan`.

    Raises:
        InputError: A stage's input, as its command refuses it: ``RECIPE: stage NAME: ...``.
        ConfigError: A ``push-to-hub`` that cannot happen.
    """
    from moot.cli.runtime import check_paths, check_required, plan_for
    from moot.core.data.planned import planned_files
    from moot.core.errors import InputError, MootError
    from moot.core.hub.push import check_push
    from moot.core.llm.prices import Prices
    from moot.core.plan import Plan, PlanItems

    whole, done, unknown, own = Plan(), set(), [], {}
    with planned_files() as planned:
        for item in stages:
            name, title, todo = item.stage.name, item.stage.title, to_do(item, manifest)
            trial = argparse.Namespace(**vars(item.args))  # checked as it would run, apart
            repo = getattr(trial, "push_to_hub", None)
            if repo and todo != "skip" and not dry_run:  # as `execute` checks it, but now
                check_push(repo)
            if todo in ("skip", "push"):
                pushes = f"; a run pushes it to {repo}, nothing more" if todo == "push" else ""
                whole.notes.append(f"stage {name}: done before, skipped{pushes}")
                done.add(name)
                continue
            waits = [stage for stage in item.depends_on if stage not in done]
            if blocked := [stage for stage in waits if stage in unknown]:
                whole.notes.append(
                    f"stage {name} ({title}): not in the estimate; it reads the output of "
                    f"{', '.join(blocked)}, which is not in it either"
                )
                unknown.append(name)
                continue
            if todo == "redo":
                whole.notes.append(
                    f"stage {name}: changed since its last run (or a stage it uses did): its "
                    f"output {item.output} is redone"
                )
                trial.out = args.out / ".moot" / "redo" / item.output.name  # never made
            for_the_run(trial, args, 0.0)  # the prices a run would give it
            try:
                check_required(trial)
                check_paths(trial)
                if getattr(trial, "plan_fn", None) is None:
                    reads = _reads(item, planned)
                    whole.notes.append(f"stage {name} ({title}): calls no model{reads}")
                    if item.output is not None:
                        planned.add_folder(item.output)
                    continue
                stage = plan_for(trial)
            except MootError as exc:
                if not _unknown_inputs(item, planned):  # bad input: refused as a run would
                    raise InputError(args.recipe, f"stage {name}: {exc}") from None
                whole.notes.append(
                    f"stage {name} ({title}): not in the estimate; it reads the output of "
                    f"{', '.join(waits)}, which their plans cannot tell ({exc})"
                )
                unknown.append(name)
                continue
            if stage.unpriced and getattr(trial, "budget", None) is not None and not dry_run:
                raise InputError(  # as its model layer would refuse it, once it started
                    args.recipe,
                    f"stage {name}: --budget needs the price of {', '.join(stage.unpriced)}, "
                    "which is unknown: give it in prices (the stage's or the run's)",
                )
            whole.items += [PlanItems(f"{name}: {i.unit}", i.planned, i.done) for i in stage.items]
            whole.calls_at_most |= stage.calls_at_most  # e.g. a ReAct stage's bound
            for row in stage.rows:
                tokens = (row.input_tokens, row.output_tokens)
                whole.add_calls(f"{name}/{row.role}", row.stage, row.spec, row.calls, *tokens)
            if waits:
                whole.notes.append(
                    f"stage {name}: planned from what {', '.join(waits)} would write (replies "
                    "not yet made counted at their full budgets)"
                )
            whole.notes += [f"stage {name}: {text}" for text in stage.notes]
            whole.keys += [key for key in stage.keys if key not in whole.keys]  # a search's too
            own.update(stage.prices.own)
            for path, records in stage.outputs.items():
                planned.add_file(_moved(path, trial.out, item.output), records)
            if item.output is not None:
                planned.add_folder(item.output)
    if unknown and args.budget is not None:
        whole.notes.append(
            f"--budget: {', '.join(unknown)} not in the estimate, so the whole run may cost more"
        )
    whole.prices = Prices(own)
    return whole


def _moved(path: Any, planned_at: Any, output: Path | None) -> Path:
    """A file a stage's plan says it writes, at its place under the stage's real output.

    A stage to redo is planned at another place (its stale output is not its own); what it
    writes is written under `output`.
    """
    try:
        return output / Path(path).relative_to(planned_at)  # type: ignore[operator]
    except (TypeError, ValueError):
        return Path(path)


def _unknown_inputs(item: PlannedStage, planned: Any) -> list[str]:
    """The paths the stage's options name that an earlier stage would make, contents unknown."""
    from moot.core.data.planned import is_planned
    from moot.graphs.loop import option_strings

    paths = (
        text.partition("=")[2] if "=" in text else text for text in option_strings(item.options)
    )
    return [path for path in paths if is_planned(path) and planned.records(path) is None]


def _reads(item: PlannedStage, planned: Any) -> str:
    """``; it reads F (N records, from ...)`` for each planned file the stage's options name."""
    from moot.graphs.loop import option_strings

    found = []
    for text in option_strings(item.options):
        records = planned.records(text.partition("=")[2] if "=" in text else text)
        if records is not None:
            found.append(f"{text.rpartition('=')[2]}: {len(records)} records")
    return f"; it reads {', '.join(found)} (as planned)" if found else ""


def _record(
    manifest: Any,
    item: PlannedStage,
    started: float,
    status: str,
    code: int,
    error: str | None = None,
    used: Any = None,
) -> None:
    """A stage's end in the manifest: status, exit code, time, ledger, outputs.

    The ledger is the one the command wrote (every run on its folder); a command that writes
    none (`moot generate`) has its result's ledger of this run, ``used``.
    """
    from moot.graphs.loop import listed, now, written_ledger

    ledger = written_ledger(item.output)
    if ledger is None and used is not None and used.entries:
        ledger = used.to_json()

    manifest.update(
        item.stage.name,
        status=status,
        exit_code=code,
        error=error,
        finished=now(),
        seconds=round(time.perf_counter() - started, 1),
        ledger=ledger,
        outputs=listed(item.output),
    )
