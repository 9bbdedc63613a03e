"""`moot debate` and `moot merge-shards` end to end, through real HTTP to the scripted server.

What a run does is tested in process (`moot.debate(...)`); what needs the process, in one:
kills and resumes, the command line's flags and --config files, what a rerun imports.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest

import moot
from moot.cli import main
from moot.core.llm.cache import RequestCache
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    moot_env,
    popen_moot,
    read_jsonl,
    run_fresh_moot,
    run_moot,
    write_topics,
)

TOPICS = ["Should zoos be banned?", "Is remote work better than office work?"]


@pytest.fixture
def server():
    with ScriptedServer(rules=[Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]) as s:
        yield s


def debate_args(server: ScriptedServer, topics: Path, out: Path, *extra: object) -> list[object]:
    return [
        "debate",
        "--topics",
        topics,
        "--out",
        out,
        "--model",
        "openai/scripted",
        "--api-base",
        server.url,
        "--arguments-per-stance",
        2,
        "--max-retries",
        1,
        *extra,
    ]


def debate_options(server: ScriptedServer, topics: Path, out: Path, **extra: object) -> dict:
    """`debate_args` as the keyword arguments of `moot.debate`."""
    options = {"topics": topics, "out": out, "model": "openai/scripted", "api_base": server.url}
    return options | {"arguments_per_stance": 2, "max_retries": 1, **extra}


def test_generates_dataset_with_transcripts_and_manifest(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    result = moot.debate(**debate_options(server, topics, tmp_path / "out"))
    out = tmp_path / "out"
    debates = read_jsonl(out / "debates.jsonl")
    assert len(debates) == 2 * 2 * 2 and {d["status"] for d in debates} == {"ok"}
    assert len({d["id"] for d in debates}) == 8
    for debate in debates:
        assert [t["speaker"] for t in debate["transcript"]] == ["A", "B", "A", "B"]
        other = "Negative" if debate["stance"] == "Affirmative" else "Affirmative"
        assert [t["side"] for t in debate["transcript"]] == [debate["stance"], other] * 2
        assert debate["conclusion"]

    dataset = read_jsonl(out / "dataset.jsonl")
    assert len(dataset) == 8
    for record in dataset:
        user, assistant = record["messages"]
        assert user["role"] == "user" and assistant["role"] == "assistant"
        assert record["topic"] in user["content"] and record["argument"] in user["content"]
        assert record["stance"].lower() in user["content"]
        assert (record["prompt"], record["completion"]) == (user["content"], assistant["content"])

    import datasets

    table = datasets.load_from_disk(str(out / "dataset"))
    assert table.num_rows == 8 and {"messages", "prompt", "completion"} <= set(table.column_names)

    manifest = json.loads((out / "manifest.json").read_text())
    roles = {row["role"] for row in manifest["ledger"]["by_role"]}
    assert roles == {"debater_a", "debater_b"}
    assert manifest["ledger"]["total"]["calls"] == 4 + 8 * 5
    assert manifest["counts"]["dataset_records"] == 8
    assert "dataset.jsonl" in str(result) and "debater_a" in result.summary  # what it prints

    bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(bodies) == 4 + 8 * 5
    conclusions = [b for b in bodies if "You are watching a debate" in b["messages"][0]["content"]]
    assert len(conclusions) == 8
    for body in conclusions:
        text = " ".join(m["content"] for m in body["messages"])
        assert "{" not in text.replace('{"', "")  # every placeholder filled (the reference's bug)
        assert any(topic in text for topic in TOPICS)


def test_rerun_skips_finished_debates_and_pays_nothing(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    options = debate_options(server, topics, tmp_path / "out")
    moot.debate(**options)
    before = (tmp_path / "out" / "dataset.jsonl").read_text()
    server.clear_log()
    for extra in ({}, {"no_cache": True}):
        result = moot.debate(**options, **extra)
        assert re.search(r"debates +8 +8 +0 +0", result.summary)
    assert server.requests == []
    assert (tmp_path / "out" / "dataset.jsonl").read_text() == before


@pytest.mark.subprocess
def test_a_rerun_of_a_finished_run_imports_no_debate_machinery_and_rewrites_nothing(
    server, tmp_path
):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    out = tmp_path / "out"
    args = debate_args(server, topics, out)
    assert run_moot(*args).returncode == 0
    paid = len(server.requests)
    with sqlite3.connect(out / ".moot" / "checkpoints.sqlite") as db:  # finished: forgotten
        assert db.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
    outputs = [out / "debates.jsonl", out / "dataset.jsonl", out / "dataset"]
    before = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in outputs]
    dataset = (out / "dataset.jsonl").read_bytes()

    rerun = run_fresh_moot(*args, env=moot_env(PYTHONPROFILEIMPORTTIME="1"))
    assert rerun.returncode == 0, rerun.stderr
    imported = {line.split("|")[-1].strip() for line in rerun.stderr.splitlines() if "|" in line}
    assert "moot.graphs.debatune_run" in imported
    assert not {"langgraph", "datasets", "openai"} & imported
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in outputs] == before
    assert len(json.loads((out / "manifest.json").read_text())["runs"]) == 2

    (out / "dataset.jsonl").write_text("edited by hand\n")  # the mark no longer matches it
    assert run_moot(*args).returncode == 0
    assert (out / "dataset.jsonl").read_bytes() == dataset
    assert len(server.requests) == paid  # the reruns sent nothing


@pytest.mark.subprocess
def test_resume_after_kill_repays_no_finished_call(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    cache_dir = tmp_path / "cache"
    env = moot_env(MOOT_CACHE_DIR=str(cache_dir))
    with ScriptedServer(rules=rules, latency=0.15) as server:
        args = debate_args(server, topics, tmp_path / "out", "--concurrency", 2)
        process = popen_moot(*args, env=env)
        deadline = time.time() + 600  # a hang guard: a loaded machine took over 60 s to start
        log = tmp_path / "out" / "debates.jsonl"
        while time.time() < deadline and not (log.exists() and log.read_text().count("\n") >= 2):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished_calls = len(RequestCache(cache_dir / "requests.sqlite"))
        assert 0 < finished_calls < 44
        rerun_start = time.time()
        result = run_moot(*args, env=env)
        assert result.returncode == 0, result.stderr
        # requests still in flight when the first run died arrived before the rerun started
        rerun = [r for r in server.requests if r.time >= rerun_start]
        assert len(rerun) == 44 - finished_calls
    debates = read_jsonl(log)
    assert len(debates) == len({d["id"] for d in debates}) == 8
    dataset = read_jsonl(tmp_path / "out" / "dataset.jsonl")
    assert sorted(r["id"] for r in dataset) == sorted(d["id"] for d in debates)


def test_failing_debates_are_recorded_exit_nonzero_and_only_they_are_retried(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    # every conclusion about zoos fails twice in a row: 2 debates x 2 attempts
    server.add_fault(Fault(kind="500", times=4, match="watching a debate.*zoos"))
    options = debate_options(server, topics, tmp_path / "out", arguments_per_stance=1)
    with pytest.raises(moot.RunFailed) as failing:
        moot.debate(**options)
    assert failing.value.result.exit_code == 1
    assert "moot: 2 of 4 debates failed" in "\n".join(failing.value.result.messages)
    debates = read_jsonl(tmp_path / "out" / "debates.jsonl")
    failed = [d for d in debates if d["status"] == "failed"]
    assert len(failed) == 2 and all(
        "zoos" in d["topic"] and "HTTP 500" in d["error"] for d in failed
    )
    assert all(len(d["transcript"]) == 4 for d in failed)  # the finished turns are kept
    assert len(read_jsonl(tmp_path / "out" / "dataset.jsonl")) == 2

    server.clear_log()
    moot.debate(**options)
    assert len(server.requests) == 2  # only the two missing conclusions
    debates = read_jsonl(tmp_path / "out" / "debates.jsonl")
    assert len(debates) == 4 and {d["status"] for d in debates} == {"ok"}
    assert len(read_jsonl(tmp_path / "out" / "dataset.jsonl")) == 4


def test_shards_merge_into_the_unsharded_dataset(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", [*TOPICS, "Should homework be abolished?"])
    moot.debate(**debate_options(server, topics, tmp_path / "full"))
    for index in (0, 1):
        moot.debate(**debate_options(server, topics, tmp_path / f"s{index}", shard=f"{index}/2"))
    with pytest.raises(moot.ConfigError, match="missing shards 1/2"):
        moot.merge_shards(tmp_path / "s0", out=tmp_path / "partial")
    assert not (tmp_path / "partial").exists()

    moot.merge_shards(tmp_path / "s0", tmp_path / "s1", out=tmp_path / "merged")
    full = {r["id"]: r for r in read_jsonl(tmp_path / "full" / "dataset.jsonl")}
    joined = {r["id"]: r for r in read_jsonl(tmp_path / "merged" / "dataset.jsonl")}
    assert joined == full and len(full) == 3 * 2 * 2
    shard_topics = [
        {d["topic"] for d in read_jsonl(tmp_path / f"s{i}" / "debates.jsonl")} for i in (0, 1)
    ]
    assert not shard_topics[0] & shard_topics[1]


@pytest.mark.subprocess
def test_config_file_supplies_options_and_flags_win(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    config = tmp_path / "run.yaml"
    config.write_text(
        f"model: openai/scripted\napi-base: {server.url}\nrounds: 1\narguments_per_stance: 2\n"
    )
    result = run_moot(
        "debate",
        "--config",
        config,
        "--topics",
        topics,
        "--out",
        tmp_path / "out",
        "--arguments-per-stance",
        1,
    )
    assert result.returncode == 0, result.stderr
    debates = read_jsonl(tmp_path / "out" / "debates.jsonl")
    assert len(debates) == 2 and all(len(d["transcript"]) == 2 for d in debates)
    config.write_text("modle: openai/scripted\n")
    bad = run_moot("debate", "--config", config, "--topics", topics, "--out", tmp_path / "o2")
    assert bad.returncode == 2 and "unknown option 'modle' (did you mean 'model'?)" in bad.stderr


def test_a_changed_configuration_needs_a_new_output_folder(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    moot.debate(**debate_options(server, topics, tmp_path / "out"))
    with pytest.raises(moot.ConfigError, match="different configuration"):
        moot.debate(**debate_options(server, topics, tmp_path / "out", rounds=3))


@pytest.mark.subprocess
def test_config_file_can_supply_the_required_options(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    config = tmp_path / "run.yaml"
    config.write_text(
        f"topics: {topics}\nout: {tmp_path / 'out'}\nmodel: openai/scripted\n"
        f"api_base: {server.url}\nrounds: 1\narguments_per_stance: 1\n"
    )
    result = run_moot("debate", "--config", config)
    assert result.returncode == 0, result.stderr
    assert len(read_jsonl(tmp_path / "out" / "debates.jsonl")) == 2


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("rounds: -1", "option 'rounds': must be an integer of 0 or more"),
        ("rounds: two", "option 'rounds'"),
        ("no_cache: maybe", "option 'no_cache': expected true or false"),
    ],
)
def test_config_values_are_validated_like_flags(line, needle, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(line + "\n")
    result = run_moot("debate", "--config", config, "--topics", "t.json", "--out", tmp_path / "o")
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.subprocess
def test_missing_required_option_is_a_clean_error(tmp_path):
    result = run_moot("debate", "--out", tmp_path / "o")
    assert result.returncode == 2 and "missing --topics" in result.stderr


@pytest.mark.subprocess
def test_an_interrupted_run_still_refuses_other_options(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    with ScriptedServer(rules=rules, latency=0.3) as server:
        process = popen_moot(*debate_args(server, topics, tmp_path / "out"))
        deadline = time.time() + 600  # a hang guard: a loaded machine took over 60 s to start
        while time.time() < deadline and not server.requests:
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert not (tmp_path / "out" / "manifest.json").exists()
        other = run_moot(*debate_args(server, topics, tmp_path / "out", "--rounds", 1))
    assert other.returncode == 2 and "different configuration" in other.stderr


def test_empty_replies_fail_the_debate_and_are_asked_again_on_rerun(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    rules = [
        Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY),
        Rule(pattern="You are watching a debate", reply=""),
    ]
    with ScriptedServer(rules=rules) as server, pytest.raises(moot.RunFailed) as first:
        moot.debate(**debate_options(server, topics, tmp_path / "out", arguments_per_stance=1))
    assert first.value.result.exit_code == 1
    assert "empty reply from http://127.0.0.1" in "\n".join(first.value.result.messages)
    assert read_jsonl(tmp_path / "out" / "dataset.jsonl") == []
    with ScriptedServer(rules=rules[:1]) as server:  # the model now answers
        moot.debate(**debate_options(server, topics, tmp_path / "out", arguments_per_stance=1))
        asked = [r.body["messages"][0]["content"] for r in server.requests]
    # only the two conclusions were asked again; the debate turns came from the checkpoints
    assert len(asked) == 2 and all("watching a debate" in text for text in asked)
    assert len(read_jsonl(tmp_path / "out" / "dataset.jsonl")) == 2


def test_merge_reports_failures_and_refuses_to_overwrite_an_input(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    server.add_fault(Fault(kind="500", times=2, match="watching a debate.*You are Affirmative"))
    with pytest.raises(moot.RunFailed):
        moot.debate(**debate_options(server, topics, tmp_path / "run", arguments_per_stance=1))
    with pytest.raises(moot.RunFailed) as merged:
        moot.merge_shards(tmp_path / "run", out=tmp_path / "merged")
    assert merged.value.result.exit_code == 1
    assert "1 failed" in "\n".join(merged.value.result.messages)
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert manifest["counts"] == {
        "debates": 2,
        "debates_ok": 1,
        "failures": 1,
        "dataset_records": 1,
    }
    # a `moot debate` folder is that command's alone
    with pytest.raises(moot.ConfigError, match=f"is the input DIR {tmp_path / 'run'}"):
        moot.merge_shards(tmp_path / "run", out=tmp_path / "run")


def test_outputs_are_readable_by_others_as_the_umask_allows(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    moot.debate(**debate_options(server, topics, tmp_path / "out", arguments_per_stance=1))
    for name in ("dataset.jsonl", "debates.jsonl", "manifest.json", "dataset"):
        assert (tmp_path / "out" / name).stat().st_mode & 0o044 == 0o044, name


@pytest.mark.subprocess
def test_models_without_a_subcommand_shows_its_help():
    result = run_moot("models")
    assert result.returncode == 2 and "check" in result.stdout


def test_a_failed_argument_list_is_asked_anew_on_rerun(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    prose = [Rule(pattern="list your arguments", reply="I would rather talk about the weather.")]
    with ScriptedServer(rules=prose) as server:
        options = debate_options(server, topics, tmp_path / "out", arguments_per_stance=1)
        with pytest.raises(moot.RunFailed) as first:
            moot.debate(**options)
        assert "no arguments could be parsed" in "\n".join(first.value.result.messages)
        seeds = [r.body["seed"] for r in server.requests]
        with pytest.raises(moot.RunFailed) as second:
            moot.debate(**options)
        assert second.value.result.exit_code == 1
        reseeds = [r.body["seed"] for r in server.requests][len(seeds) :]
    assert len(seeds) == len(reseeds) == 2 and not set(seeds) & set(reseeds)


@pytest.mark.subprocess
def test_config_value_left_empty_is_an_error(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("rounds:\n")
    result = run_moot("debate", "--config", config, "--topics", "t.json", "--out", tmp_path / "o")
    assert result.returncode == 2 and "option 'rounds': needs a value" in result.stderr


def test_merge_never_writes_into_a_run_folder(server, tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    for index in (0, 1):
        moot.debate(**debate_options(server, topics, tmp_path / f"s{index}", shard=f"{index}/2"))
    with pytest.raises(moot.ConfigError):
        moot.merge_shards(tmp_path / "s0", tmp_path / "s1", out=tmp_path / "s0" / "..")
    with pytest.raises(moot.ConfigError, match="belongs to `moot debate`"):
        moot.merge_shards(tmp_path / "s1", out=tmp_path / "s0", allow_partial=True)


@pytest.mark.subprocess
def test_resume_after_kill_without_cache_redoes_only_unfinished_work(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    with ScriptedServer(rules=rules, latency=0.15) as server:
        args = debate_args(server, topics, tmp_path / "out", "--concurrency", 2, "--no-cache")
        process = popen_moot(*args)
        log = tmp_path / "out" / "debates.jsonl"
        deadline = time.time() + 600  # a hang guard: a loaded machine took over 60 s to start
        while time.time() < deadline and not (log.exists() and log.read_text().count("\n") >= 2):
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = len({d["id"] for d in read_jsonl(log)})
        rerun_start = time.time()
        assert run_moot(*args).returncode == 0
        rerun = [r for r in server.requests if r.time >= rerun_start]
    # argument lists and finished debates are never redone; unfinished debates resume
    assert 0 < len(rerun) <= (8 - finished) * 5
    debates = read_jsonl(log)
    assert len(debates) == len({d["id"] for d in debates}) == 8


@pytest.mark.parametrize("case", ["file", "other configuration"])
def test_a_refused_out_is_one_error_line_without_warnings(case, server, tmp_path, capsys):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    out = tmp_path / "out"
    if case == "file":
        out.write_text("keep me\n")
        expected = f"--out {out} is a file, not a folder"
    else:
        (out / ".moot").mkdir(parents=True)
        (out / ".moot" / "run.json").write_text('{"identity": {}, "shard": "0/1"}')
        expected = f"{out} holds a run with a different configuration"
    # both debaters use one model at one temperature: the case that prints a warning
    code = main([str(a) for a in debate_args(server, topics, out)])
    error = capsys.readouterr().err
    assert code == 2 and error.startswith(f"moot: error: {expected}"), error
    assert error.count("\n") == 1 and server.requests == []
    if case == "file":
        assert out.read_text() == "keep me\n"


def test_merge_of_a_corrupt_shard_is_one_error_line_and_writes_nothing(server, tmp_path, capsys):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    args = debate_args(server, topics, tmp_path / "s0", "--arguments-per-stance", 1, "--quiet")
    assert main([str(a) for a in args]) == 0
    log = tmp_path / "s0" / "debates.jsonl"
    first, rest = log.read_bytes().split(b"\n", 1)
    log.write_bytes(first[:30] + b"\n" + rest)
    capsys.readouterr()
    code = main(["merge", str(tmp_path / "s0"), "--out", str(tmp_path / "m")])
    error = capsys.readouterr().err
    assert code == 2 and error.startswith(f"moot: error: {log}, line 1: invalid JSON")
    assert error.count("\n") == 1 and not (tmp_path / "m").exists()


def test_rounds_0_writes_the_statement_without_a_debate(server, tmp_path):
    # the paper's "Topic Data without Debate" ablation (Section 5.2, Table 2)
    server.add_rule(Rule(pattern="proposed by you", reply="Statement {n}."))
    topics = write_topics(tmp_path / "topics.json", TOPICS[:1])
    out = tmp_path / "out"
    result = moot.debate(**debate_options(server, topics, out, rounds=0))
    assert not any("both debaters" in note for note in result.notes)  # B never speaks
    debates = read_jsonl(out / "debates.jsonl")
    assert len(debates) == 4 and all(d["rounds"] == 0 for d in debates)
    assert all(d["status"] == "ok" and d["transcript"] == [] for d in debates)
    assert sorted(d["conclusion"] for d in debates) == [f"Statement {n}." for n in range(4)]
    bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    statements = bodies[2:]  # after the two argument lists: one call per record, no conclusion
    assert len(statements) == 4
    for debate in debates:
        (system, user), *_ = (
            b["messages"] for b in statements if debate["argument"] in b["messages"][1]["content"]
        )
        assert system["content"] == (
            f'You are attending a debate on the topic of "{TOPICS[0]}". You are '
            f"{debate['stance']} to this topic and your opponent is "
            f"{'Negative' if debate['stance'] == 'Affirmative' else 'Affirmative'} to this topic."
        )
        opening = "You are currently debating for one specific argument proposed by you"
        assert user["content"].startswith(f'{opening}: "{debate["argument"]}".')
        assert "Opponent:" not in user["content"] and user["content"].endswith("AI:")
    dataset = read_jsonl(out / "dataset.jsonl")
    assert [r["completion"] for r in dataset] == [d["conclusion"] for d in debates]
    with pytest.raises(moot.ConfigError, match="must be an integer of 0 or more"):
        moot.debate(**debate_options(server, topics, tmp_path / "neg", rounds=-1))
