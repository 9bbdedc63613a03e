"""`moot debate --shard auto` under each scheduler, and `moot merge-shards DIR`.

The scheduler is its environment variables (set with monkeypatch: the process boundary). The
SLURM and Kubernetes cases run the commands of the examples in docs/scaling.md, as written there
but for the endpoint: each task debates its part, and the merge of the folder they share equals a
one-machine run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
import yaml

import moot
from moot.cli import main
from moot.cli.main import build_parser
from moot.core.scheduler import INDEX_VARIABLES
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import ARGUMENTS_REPLY, read_jsonl, write_topics

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scaling"
SCHEDULER_VARIABLES = (
    *INDEX_VARIABLES,
    *(f"SLURM_ARRAY_TASK_{name}" for name in ("COUNT", "MIN", "MAX", "STEP")),
    "JOB_COMPLETIONS",
    "WORLD_SIZE",
)
TOPICS = ["Should zoos be banned?", "Is remote work better?", "Should homework be abolished?"]


@pytest.fixture
def server():
    with ScriptedServer(rules=[Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]) as s:
        yield s


@pytest.fixture
def no_scheduler(monkeypatch):
    """An environment without any scheduler's variables."""
    for name in SCHEDULER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def example_commands(path: Path) -> list[list[str]]:
    """The `moot` command lines of an example file: the script's lines, or the Job's command."""
    if path.suffix == ".yaml":
        container = yaml.safe_load(path.read_text())["spec"]["template"]["spec"]["containers"][0]
        text = container["command"][-1]  # sh -c TEXT
    else:  # a script: its lines, joined where they continue
        text = path.read_text().replace("\\\n", " ")
    found = re.findall(
        r'(?m)^moot (.*)$|--wrap "moot (.*)"$', text
    )  # the merge's, in sbatch --wrap
    return [shlex.split(line or wrapped) for line, wrapped in found]


def with_value(argv: list[str], flag: str, value: str) -> list[str]:
    """`argv` with `flag`'s value replaced by `value`."""
    at = argv.index(flag)
    return [*argv[: at + 1], value, *argv[at + 2 :]]


def run_shards(server, argv: list[str], environments: list[dict[str, str]], monkeypatch) -> None:
    """Run the example's `argv` once per task, in each task's scheduler environment."""
    for environment in environments:
        for name in SCHEDULER_VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        expanded = [os.path.expandvars(arg) for arg in argv]
        endpoint = with_value(expanded, "--api-base", server.url)
        assert main([*endpoint, "--arguments-per-stance", "2", "--quiet"]) == 0


