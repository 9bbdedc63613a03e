"""Bad input: one clear line naming the file/record/endpoint, exit 2, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from moot.cli import main
from moot.testing import refused_url
from tests.cli.helpers import moot_env, run_moot, write_topics


def assert_clean_failure(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("moot: error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


TOPIC_FILES = {
    "missing": (None, "file not found"),
    "empty.json": (b"", "file is empty"),
    "blank.jsonl": (b"  \n\n", "file is empty"),
    "malformed.jsonl": (b'{"topic": "a"}\n{"topic": \n', "line 2"),
    "unknown.jsonl": (b'{"topic": "a", "stance": "pro"}\n', "unknown column 'stance'"),
    "notopic.csv": (b"title\nzoos\n", "missing 'topic' column"),
    "emptytopic.json": (b'["zoos", "  "]', "empty topic"),
    "latin1.json": ('["caf\u00e9 culture"]'.encode("latin-1"), "not UTF-8"),
    "noargs.jsonl": (
        b'{"topic": "a", "Affirmative": {"arguments": []}, "Negative": {"arguments": ["x"]}}\n',
        "'Affirmative' needs a non-empty 'arguments' list",
    ),
}


@pytest.mark.subprocess
@pytest.mark.parametrize("name", TOPIC_FILES)
def test_bad_topic_files(name, tmp_path, scripted_server):
    content, needle = TOPIC_FILES[name]
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    out = tmp_path / "out"
    result = run_moot(
        "debate",
        "--topics",
        path,
        "--out",
        out,
        "--model",
        "openai/scripted",
        "--api-base",
        scripted_server.url,
    )
    assert_clean_failure(result, str(path), needle)
    assert not out.exists()
    assert scripted_server.requests == []


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("gpt4", "unknown model spec 'gpt4'"),
        ("nosuch/model", "unknown provider 'nosuch'"),
        ("local/llama", "embedded models are smollm2"),
        ("hosted_vllm/x", "needs --api-base"),
    ],
)
def test_bad_model_specs(spec, needle, tmp_path):
    topics = write_topics(tmp_path / "t.json", ["zoos"])
    result = run_moot("debate", "--topics", topics, "--out", tmp_path / "out", "--model", spec)
    assert_clean_failure(result, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.subprocess
def test_unreachable_endpoint(tmp_path):
    topics = write_topics(tmp_path / "t.json", ["zoos"])
    with refused_url() as url:
        args = ("--topics", topics, "--out", tmp_path / "out", "--model", "openai/x")
        result = run_moot("debate", *args, "--api-base", url)
    assert_clean_failure(result, f"cannot reach {url}")
    assert not (tmp_path / "out").exists()


@pytest.mark.subprocess
def test_missing_key_names_the_variable_and_never_a_value(tmp_path):
    topics = write_topics(tmp_path / "t.json", ["zoos"])
    result = run_moot(
        "debate", "--topics", topics, "--out", tmp_path / "out", "--model", "openai/gpt-4o-mini"
    )
    assert_clean_failure(result, "set OPENAI_API_KEY")
    env = moot_env(MY_KEY="")
    result = run_moot(
        "debate",
        "--topics",
        topics,
        "--out",
        tmp_path / "out",
        "--model",
        "openai/x",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--api-key-env",
        "MY_KEY",
        env=env,
    )
    assert_clean_failure(result, "set MY_KEY")


@pytest.mark.subprocess
def test_wrong_key_is_a_clean_failure_that_never_shows_the_key(tmp_path):
    from moot.testing import ScriptedServer

    topics = write_topics(tmp_path / "t.json", ["zoos"])
    with ScriptedServer(api_key="right-key") as server:
        env = moot_env(MY_KEY="sk-wrong-SECRET-value")
        result = run_moot(
            "debate",
            "--topics",
            topics,
            "--out",
            tmp_path / "out",
            "--model",
            "openai/x",
            "--api-base",
            server.url,
            "--api-key-env",
            "MY_KEY",
            "--arguments-per-stance",
            1,
            env=env,
        )
    assert_clean_failure(result, "authentication failed", "HTTP 401")  # stops at once
    everything = (
        result.stdout
        + result.stderr
        + "".join(
            p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*") if p.is_file()
        )
    )
    assert "SECRET" not in everything


def test_help_is_fast_because_it_imports_nothing_heavy():
    code = (
        "import sys\n"
        "from moot.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('langgraph', 'litellm', 'datasets', 'torch', 'openai',"
        " 'langchain_openai', 'xllamacpp', 'transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "HEAVY []" in result.stdout


@pytest.mark.subprocess
def test_models_check_round_trip_and_unreachable(scripted_server):
    ok = run_moot("models", "check", "openai/scripted", "--api-base", scripted_server.url)
    assert ok.returncode == 0, ok.stderr
    assert "openai/scripted: ok in" in ok.stdout and "completion tokens" in ok.stdout
    with refused_url() as url:
        bad = run_moot("models", "check", "openai/scripted", "--api-base", url)
    assert_clean_failure(bad, f"cannot reach {url}")


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "soon"])
def test_models_check_refuses_a_timeout_that_is_not_positive(timeout, scripted_server, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(
            ["models", "check", "openai/x", "--api-base", scripted_server.url, "--timeout", timeout]
        )
    assert exit_.value.code == 2 and scripted_server.requests == []
    assert (
        f"--timeout: must be a positive number of seconds, got {timeout}" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--timeout", "-1", "--timeout: must be a positive number of seconds, got -1"),
        ("--mask", " ", "--mask: must be a non-blank name"),
    ],
)
def test_bad_judge_options_are_refused_before_anything(option, value, message, tmp_path, capsys):
    responses = ["--responses", "r.json", "--baseline", "b.json", "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "quality", *responses, option, value])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_debug_adds_the_traceback_and_keeps_exit_2(tmp_path, capsys):
    missing = tmp_path / "missing.json"
    args = ["report", "compqa", "--judged", str(missing), "--out", str(tmp_path / "r")]
    assert main(["--debug", *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (
        "Traceback" in err
        and err.splitlines()[-1] == f"moot: error: --judged {missing}: file not found"
    )


@pytest.mark.subprocess
def test_no_command_prints_help_and_fails():
    result = run_moot()
    assert result.returncode == 2 and "debate" in result.stdout


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "command",
    [
        ("report", "compqa", "--judged", "{judged}"),
        ("eval", "compqa", "--answers", "{judged}"),
    ],
)
def test_an_out_that_is_a_file_is_one_line(tmp_path, command):
    judged = tmp_path / "gpt4_scenario_1.json"
    record = {"object1": "a", "object2": "b", "comparison": "A.", "score": 12}
    judged.write_text(json.dumps([record]), encoding="utf-8")
    taken = tmp_path / "taken"
    taken.write_text("mine", encoding="utf-8")
    args = [part.format(judged=judged) for part in command]
    result = run_moot(*args, "--out", taken, "--no-cache" if command[0] == "eval" else "--quiet")
    assert_clean_failure(result, str(taken))
    assert taken.read_text() == "mine"
