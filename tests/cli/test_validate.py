"""Everything that can be known before the first call is checked before it (issue 16, item 9).

Temperatures, input paths, output names and config keys: one line, exit 2, no request sent and
nothing written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from moot.cli.main import main
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import run_moot
from tests.cli.test_eval import QUALITY_RULES, responses_file

# (command, its temperature flags, what else it needs to get past the required flags)
TEMPERATURE_FLAGS = [
    (("debate",), ("--temperature", "--temperature-a", "--temperature-b"), ["--topics", "t"]),
    (("answer",), ("--temperature", "--agent-temperature"), ["--questions", "q"]),
    (("judge",), ("--temperature",), ["--debates", "d"]),
    (("compare",), ("--temperature",), ["--questions", "q", "--scenario", "1"]),
    (("models", "check"), ("--temperature",), ["local/smollm2"]),
]
TEMPERATURE_CASES = [
    (command, flag, value, needs)
    for command, flags, needs in TEMPERATURE_FLAGS
    for flag in flags
    for value in ("nan", "-1", "3", "inf", "warm")
]


@pytest.mark.parametrize(
    ("command", "flag", "value", "needs"),
    TEMPERATURE_CASES,
    ids=[f"{' '.join(c)} {f} {v}" for c, f, v, _ in TEMPERATURE_CASES],
)
def test_a_temperature_outside_0_to_2_is_refused(command, flag, value, needs, tmp_path, capsys):
    out = [] if command == ("models", "check") else ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_:
        main([*command, *needs, *out, f"{flag}={value}"])
    assert exit_.value.code == 2
    assert f"{flag}: must be a number from 0 to 2, got {value}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key", ["temperature", "temperature-a", "temperature_b"])
def test_a_temperature_in_a_config_file_goes_through_the_same_check(key, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(f"{key}: .nan\n", encoding="utf-8")
    assert main(["debate", "--topics", "t", "--out", str(tmp_path / "o"), "--config", str(config)])
    err = capsys.readouterr().err.strip()
    assert err == f"moot: error: {config}: option {key!r}: must be a number from 0 to 2, got nan"


@pytest.mark.subprocess
def test_temperatures_0_and_2_are_taken(tmp_path):
    with ScriptedServer() as server:
        for value in ("0", "2"):
            result = run_moot(
                "models", "check", "openai/m", "--api-base", server.url, "--temperature", value
            )
            assert result.returncode == 0, result.stderr
        assert [r.body["temperature"] for r in server.requests if r.body] == [0, 2]


# every input path flag: (command, flag, kind, the other flags it needs); "{file}" and "{dir}"
# are replaced by an existing file and folder
INPUT_FLAGS = [
    (("judge",), "--debates", "any", []),
    (("eval", "panelbench"), "--predictions", "folder", ["--gold", "{file}"]),
    (("eval", "panelbench"), "--gold", "any", ["--predictions", "{dir}"]),
    (("eval", "controllability"), "--responses", "file", []),
    (("eval", "quality"), "--responses", "file", ["--baseline", "{file}"]),
    (("eval", "quality"), "--baseline", "file", ["--responses", "{file}"]),
    (("answer",), "--questions", "file", []),
    (("answer",), "--index", "folder", ["--questions", "{file}"]),
    (("curate",), "--questions", "file", ["--docs", "{file}"]),
    (("curate",), "--docs", "any", ["--questions", "{file}"]),
    (("eval", "pd"), "--answers", "file", ["--partial-answers", "{file}"]),
    (("eval", "pd"), "--partial-answers", "file", ["--answers", "{file}"]),
    (("eval", "da"), "--answers", "file", []),
    (("eval", "da"), "--questions", "file", ["--answers", "{file}"]),
    (("report", "debateqa"), "--pd", "folder", ["--da", "{dir}"]),
    (("report", "debateqa"), "--da", "folder", ["--pd", "{dir}"]),
    (("report", "debateqa"), "--partial-answers", "file", ["--pd", "{dir}", "--da", "{dir}"]),
    (("index",), "--docs", "any", []),
    (("retrieve",), "--questions", "file", []),
    (("retrieve",), "--index", "folder", ["--questions", "{file}"]),
    (("eval", "berds"), "--retrieved", "file", ["-k", "5"]),
    (("eval", "berds"), "--perspectives", "file", ["--retrieved", "{file}", "-k", "5"]),
    (("eval", "detector"), "--pairs", "file", ["--detector", "openai/m"]),
    (("compare",), "--questions", "file", ["--scenario", "2"]),
    (("compare",), "--arguments", "file", ["--questions", "{file}", "--scenario", "2"]),
    (("eval", "compqa"), "--answers", "file", []),
    (("report", "compqa"), "--judged", "file", []),
    (("report", "compqa"), "--human", "file", ["--judged", "{file}"]),
    (("data", "distill-compqa"), "--judged", "file", []),
    (("train", "sft"), "--config", "file", []),
    (("train", "merge"), "--adapter", "folder", []),
    (("models", "check"), "--config", "file", ["local/smollm2"]),
]


NO_OUT = (("models", "check"), ("train", "sft"))


def _input_argv(case: tuple, given: str, tmp_path: Path) -> list[str]:
    command, flag, _, needs = case
    (tmp_path / "a-file.json").write_text("[]", encoding="utf-8")
    (tmp_path / "a-dir").mkdir(exist_ok=True)
    swap = {"{file}": str(tmp_path / "a-file.json"), "{dir}": str(tmp_path / "a-dir")}
    out = [] if command in NO_OUT else ["--out", str(tmp_path / "out")]
    return [*command, *[swap.get(n, n) for n in needs], *out, flag, given]


@pytest.mark.parametrize("case", INPUT_FLAGS, ids=[f"{' '.join(c[0])} {c[1]}" for c in INPUT_FLAGS])
def test_a_missing_input_path_is_one_line_naming_the_flag(case, tmp_path, capsys):
    missing = tmp_path / "nowhere" / "x.json"
    assert main(_input_argv(case, str(missing), tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    kind = {"file": "file", "folder": "folder", "any": "file or folder"}[case[2]]
    assert err == f"moot: error: {case[1]} {missing}: {kind} not found"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "case",
    [c for c in INPUT_FLAGS if c[2] != "any"],
    ids=[f"{' '.join(c[0])} {c[1]}" for c in INPUT_FLAGS if c[2] != "any"],
)
def test_a_file_for_a_folder_and_a_folder_for_a_file_are_refused(case, tmp_path, capsys):
    wrong = {"file": "a-dir", "folder": "a-file.json"}[case[2]]
    assert main(_input_argv(case, str(tmp_path / wrong), tmp_path)) == 2
    err = capsys.readouterr().err.strip()
    expected = {"file": "a folder, expected a file", "folder": "a file, expected a folder"}
    assert err == f"moot: error: {case[1]} {tmp_path / wrong}: {expected[case[2]]}"


def test_a_missing_path_in_a_config_file_is_named_by_its_flag(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(f"responses: {tmp_path / 'gone.json'}\n", encoding="utf-8")
    argv = ["eval", "controllability", "--out", str(tmp_path / "o"), "--config", str(config)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"moot: error: --responses {tmp_path / 'gone.json'}: file not found"


LONG = "x" * 300


def test_an_out_name_too_long_is_refused_before_anything(tmp_path, capsys):
    out = tmp_path / LONG
    assert main(["judge", "--debates", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"moot: error: --out {out}: the name {LONG[:20]}... is 300 bytes (at most 237)"


def test_a_nul_in_a_config_path_is_one_line(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text('out: "runs/a\\0b"\n', encoding="utf-8")
    assert main(["judge", "--debates", str(tmp_path), "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip() == "moot: error: --out 'runs/a\\x00b': holds a NUL byte"


def test_an_out_file_needs_room_for_its_progress_log(tmp_path, capsys):
    # moot generate keeps .NAME.progress.jsonl beside --out and writes both through temporary
    # files: a 230-byte name fails only after every call, at the last write
    out = tmp_path / ("r" * 225 + ".json")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"topic": "t"}) + "\n", encoding="utf-8")
    assert main(["generate", "--dataset", str(dataset), "--model", "m", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"moot: error: --out {out}: the name ") and "at most 221" in err


SCORE = Rule(r'"score": <an integer from 1 to 10>', '{"comment": "ok", "score": 6}', "last")


def _debates(tmp_path: Path, debate_id: str) -> Path:
    """A file of one two-speech debate."""
    debate = {
        "id": debate_id,
        "motion": "Zoos should be banned",
        "pro": ["Alice"],
        "con": ["Bob"],
        "speeches": [
            {"speaker": "Alice", "content": "Zoos harm animals."},
            {"speaker": "Bob", "content": "Zoos save species."},
        ],
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps([debate]), encoding="utf-8")
    return path


@pytest.mark.subprocess
def test_a_debate_id_of_300_characters_gets_a_report_with_a_safe_name(tmp_path):
    debates = _debates(tmp_path, "é" * 300)
    args = ["judge", "--debates", debates, "--out", tmp_path / "out", "--judge", "openai/j"]
    with ScriptedServer(rules=[SCORE]) as server:
        result = run_moot(*args, "--api-base", server.url, "--framework", "direct")
    assert result.returncode == 0, result.stderr
    (report,) = (tmp_path / "out" / "reports").iterdir()
    assert len(report.name.encode()) <= 255 - 18 and report.name.endswith(".r0.md")
    assert "é" * 10 in report.read_text(encoding="utf-8")


def test_a_generator_name_too_long_is_refused_before_any_call(tmp_path, capsys):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"object1": "a", "object2": "b"}]), encoding="utf-8")
    argv = ["compare", "--questions", str(questions), "--scenario", "1"]
    argv += ["--out", str(tmp_path / "out")]
    assert main([*argv, "--model", "openai/m", "--generator", "g" * 250]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("moot: error: --generator ggg") and "(at most 237)" in err


def test_an_answer_file_whose_judged_copy_cannot_be_written_is_refused(tmp_path, capsys):
    answers = tmp_path / ("a" * 240 + ".json")
    record = {"object1": "a", "object2": "b", "comparison": "A is better."}
    answers.write_text(json.dumps([record]), encoding="utf-8")
    argv = ["eval", "compqa", "--answers", str(answers), "--out", str(tmp_path / "o")]
    assert main([*argv, "--judge", "openai/m", "--api-base", "http://127.0.0.1:9/v1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"moot: error: {answers}: the name ") and "(at most 237)" in err


# --- issue 16, item 4: --concurrency is what runs -------------------------------------------


def _questions(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "questions.jsonl"
    rows = [{"id": str(i), "question": f"Is question {i} debatable?"} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _answer(server: ScriptedServer, tmp_path: Path, *extra: object):
    return run_moot(
        "answer",
        *("--questions", _questions(tmp_path, 64), "--out", tmp_path / "out", "--no-cache"),
        *("--model", "openai/m", "--api-base", server.url, "--max-tokens", 16, *extra),
    )


@pytest.mark.subprocess
def test_concurrency_32_has_32_requests_in_flight(tmp_path):
    with ScriptedServer(latency=1.0) as server:
        result = _answer(server, tmp_path, "--concurrency", 32)
        assert result.returncode == 0, result.stderr
        assert len(server.requests) == 64 and server.peak_in_flight == 32
    assert "--max-concurrency" not in result.stderr


@pytest.mark.subprocess
def test_a_smaller_per_model_bound_is_kept_and_said(tmp_path):
    with ScriptedServer(latency=0.5) as server:
        result = _answer(server, tmp_path, "--concurrency", 32, "--max-concurrency", 8)
        assert result.returncode == 0, result.stderr
        assert server.peak_in_flight == 8
    assert (
        "note: at most 8 requests in flight to openai/m (--max-concurrency 8), "
        "fewer than --concurrency 32"
    ) in result.stderr


# --- issue 16, item 11: a failed call of a batch leaves its siblings paid once -----------------


def _prompts(server: ScriptedServer, ok_only: bool = False) -> list[str]:
    return [
        "\n".join(m["content"] for m in r.body["messages"])
        for r in server.requests
        if r.body and (r.status == 200 or not ok_only)
    ]


def _failing_then_good(marker: str, argv: list, rules: list[Rule]) -> tuple[list, list, object]:
    """Run `argv` against a server that fails `marker` for good and delays the rest, then rerun
    it against a good one; the prompts answered the first time and those sent the second."""
    slow = [
        Fault("400", times=1000, match=marker),  # a 400 is never retried
        Fault("hang", times=1000, hang_seconds=1.0),
    ]
    with ScriptedServer(rules=rules, faults=slow) as bad:
        first = run_moot(*argv, "--api-base", bad.url)
        paid, url = _prompts(bad, ok_only=True), bad.url
    port = int(url.split(":")[-1].split("/")[0])  # the same URL: the cache keys on it
    with ScriptedServer(rules=rules, port=port) as good:
        rerun = run_moot(*argv, "--api-base", good.url)
        sent = _prompts(good)
    assert first.returncode == 1, first.stderr
    assert rerun.returncode == 0, rerun.stderr
    return paid, sent, first


@pytest.mark.subprocess
@pytest.mark.parametrize("cache", [[], ["--no-cache"]], ids=["cache", "no-cache"])
def test_a_failed_speech_analysis_leaves_the_other_dimensions_paid_once(cache, tmp_path):
    debates = _debates(tmp_path, "d1")
    argv = ["judge", "--debates", debates, "--out", tmp_path / "out", "--judge", "openai/j"]
    marker = r"gives Speech 1\..*the use of sources in the new speech"
    paid, sent, _ = _failing_then_good(marker, [*argv, "--max-retries", 0, *cache], [SCORE])
    assert len(paid) == 4  # the argument and language analyses of speech 1 and their scores
    assert not set(paid) & set(sent)  # ... and not paid again
    assert sum(bool(re.search(marker, s, re.S)) for s in sent) == 1  # the failed one, once


@pytest.mark.subprocess
def test_a_failed_order_of_a_pairwise_judgment_leaves_the_other_cached(tmp_path):
    ours = responses_file(tmp_path / "ours.json", [("affirmative", "OURS-GOOD")])
    base = responses_file(tmp_path / "base.json", [("affirmative", "BASE-FOR-GOOD")])
    argv = [
        "eval", "quality", "--out", tmp_path / "out", "--judge", "openai/judge",
        "--max-retries", 0, "--responses", ours, "--baseline", base,
    ]  # fmt: skip
    marker = r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE-FOR-GOOD"  # the reverse order
    paid, sent, _ = _failing_then_good(marker, argv, QUALITY_RULES)
    assert len(paid) == 1 and not set(paid) & set(sent)  # the forward order, cached
    assert len(sent) == 1 and re.search(marker, sent[0])
