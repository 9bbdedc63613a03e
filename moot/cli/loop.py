"""`moot run RECIPE.yaml`: the loop (debate → dataset → SFT → generate → judge → report) in one.

Each stage's options are parsed by its own command's parser (`moot.cli.config.option_defaults`),
every stage before the first one runs; the stages then run in this process, one after another,
through the same path as the command line (`moot.cli.runtime.execute`). The recipe, keys, manifest
and report are `moot.graphs.loop`'s.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moot.cli import options as opt
from moot.cli.registry import Commands


def register(commands: Commands) -> None:
    """Add `moot run`."""
    run = commands.add(
        "run",
        run_recipe,
        "run a recipe: debate, dataset, SFT, generate, judge, report, resumably",
        "Run the stages a recipe names, each a moot command with its own options, into one "
        "folder with a manifest and report.md. A finished stage is skipped on rerun, an "
        "interrupted one resumes, a changed one reruns with the stages that use it. See "
        "docs/cli.md.",
        plan=plan_recipe,
    )
    run.add_argument("recipe", type=opt.input_file, metavar="RECIPE", help="the recipe (YAML)")
    opt.out_option(
        run,
        "the run's folder: a folder per stage, manifest.json, report.md",
        default="runs/<recipe name>",
        resolve=lambda args: Path("runs") / args.recipe.stem,
    )
    run.set_defaults(holds_runs=True)  # its stages' run folders
    opt.cost_options(run)
    opt.common_options(run)


@dataclass
class PlannedStage:
    """A stage ready to run: its parsed command line, output and key.

    Args:
        stage: The recipe's stage.
        args: Its command's parsed arguments (what `moot run --dry-run` will plan from).
        options: Its options with references resolved (recorded in the manifest).
        output: Its output (``OUT/<stage>`` or ``OUT/<stage>.json``), None if it writes none.
        key: Its key (`moot.graphs.loop.stage_key`) and input files' hashes.
        depends_on: The stages it refers to.
    """

    stage: Any
    args: argparse.Namespace
    options: dict[str, Any]
    output: Path | None
    key: dict[str, Any]
    depends_on: list[str]


def plan(
    recipe: Any,
    out: Path,
    parser: argparse.ArgumentParser,
    quiet: bool = False,
    verbose: bool = False,
) -> list[PlannedStage]:
    """Every stage parsed and checked, before any runs.

    Args:
        recipe: The recipe (`moot.graphs.loop.load_recipe`).
        out: The run's folder.
        parser: The whole ``moot`` parser (`moot.cli.main.build_parser`).
        quiet: Run every stage ``--quiet``.
        verbose: Run every stage ``--verbose``.

    Raises:
        InputError: A stage names an unknown command, an unknown option, a value its flag
            refuses, lacks a required option, sets ``out``, or its SFT config does not load.
    """
    from moot.graphs.loop import references, resolve, stage_key

    planned: list[PlannedStage] = []
    outputs: dict[str, Path] = {}
    keys: dict[str, str] = {}
    for stage in recipe.stages:
        options = resolve(stage.options, outputs)
        args, output = _parse(parser, recipe, stage, options, out / stage.name, quiet, verbose)
        depends_on = references(stage.options)
        key = stage_key(stage, options, {name: keys[name] for name in depends_on}, out)
        planned.append(PlannedStage(stage, args, options, output, key, depends_on))
        outputs[stage.name] = output if output is not None else out / stage.name
        keys[stage.name] = key["key"]
    return planned


def _parse(
    parser: argparse.ArgumentParser,
    recipe: Any,
    stage: Any,
    options: dict[str, Any],
    out: Path,
    quiet: bool,
    verbose: bool,
) -> tuple[argparse.Namespace, Path | None]:
    from moot.cli.config import option_defaults
    from moot.core.errors import InputError

    where = f"stage {stage.name}: "
    command = _command_parser(parser, stage.command)
    if command is None:
        raise InputError(recipe.path, f"{where}unknown command {' '.join(stage.command)!r}")
    if "out" in options:
        raise InputError(
            recipe.path, f"{where}`out` is set by moot run ({out}); refer to it as {{{stage.name}}}"
        )
    defaults = option_defaults(command, options, recipe.path, where, positionals=True)
    actions = {action.dest: action for action in command._actions}
    positional = [dest for dest in defaults if not actions[dest].option_strings]
    argv = [str(v) for dest in positional for v in _as_list(defaults.pop(dest))]
    output = None
    if "out" in actions:  # a folder, or a file for `moot generate`
        output = out.with_suffix(".json") if actions["out"].type is opt.output_file else out
        defaults["out"] = output
    if "overrides" in actions and "train_config" in actions:  # `moot train sft`
        if any(str(item).startswith("training.output_dir=") for item in argv):
            raise InputError(recipe.path, f"{where}training.output_dir is set by moot run ({out})")
        argv.append(f"training.output_dir={out}")
        output = out
    for flag, given in (("quiet", quiet), ("verbose", verbose)):
        if given and flag in actions:
            defaults.setdefault(flag, True)
    # no option is on this command line, so the recipe's values go over the parsed defaults
    # (set_defaults would change the parser every stage shares)
    args = parser.parse_args([*stage.command, *argv])
    for dest, value in defaults.items():
        setattr(args, dest, value)
    for dest in getattr(args, "required_flags", ()):
        if getattr(args, dest, None) is None:
            flag = max(actions[dest].option_strings, key=len).lstrip("-")
            raise InputError(recipe.path, f"{where}missing option {flag!r}")
    if "train_config" in actions:  # its config's keys are checked now too, not an hour in
        _check_sft(recipe, where, args)
    return args, output


def _check_sft(recipe: Any, where: str, args: argparse.Namespace) -> None:
    from moot.core.errors import InputError, MootError
    from moot.training.sft_config import load_sft_config

    if not Path(args.train_config).is_file():
        raise InputError(recipe.path, f"{where}config {args.train_config}: file not found")
    try:
        load_sft_config(args.train_config, args.overrides)
    except MootError as exc:
        raise InputError(recipe.path, f"{where}{exc}") from None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _command_parser(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> Any:
    """The parser of command `words` (``("eval", "quality")``), or None."""
    for word in words:
        choices = next(
            (a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
            None,
        )
        if not choices or word not in choices:
            return None
        parser = choices[word]
    if parser.get_default("command_parser") is not parser or parser.get_default("command_fn") in (
        None,
        run_recipe,
    ):
        return None  # a group (`eval`) or `run` itself
    return parser


def run_recipe(args: argparse.Namespace) -> int:
    """`moot run`."""
    from moot.cli.runtime import BUDGET_EXIT, execute
    from moot.core.errors import BudgetReached, ConfigError, MootError, WriteError, machine_failure
    from moot.graphs.loop import Manifest, discard, load_recipe, now, write_report, write_run_view

    if not args.recipe.is_file():
        raise ConfigError(f"{args.recipe}: recipe not found")
    recipe = load_recipe(args.recipe)
    run_options(args, recipe)
    stages = plan(recipe, args.out, args.root_parser, args.quiet, args.verbose)
    manifest = Manifest(args.out, recipe)
    say = (lambda line: None) if args.quiet else print
    spent = 0.0  # USD this run's stages spent, against its --budget
    for item in stages:
        name, key = item.stage.name, item.key["key"]
        entry = manifest.stages.get(name, {})
        present = item.output is None or item.output.exists()
        if manifest.done(name, key) and present:
            say(f"stage {name}: done before (key {key}), skipped")
            continue
        if manifest.changed(name, key) and item.output is not None:
            print(
                f"moot: stage {name} changed since its last run (or a stage it uses did): "
                f"its output {item.output} is redone",
                file=sys.stderr,
            )
            discard([item.output])
        say(f"stage {name}: {item.stage.title}" + (" (resuming)" if entry else ""))
        manifest.update(
            name,
            command=item.stage.title,
            options=item.options,
            key=key,
            inputs=item.key["inputs"],
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
            code = execute(item.args)
        except KeyboardInterrupt:
            _record(manifest, item, started, "interrupted", 130)
            raise
        except (MootError, OSError, WriteError, BudgetReached) as exc:  # main prints its line
            stopped = isinstance(exc, BudgetReached)
            code = BUDGET_EXIT if stopped else 1 if machine_failure(exc) else 2
            _record(manifest, item, started, "stopped" if stopped else "failed", code, str(exc))
            write_run_view(args.out, manifest)
            write_report(args.out, recipe, manifest)
            raise
        used = stage_ledger(item.args)
        spent += used.spent() or 0.0
        status = {0: "done", BUDGET_EXIT: "stopped"}.get(code, "failed")
        _record(manifest, item, started, status, code, used=used)
        if code:
            write_run_view(args.out, manifest)
            write_report(args.out, recipe, manifest)
            how = "failed"
            if status == "stopped":
                how = "stopped at its --budget"
                if args.budget is not None:
                    how = (
                        f"stopped at the run's --budget ${args.budget:.4f} "
                        f"(${spent:.4f} spent by this run)"
                    )
            print(
                f"moot: stage {name} {how} (exit {code}); the stages after it did not run; "
                f"rerun `moot run {args.recipe}` to resume it"
                + (" (with a larger --budget)" if status == "stopped" else ""),
                file=sys.stderr,
            )
            return code
    write_run_view(args.out, manifest)
    report = write_report(args.out, recipe, manifest)
    say(f"report   {report}\nmanifest {manifest.path}")
    return 0


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

    A stage's own ``budget`` still bounds it; its spending is counted through the model clients
    its command makes (``stage.clients``, `stage_ledger`). Its output lies inside the run's folder
    (``stage.run_folder``, `moot.cli.runtime.check_paths`).

    Args:
        stage: The stage's parsed command line.
        args: `moot run`'s.
        spent: USD the run's earlier stages spent.
    """
    stage.clients = []
    stage.run_folder = args.out
    if hasattr(stage, "prices") and stage.prices is None:
        stage.prices = args.prices
    if hasattr(stage, "budget") and args.budget is not None:
        left = max(0.0, args.budget - spent)
        stage.budget = left if stage.budget is None else min(stage.budget, left)


