"""Options declared once: `--config` on every command, `--limit` on every model-calling one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from moot.cli.main import build_parser, main
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import ARGUMENTS_REPLY, read_jsonl, run_moot
from tests.cli.test_eval import CONTROL_RULES, QUALITY_RULES, eval_args, responses_file


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """Every runnable command's path and parser (groups like `eval` are not commands)."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] != name:  # an alias: the same parser again
                    continue
                inner = commands(sub, (*path, name))
                found.update(inner or {(*path, name): sub})
    return found


COMMANDS = commands(build_parser())
# the commands that call a model, and so run their work through the run engine
MODEL_CALLING = {
    ("debate",),
    ("generate",),
    ("judge",),
    ("answer",),
    ("curate",),
    ("retrieve",),
    ("compare",),
    ("eval", "controllability"),
    ("eval", "quality"),
    ("eval", "da"),
    ("eval", "berds"),
    ("eval", "detector"),
    ("eval", "compqa"),
    ("eval", "pd"),
}


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_the_tree_holds_every_command():
    assert set(COMMANDS) >= MODEL_CALLING
    assert {("merge-shards",), ("train", "sft"), ("report", "compqa"), ("models", "check")} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_takes_a_config_file_and_names_an_unknown_key(path, tmp_path, capsys):
    parser = COMMANDS[path]
    if path in {("train", "sft"), ("train", "dpo")}:  # its --config is the training config
        assert {"--config", "--quiet", "--debug"} <= flags(parser)
        return
    assert {"--config", "--quiet", "--debug"} <= flags(parser)
    config = tmp_path / "c.yaml"
    config.write_text("no_such_option: 1\n", encoding="utf-8")
    positional = {
        ("merge-shards",): ["d"],
        ("view",): ["d"],
        ("models", "check"): ["local/smollm2"],
        ("run",): ["r"],
        ("templates", "export"): ["d"],
        ("protocol",): ["p"],
        ("collect",): ["d"],
        ("report", "agreement"): ["d"],
        ("data", "preferences"): ["d"],
    }
    assert main([*path, *positional.get(path, []), "--config", str(config)]) == 2
    assert "c.yaml: unknown option 'no_such_option'" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted(MODEL_CALLING), ids=" ".join)
def test_every_model_calling_command_takes_a_limit(path):
    assert "--limit" in flags(COMMANDS[path])


