"""Cards and ``--push-to-hub`` end to end, against the scripted Hub on 127.0.0.1.

The moot processes get ``HF_ENDPOINT`` pointed at `ScriptedHub` (huggingface_hub reads it when it
is imported, in the child), a token in ``HF_TOKEN`` and an empty ``HF_HOME``: nothing leaves the
machine, and no saved login is read.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from huggingface_hub import DatasetCard

from moot.testing import Fault, Rule, ScriptedServer
from moot.training.sft_card import hub_id
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    TOKEN,
    assert_no_token,
    hub_env,
    local_files,
    run_moot,
    write_topics,
)
from tests.cli.test_debate import debate_args
from tests.hub_server import ScriptedHub

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[2]


def assert_one_line(result: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    said = result.stderr.strip().splitlines()  # but the progress lines of the run before it
    lines = [line for line in said if line.startswith("moot:") and " finished (" not in line]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def small_debate(server: ScriptedServer, topics: Path, out: Path, *extra: object) -> list[object]:
    """`moot debate` of one argument per stance, one round: 2 debates, 8 calls per topic."""
    return debate_args(server, topics, out, "--arguments-per-stance", 1, "--rounds", 1, *extra)


@pytest.fixture(scope="module")
def debated(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One `moot debate --push-to-hub` command run three times.

    The first run has a failed debate (so it does not push), the second retries it and finishes
    but the Hub refuses the push (401), the third only pushes.
    """
    tmp = tmp_path_factory.mktemp("hub-debate")
    topics = write_topics(tmp / "topics.json", ["Should zoos be banned?"])
    rules = [Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY)]
    with ScriptedHub(TOKEN) as hub, ScriptedServer(rules=rules) as server:
        env = hub_env(hub, tmp)
        args = small_debate(server, topics, tmp / "out", "--push-to-hub", "me/debates")
        # both attempts (--max-retries 1) of one conclusion fail
        server.add_fault(Fault(kind="500", times=2, match="watching a debate.*You are Affirmative"))
        runs, calls, hub_requests = [], [], []
        for refusal in (None, 401, None):
            if refusal:
                hub.refuse("commit", refusal)
            before = len(server.requests)
            runs.append(run_moot(*args, env=env))
            calls.append(len(server.requests) - before)
            hub_requests.append(len(hub.requests))
        yield SimpleNamespace(
            hub=hub, out=tmp / "out", runs=runs, calls=calls, hub_requests=hub_requests
        )


def test_an_unfinished_run_is_not_pushed(debated: Any) -> None:
    first = debated.runs[0]
    assert first.returncode == 1 and "Traceback" not in first.stderr
    assert "moot: 1 of 2 debates failed" in first.stderr  # the debate's failure, as ever
    assert "moot: not pushed to me/debates: the run is not finished (exit 1)" in first.stderr
    assert debated.hub_requests[0] == 0  # not one request to the Hub


def test_a_refused_push_exits_1_in_one_line_and_keeps_the_dataset(debated: Any) -> None:
    refused = debated.runs[1]
    line = assert_one_line(refused, 1, "push to me/debates failed: HTTP 401")
    assert "rerun the same command to push it" in line
    assert debated.calls[1] > 0  # it finished the failed debate first
    manifest = json.loads((debated.out / "manifest.json").read_text())
    assert manifest["counts"]["dataset_records"] == 2 and not manifest["failures"]
    assert (debated.out / "README.md").is_file()


def test_the_rerun_pushes_without_a_model_call(debated: Any) -> None:
    pushed = debated.runs[2]
    assert pushed.returncode == 0, pushed.stderr
    assert debated.calls[2] == 0  # every debate was done: the rerun only pushed
    assert "pushed    " in pushed.stdout
    repo = debated.hub.repo("me/debates", "dataset")
    assert repo.files == local_files(debated.out)  # every file, byte for byte
    assert "dataset/data-00000-of-00001.arrow" in repo.files
    assert not any(path.startswith(".moot") for path in repo.files)
    assert len(repo.commits) == 1  # the refused push left nothing half-written