def stage_ledger(stage: argparse.Namespace) -> Any:
    """What a stage's model clients used in this run (a run with a budget prices every call).

    The clients are let go of then: an ``hf/`` model's weights are not held for later stages.
    """
    from moot.core.llm.ledger import UsageLedger

    clients, stage.clients = getattr(stage, "clients", []), []
    return UsageLedger.merged(client.ledger for client in clients)


def plan_recipe(args: argparse.Namespace) -> Any:
    """`moot run --dry-run`: every stage's plan in one, stage by stage; nothing run or written.

    A stage done before is skipped, as a run skips it. A stage that reads the output of a stage
    not yet done is planned from what that stage's plan says it would write (`Plan.outputs`,
    read through `moot.core.data.planned`: the records done, stand-ins at their full budgets
    for the replies to come); a folder that a stage calling no model would make (`moot train
    sft`'s adapter) counts as there. A stage whose input no earlier plan can tell is named in a
    note and left out of the totals.
    """
    from moot.cli.runtime import check_paths, check_required, plan_for
    from moot.core.data.planned import planned_files
    from moot.core.errors import ConfigError, MootError
    from moot.core.llm.prices import Prices
    from moot.core.plan import Plan, PlanItems
    from moot.graphs.loop import Manifest, load_recipe

    if not args.recipe.is_file():
        raise ConfigError(f"{args.recipe}: recipe not found")
    recipe = load_recipe(args.recipe)
    run_options(args, recipe)
    manifest = Manifest(args.out, recipe)  # read only: written by a run
    whole, done, unknown, own = Plan(), set(), [], {}
    with planned_files() as planned:
        for item in plan(recipe, args.out, args.root_parser, quiet=True):
            name, title = item.stage.name, item.stage.title
            if manifest.done(name, item.key["key"]) and (
                item.output is None or item.output.exists()
            ):
                whole.notes.append(f"stage {name}: done before, skipped")
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
            for_the_run(item.args, args, 0.0)  # the prices a run would give it
            if getattr(item.args, "plan_fn", None) is None:
                whole.notes.append(f"stage {name} ({title}): calls no model{_reads(item, planned)}")
                if item.output is not None:
                    planned.add_folder(item.output)
                continue
            try:
                check_required(item.args)
                check_paths(item.args)
                stage = plan_for(item.args)
            except MootError as exc:
                if not _unknown_inputs(item, planned):  # bad input: refused as a run would
                    raise
                whole.notes.append(
                    f"stage {name} ({title}): not in the estimate; it reads the output of "
                    f"{', '.join(waits)}, which their plans cannot tell ({exc})"
                )
                unknown.append(name)
                continue
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
            own.update(stage.prices.own)
            for path, records in stage.outputs.items():
                planned.add_file(path, records)
            if item.output is not None:
                planned.add_folder(item.output)
    if unknown and args.budget is not None:
        whole.notes.append(
            f"--budget: {', '.join(unknown)} not in the estimate, so the whole run may cost more"
        )
    whole.prices = Prices(own)
    return whole


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
    none (`moot generate`) has its model clients' ledger of this run, ``used``.
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