@pytest.mark.subprocess
def test_a_config_file_gives_required_flags_lists_and_choices_and_the_command_line_wins(tmp_path):
    responses = responses_file(
        tmp_path / "r.json", [("affirmative", "AFF-FULL a"), ("negative", "NEG-FULL a")]
    )
    with ScriptedServer(rules=CONTROL_RULES) as server:
        config = tmp_path / "run.yaml"
        config.write_text(
            f"responses: {responses}\nout: {tmp_path / 'from-config'}\njudge: openai/judge\n"
            f"api-base: {server.url}\nmax_retries: 0\nconcurrency: 3\n",
            encoding="utf-8",
        )
        result = run_moot("eval", "controllability", "--config", config, "--out", tmp_path / "cli")
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "cli" / "summary.json").exists()  # the command line won
    assert not (tmp_path / "from-config").exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("framework: nonesuch\n", "option 'framework': 'nonesuch' is not one of debatrix"),
        ("repeats: 0\n", "option 'repeats': must be a positive integer, got 0"),
        ("debates: [a, b]\n", "option 'debates': expected one value, got a list or mapping"),
        ("quiet: 1\n", "option 'quiet': expected true or false"),
    ],
)
def test_a_config_value_its_flag_would_refuse_is_named(text, problem, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(text, encoding="utf-8")
    assert main(["judge", "--config", str(config)]) == 2
    assert problem in capsys.readouterr().err


def test_a_required_flag_missing_everywhere_is_named(capsys):
    assert main(["eval", "controllability", "--out", "x"]) == 2
    assert "missing --responses (on the command line or as `responses:` in --config)" in (
        capsys.readouterr().err
    )


@pytest.mark.subprocess
def test_limit_judges_the_first_items_and_a_rerun_without_it_does_the_rest(tmp_path):
    texts = [("affirmative", "AFF-FULL a"), ("negative", "NEG-FULL a"), ("negative", "NEG-HALF")]
    responses = responses_file(tmp_path / "r.json", texts)
    out = tmp_path / "out"
    with ScriptedServer(rules=CONTROL_RULES) as server:
        args = eval_args("controllability", server, out, "--responses", responses)
        first = run_moot(*args, "--limit", 2)
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 2 and len(read_jsonl(out / "judgments.jsonl")) == 2
        assert json.loads((out / "summary.json").read_text())["items"] == 2
        rest = run_moot(*args)
        assert rest.returncode == 0, rest.stderr
        assert len(server.requests) == 3  # only the third response was judged now
    assert json.loads((out / "summary.json").read_text())["items"] == 3
    # the summary table says what each run did
    assert "judgments        2            0         2       0" in first.stdout
    assert "judgments        3            2         1       0" in rest.stdout


@pytest.mark.subprocess
def test_limit_on_debate_pays_only_for_the_argument_lists_it_needs(tmp_path):
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps(["Topic one", "Topic two", "Topic three"]), encoding="utf-8")
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    out = tmp_path / "run"
    with ScriptedServer(rules=rules) as server:
        result = run_moot(
            "debate", "--topics", topics, "--out", out, "--model", "openai/m",
            "--api-base", server.url, "--rounds", 1, "--arguments-per-stance", 2,
            "--limit", 3, "--quiet",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        asked = [r for r in server.requests if "list your arguments" in json.dumps(r.body)]
    debates = read_jsonl(out / "debates.jsonl")
    assert len(debates) == 3
    assert len(asked) == 2  # two lists of two give the three debates; four lists were not paid


def test_models_check_has_the_call_options_once(tmp_path):
    parser = COMMANDS[("models", "check")]
    assert parser.get_default("max_retries") == 0 and parser.get_default("timeout") == 60.0
    assert {"--api-base", "--api-key-env", "--timeout"} <= flags(parser)


def test_help_is_fast_to_build_and_lists_every_paper():
    text = build_parser().format_help()
    for name in ("debate", "judge", "answer", "compare", "train", "eval"):
        assert name in text


def test_merge_is_an_alias_of_merge_shards(tmp_path, capsys):
    missing = Path(tmp_path / "nothing")
    assert main(["merge", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert "not a `moot debate` output folder" in capsys.readouterr().err


@pytest.mark.subprocess
def test_a_config_file_reaches_the_command_it_was_given_to(tmp_path):
    """`eval controllability` and `eval quality` share one function; each reads its own keys."""
    texts = [("affirmative", "AFF-FULL a"), ("negative", "NEG-FULL a")]
    responses = responses_file(tmp_path / "r.json", texts)
    with ScriptedServer(rules=QUALITY_RULES) as server:
        config = tmp_path / "q.yaml"
        config.write_text(
            f"responses: {responses}\nbaseline: {responses}\nout: {tmp_path / 'q'}\n"
            f"judge: openai/judge\napi-base: {server.url}\nmask: [Alice]\n",
            encoding="utf-8",
        )
        result = run_moot("eval", "quality", "--config", config)
    assert "error" not in result.stderr, result.stderr  # every required flag came from the file
    claim = json.loads((tmp_path / "q" / ".moot" / "eval.json").read_text())
    assert claim["evaluation"] == "quality" and claim["mask"] == ["Alice"]


def test_negated_and_bare_flags_in_a_config_mean_what_the_flags_mean(tmp_path):
    parser = build_parser()
    config = tmp_path / "c.yaml"
    config.write_text("no-constrained: true\n", encoding="utf-8")
    argv = ["judge", "--config", str(config)]
    from moot.cli.config import apply_config

    args = apply_config(parser, argv, parser.parse_args(argv))
    assert args.constrained is False
    config.write_text("dense: true\n", encoding="utf-8")
    argv = ["index", "--config", str(config)]
    parser = build_parser()
    assert apply_config(parser, argv, parser.parse_args(argv)).dense == ""  # the bare flag


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["data", "mix", "--out", "o"], "missing --in (on the command line or as `in:` in"),
        (["eval", "detector", "--pairs", "p", "--out", "o"], "missing --detector (on the"),
        (["eval", "berds", "--retrieved", "r", "--perspectives", "p", "--out", "o"], "missing -k"),
        (["train", "sft"], "missing --config\n"),
    ],
)
def test_a_missing_flag_is_named_as_it_is_typed(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err