def test_each_schedulers_shards_merge_into_the_one_machine_run(
    server, no_scheduler, tmp_path, capsys
):
    no_scheduler.chdir(tmp_path)
    write_topics(tmp_path / "topics.json", TOPICS[:2])  # shards of 3 and 4: one or two left empty
    (sbatch,) = example_commands(EXAMPLES / "debate-array.sbatch")[1:]  # [0]: the merge
    (job,) = example_commands(EXAMPLES / "debate-indexed-job.yaml")
    array = re.search(r"#SBATCH --array=(\S+)", (EXAMPLES / "debate-array.sbatch").read_text())
    assert array and array[1] == "0-3"
    one = with_value(with_value(sbatch, "--out", "one"), "--shard", "0/1")
    run_shards(server, one, [{}], no_scheduler)

    cases = {  # the folder the tasks share: each task's environment
        "runs/debate": [  # sbatch --array=0-3: the example's own array
            {"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_COUNT": "4"}
            | {"SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "3"}
            for i in range(4)
        ],
        "stepped": [  # sbatch --array=1-5:2: tasks 1, 3, 5, counted by min, max and step
            {"SLURM_ARRAY_TASK_ID": str(i), "SLURM_ARRAY_TASK_MIN": "1"}
            | {"SLURM_ARRAY_TASK_MAX": "5", "SLURM_ARRAY_TASK_STEP": "2"}
            for i in (1, 3, 5)
        ],
        "k8s": [{"JOB_COMPLETION_INDEX": str(i), "JOB_COMPLETIONS": "2"} for i in range(2)],
        "torchrun": [{"RANK": str(i), "WORLD_SIZE": "2"} for i in range(2)],
    }
    full = {r["id"]: r for r in read_jsonl(tmp_path / "one" / "dataset.jsonl")}
    debates = {r["id"]: r | {"shard": None} for r in read_jsonl(tmp_path / "one/debates.jsonl")}
    assert len(full) == 2 * 2 * 2
    for folder, environments in cases.items():
        argv = job if folder == "k8s" else sbatch
        index = "$RANK" if folder == "torchrun" else "$SLURM_ARRAY_TASK_ID"
        argv = [
            a.replace("runs/debate", folder).replace("$SLURM_ARRAY_TASK_ID", index) for a in argv
        ]
        run_shards(server, argv, environments, no_scheduler)
        shards = sorted((tmp_path / folder).iterdir())
        assert len(shards) == len(environments)
        claimed = {json.loads((s / "manifest.json").read_text())["shard"] for s in shards}
        assert claimed == {f"{i}/{len(shards)}" for i in range(len(shards))}
        moot.merge_shards(folder, out=f"{folder}-all")
        merged = tmp_path / f"{folder}-all"
        assert {r["id"]: r for r in read_jsonl(merged / "dataset.jsonl")} == full, folder
        joined = {r["id"]: r | {"shard": None} for r in read_jsonl(merged / "debates.jsonl")}
        assert joined == debates, folder

    # a rerun under the same task, or with the shard it resolved to, resumes: no call is made
    calls = len(server.requests)
    run_shards(server, sbatch, cases["runs/debate"][2:3], no_scheduler)
    run_shards(server, with_value(sbatch, "--shard", "2/4"), [{}], no_scheduler)
    assert len(server.requests) == calls


def test_example_commands_parse_with_the_flags_moot_has():
    parser = build_parser()
    commands = [
        argv
        for name in ("debate-array.sbatch", "debate-indexed-job.yaml")
        for argv in example_commands(EXAMPLES / name)
    ]
    assert [argv[0] for argv in commands] == ["merge-shards", "debate", "debate"]
    for argv in commands:
        args = parser.parse_args(argv)  # an unknown flag exits 2
        assert getattr(args, "shard", "auto") == "auto"
    job = yaml.safe_load((EXAMPLES / "debate-indexed-job.yaml").read_text())
    (count,) = (e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"])
    assert job["spec"]["completionMode"] == "Indexed"
    assert int(count) == job["spec"]["completions"]


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, "no scheduler's shard in the environment (SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX"),
        ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4"}, "SLURM_ARRAY_TASK_ID gives"),
        ({"SLURM_ARRAY_TASK_ID": "x", "SLURM_ARRAY_TASK_COUNT": "4"}, "SLURM_ARRAY_TASK_ID='x'"),
        ({"SLURM_ARRAY_TASK_ID": "1"}, "SLURM_ARRAY_TASK_ID is set but neither"),
        (  # --array=1,3,7: a list, not a range
            {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "3"}
            | {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "7"},
            "SLURM_ARRAY_TASK_COUNT is 3, but MIN..MAX by STEP holds 7 tasks",
        ),
        (
            {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MAX": "5"}
            | {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_STEP": "2"},
            "SLURM_ARRAY_TASK_ID 2 is not SLURM_ARRAY_TASK_MIN 1 plus a multiple",
        ),
        ({"JOB_COMPLETION_INDEX": "0"}, "JOB_COMPLETION_INDEX is set but not JOB_COMPLETIONS"),
        ({"JOB_COMPLETION_INDEX": "0", "JOB_COMPLETIONS": "0"}, "JOB_COMPLETION_INDEX gives"),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK gives shard -1 of 2"),
        ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
    ],
)
def test_shard_auto_without_a_usable_scheduler_is_one_line_before_any_call(
    environment, expected, server, no_scheduler, tmp_path, capsys
):
    for name, value in environment.items():
        no_scheduler.setenv(name, value)
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    out = tmp_path / "out"
    argv = ["debate", "--topics", str(topics), "--out", str(out), "--shard", "auto"]
    code = main([*argv, "--model", "openai/scripted", "--api-base", server.url])
    error = capsys.readouterr().err
    assert code == 2 and error.startswith(f"moot: error: --shard auto: {expected}"), error
    assert error.count("\n") == 1 and server.requests == [] and not out.exists()


def test_merge_of_a_folder_refuses_two_runs_and_one_without_shards(server, tmp_path, capsys):
    topics = write_topics(tmp_path / "topics.json", TOPICS[:2])
    runs = tmp_path / "runs"
    base = ["debate", "--topics", str(topics), "--model", "openai/scripted", "--api-base"]
    base += [server.url, "--arguments-per-stance", "1", "--quiet"]
    for name, extra in {"a-0": ["--shard", "0/2"], "b-0": ["--rounds", "1"]}.items():
        assert main([*base, "--out", str(runs / name), *extra]) == 0
    (tmp_path / "empty" / "notes").mkdir(parents=True)
    capsys.readouterr()
    for folder, expected in {
        runs: f"{runs} holds shards of two different runs: {runs / 'a-0'} (0/2) and "
        f"{runs / 'b-0'} (0/1)",
        tmp_path / "empty": f"{tmp_path / 'empty'}: no manifest.json in it or in its folders",
    }.items():
        code = main(["merge-shards", str(folder), "--out", str(tmp_path / "merged")])
        error = capsys.readouterr().err
        assert code == 2 and error.startswith(f"moot: error: {expected}"), error
        assert error.count("\n") == 1 and not (tmp_path / "merged").exists()