def test_the_debate_card_carries_its_metadata_and_run(debated: Any) -> None:
    card = DatasetCard.load(debated.out / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "unknown"  # DEBATunE's release states none
    assert data["task_categories"] == ["text-generation"]
    assert data["size_categories"] == ["n<1K"]
    assert {"moot", "debatune"} <= set(data["tags"])
    files = data["configs"][0]["data_files"]
    assert files == [{"split": "train", "path": "dataset.jsonl"}]
    text = card.text
    assert "moot debate --topics" in text and "--push-to-hub me/debates" in text
    assert "`openai/scripted`" in text
    assert "`prompts/debatune/turn.j2` | DEBATunE, Section 3.1" in text
    total = json.loads((debated.out / "manifest.json").read_text())["ledger_total"]["total"]
    assert f"| total |  |  | {total['calls']} | {total['cache_hits']} |" in text
    assert "| records | 2 |" in text
    assert "states no licence" in text
    assert "Output folder of `moot debate`" in text


def test_the_debate_card_makes_the_folder_loadable(debated: Any, tmp_path: Path) -> None:
    import datasets

    loaded = datasets.load_dataset(str(debated.out), cache_dir=str(tmp_path))  # by `configs:`
    assert list(loaded) == ["train"]
    lines = (debated.out / "dataset.jsonl").read_text().splitlines()
    assert loaded["train"]["id"] == [json.loads(line)["id"] for line in lines]


def test_no_token_in_outputs_logs_or_requests(debated: Any) -> None:
    for result in debated.runs:
        assert_no_token(result.stdout, result.stderr)
    assert_no_token(*local_files(debated.out).values())
    assert_no_token(*(request.body for request in debated.hub.requests))
    writes = [r for r in debated.hub.requests if r.method == "POST" and "yaml" not in r.path]
    assert writes and all(r.authorized for r in writes)
    assert {r.path.split("/")[-2] for r in writes if "/api/datasets/" in r.path} == {
        "preupload",
        "commit",
    }  # no LFS batch, no Xet: every file went inline


@pytest.mark.parametrize(
    ("repo", "env_change", "needle"),
    [
        ("not a repo", {}, "--push-to-hub"),
        ("me/x", {"HF_TOKEN": ""}, "no Hugging Face token"),
        ("me/x", {"HF_HUB_OFFLINE": "1"}, "HF_HUB_OFFLINE is set"),
    ],
)
def test_a_push_that_cannot_happen_exits_2_before_any_call(
    tmp_path: Path, repo: str, env_change: dict[str, str], needle: str
) -> None:
    topics = write_topics(tmp_path / "topics.json", ["Should zoos be banned?"])
    with ScriptedHub(TOKEN) as hub, ScriptedServer() as server:
        env = {k: v for k, v in {**hub_env(hub, tmp_path), **env_change}.items() if v}
        args = small_debate(server, topics, tmp_path / "out", "--push-to-hub", repo)
        result = run_moot(*args, env=env)
        assert server.requests == [] and hub.requests == []
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and needle in result.stderr
    assert not (tmp_path / "out").exists()


def judged_file(path: Path) -> Path:
    """A CompQA judged-answers file: three answers, two of them at or above 18."""
    answers = [
        {"object1": "Tea", "object2": "Coffee", "aspect": "", "comparison": f"Answer {i}."}
        | {"score_dict": None, "score": score}
        for i, score in enumerate([19, 18, 9])
    ]
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def test_data_commands_push_whole_with_their_cards(tmp_path: Path) -> None:
    """distill-compqa, then data mix of it, each pushed to its own repo."""
    judged = judged_file(tmp_path / "gpt4_scenario_1.json")
    distilled, mixed = tmp_path / "distill", tmp_path / "mix"
    with ScriptedHub(TOKEN) as hub:
        env = hub_env(hub, tmp_path)
        distill = run_moot(
            *("data", "distill-compqa", "--judged", judged, "--out", distilled),
            *("--push-to-hub", "me/distill"),
            env=env,
        )
        mix = run_moot(
            *("data", "mix", "--in", distilled, ROOT / "examples" / "sft-tiny.jsonl"),
            *("--eval-fraction", "0", "--out", mixed, "--push-to-hub", "me/mix", "--hub-private"),
            env=env,
        )
    for result, repo, folder in ((distill, "me/distill", distilled), (mix, "me/mix", mixed)):
        assert result.returncode == 0, result.stderr
        assert_no_token(result.stdout, result.stderr, *local_files(folder).values())
        assert hub.repo(repo, "dataset").files == local_files(folder)
    assert hub.repo("me/mix", "dataset").private
    assert not hub.repo("me/distill", "dataset").private
    # where it went, for the card of a model trained on it (`datasets:`)
    assert hub_id(str(mixed)) == "me/mix"

    card = DatasetCard.load(distilled / "README.md")
    assert card.data.license == "unknown" and "compqa" in card.data.tags
    assert "`prompts/compqa/question.j2` | CompQA, Section 4" in card.text
    assert "| records | 2 |" in card.text
    card = DatasetCard.load(mixed / "README.md")
    assert card.data.license == "unknown"
    assert f"`{distilled}`: licence `unknown`, by its card" in card.text
    assert "sft-tiny.jsonl`: licence not known (no moot card)" in card.text
    files = card.data.to_dict()["configs"][0]["data_files"]
    assert files == [{"split": "train", "path": "train.jsonl"}]


def test_a_hub_that_never_answers_fails_the_push_at_its_deadline(tmp_path: Path) -> None:
    """Issue 29, item 15: huggingface_hub's client has no timeout; moot gives each step one."""
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody answers
    hub = SimpleNamespace(url=f"http://127.0.0.1:{silent.getsockname()[1]}")
    distilled = tmp_path / "distill"
    try:
        result = run_moot(
            *("data", "distill-compqa", "--judged", judged_file(tmp_path / "gpt4_scenario_1.json")),
            *("--out", distilled, "--push-to-hub", "me/distill"),
            env=hub_env(hub, tmp_path, MOOT_HUB_TIMEOUT="1"),
            timeout=60,
        )
    finally:
        silent.close()
    line = assert_one_line(result, 1, "push to me/distill failed: no reply within 1s")
    assert "is complete and unchanged: rerun the same command to push it" in line
    assert (distilled / "README.md").is_file() and not (distilled / ".moot" / "hub.json").exists()
