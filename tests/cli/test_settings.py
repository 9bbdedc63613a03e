"""A command's settings (`moot.cli.settings`): the command line derived from them, and back."""

from __future__ import annotations

import argparse
from pathlib import Path

import pydantic
import pytest

import moot
from moot.cli import options as opt
from moot.cli.config import option_defaults
from moot.cli.main import main
from moot.cli.runtime import check_required, path_flags
from moot.cli.settings import Settings, flag


class Greet(opt.run_settings(3, "greetings")):
    """A command of its own: positional, required, parsed, grouped, redeclared settings."""

    names: list[str] = flag(positional=True, nargs="+", metavar="NAME", help="who")
    rounds: int = flag(2, parse=opt.non_negative, metavar="M", help="rounds (default 2)")
    letter: Path = flag(parse=opt.input_file, group="input", help="the letter (required)")
    out: Path = opt.out_flag()
    tone: str = flag("warm", choices=("warm", "dry"), flags=("--tone", "-t"))
    loud: bool = flag(False, action="store_true")
    seconds: float = 1.5  # no flag: the command's own
    concurrency: int = 5  # the base's flag, with a default of this command's


def greet_parser() -> argparse.ArgumentParser:
    return Greet.add_to(argparse.ArgumentParser(prog="greet"))


def test_a_settings_class_gives_its_parser():
    parser = greet_parser()
    actions = {action.dest: action for action in parser._actions}
    # own settings first, in their order, then the bases'; groups where their first flag is
    assert [a.dest for a in parser._actions][1:8] == [
        "names",
        "rounds",
        "letter",
        "out",
        "tone",
        "loud",
        "concurrency",
    ]
    assert actions["names"].option_strings == [] and actions["names"].nargs == "+"
    assert actions["rounds"].type is opt.non_negative and actions["rounds"].default == 2
    assert actions["rounds"].metavar == "M" and actions["rounds"].help == "rounds (default 2)"
    assert actions["letter"].type is opt.input_file
    assert actions["tone"].option_strings == ["--tone", "-t"] and actions["tone"].choices
    assert actions["loud"].nargs == 0
    titles = [group.title for group in parser._action_groups]
    assert titles[2:] == ["input", "run", "batch", "output"]
    assert actions["concurrency"].default == 5 and "(default 3)" in actions["concurrency"].help
    assert actions["limit"].help == "only the first N greetings (default: all)"
    assert actions["debug"].default is argparse.SUPPRESS
    assert parser.get_default("seconds") == 1.5
    # required: the fields without a default (--out first); the positional is argparse's
    assert parser.get_default("required_flags") == ("out", "letter")
    assert parser.get_default("out_folder") is True

    args = parser.parse_args(["ann", "bob", "--letter", "l.txt", "--out", "o", "-t", "dry"])
    args.command_parser, args.settings_class = parser, Greet
    settings = Greet.from_args(args)
    assert settings.names == ["ann", "bob"] and settings.tone == "dry"
    assert settings.letter == Path("l.txt") and settings.rounds == 2 and settings.seconds == 1.5
    with pytest.raises(pydantic.ValidationError):
        settings.rounds = 3  # type: ignore[misc]  # frozen
    # path kinds and required flags are the settings'
    assert ("letter", "file", "--letter") in path_flags(args)
    assert ("out", None, "--out") in path_flags(args)
    args.letter = None
    with pytest.raises(moot.ConfigError, match=r"^missing --letter \(on the command line or as "):
        check_required(args)


def test_a_value_is_refused_alike_as_flag_config_key_and_keyword(tmp_path, capsys):
    problem = "must be an integer of 0 or more, got -1"
    with pytest.raises(moot.InputError, match=f"^c.yaml: option 'rounds': {problem}$"):
        option_defaults(greet_parser(), {"rounds": -1}, "c.yaml")
    with pytest.raises(moot.InputError, match="unknown option 'round'.*did you mean 'rounds'"):
        option_defaults(greet_parser(), {"round": 1}, "c.yaml")

    # a command that is a job: `moot judge --repeats 0`, as a flag, a config key, a keyword
    positive = "must be a positive integer, got 0"
    debates = tmp_path / "debates.json"
    debates.write_text("[]", encoding="utf-8")
    base = ["judge", "--debates", str(debates), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as flagged:
        main([*base, "--repeats", "0"])
    assert flagged.value.code == 2
    assert f"argument --repeats: {positive}" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("repeats: 0\n", encoding="utf-8")
    assert main([*base, "--config", str(config)]) == 2
    assert capsys.readouterr().err == f"moot: error: {config}: option 'repeats': {positive}\n"
    with pytest.raises(moot.ConfigError) as keyword:
        moot.judge(debates=debates, out=tmp_path / "out", repeats=0)
    assert str(keyword.value) == f"moot.judge(): keyword 'repeats': {positive}"
    with pytest.raises(moot.ConfigError) as missing:
        moot.judge(out=tmp_path / "out")
    assert str(missing.value) == "moot.judge(): missing keyword 'debates'"


def test_every_job_reads_its_settings_from_its_defaults():
    """Each job's settings validate its parser's defaults: the types say what argparse gives."""
    from moot.cli.main import build_parser
    from tests.cli.test_options import commands

    jobs = 0
    for words, parser in commands(build_parser()).items():
        schema = parser.get_default("settings_class")
        if schema is None:
            continue
        jobs += 1
        assert issubclass(schema, Settings), words
        defaults = {name: parser.get_default(name) for name in schema.model_fields}
        args = argparse.Namespace(  # (a positional's value is argparse's alone: none yet)
            **{
                name: value
                for name, value in defaults.items()
                if value not in (argparse.SUPPRESS, None)
            }
        )
        for name, field in schema.model_fields.items():  # a required one: as argparse gives it
            if field.is_required() or name == "out":  # (a default --out: resolved by then)
                how = schema.flag(name)
                value = (how.parse or str)("1")
                setattr(args, name, [value] if how.nargs == "+" else value)
        schema.from_args(args)
    assert jobs >= 7


def test_a_jobs_plan_is_its_run_against_a_client_that_never_sends():
    from moot.cli.main import build_parser
    from moot.cli.models import Check

    argv = ["models", "check", "openai/gpt-4o-mini", "--api-base", "http://127.0.0.1:9/v1"]
    args = build_parser().parse_args(argv)  # nothing listens on port 9: a request would fail
    args.notes = []
    plan = Check.of(args).plan()
    assert plan.calls == 1 and [items.unit for items in plan.items] == ["round trips"]
