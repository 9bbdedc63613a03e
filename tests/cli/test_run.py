"""`moot run RECIPE.yaml` end to end: the whole loop against the scripted server and a tiny Llama.

The loop (debate → LoRA SFT → generate base and tuned → judge → report) runs once, in one test
that then reruns it, so it is paid for once whatever the test workers. In process (`moot.run`),
but a run killed and a push to the scripted Hub (whose address huggingface_hub reads on import).
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

import moot
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    moot_env,
    popen_moot,
    refused_in_one_line,
    run_moot,
    stderr,
    stdout,
)

ROOT = Path(__file__).resolve().parents[2]
TRAIN_TINY = ROOT / "examples" / "train-tiny.yaml"
RULES = [
    Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY),
    Rule(pattern="supporting versus opposing proportion", reply="100 0\nAll on one side."),
    Rule(pattern="performance of two AI assistants", reply="7 6\nThe first is clearer."),
]
STAGES = ["debate", "sft", "generate-base", "generate-tuned", "control-base", "control-tuned"]
STAGES += ["quality", "debatrix"]


def recipe(tmp: Path, url: str) -> dict:
    """The loop on the scripted server (debates, base answers, judges) and a tiny Llama."""
    test = tmp / "test.jsonl"
    topic = {
        "topic": "Should zoos be banned?",
        "Affirmative": {"arguments": ["Captivity harms animals"]},
        "Negative": {"arguments": ["Zoos fund conservation"]},
    }
    test.write_text(json.dumps(topic) + "\n", encoding="utf-8")
    topics = tmp / "topics.json"
    topics.write_text(json.dumps(["Should zoos be banned?"]), encoding="utf-8")
    remote = {"api-base": url, "max-retries": 0}
    judge = {"judge": "openai/judge", **remote}
    return {
        "stages": {
            "debate": {
                "command": "debate",
                "topics": str(topics),
                "arguments-per-stance": 1,
                "rounds": 1,
                "model": "openai/debater",
                **remote,
            },
            "sft": {
                "command": "train sft",
                "config": str(TRAIN_TINY),
                "overrides": ["data.train={debate}/dataset.jsonl", "training.epochs=1"],
            },
            "generate-base": {
                "command": "generate",
                "dataset": str(test),
                "model": "openai/base",
                **remote,
            },
            "generate-tuned": {
                "command": "generate",
                "dataset": str(test),
                "model": "{sft}/adapter",
                "max-tokens": 8,
            },
            "control-base": {
                "command": "eval controllability",
                "responses": "{generate-base}",
                **judge,
            },
            "control-tuned": {
                "command": "eval controllability",
                "responses": "{generate-tuned}",
                **judge,
            },
            "quality": {
                "command": "eval quality",
                "responses": "{generate-tuned}",
                "baseline": "{generate-base}",
                **judge,
            },
            "debatrix": {
                "command": "judge",
                "debates": "{debate}/debates.jsonl",
                "limit": 1,
                "constrained": True,
                **judge,
            },
        },
        "report": {
            "controllability": {"base": "control-base", "tuned": "control-tuned"},
            "quality": "quality",
            "debatrix": "debatrix",
        },
    }


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def env(tmp_path):
    return moot_env(MOOT_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1")


@pytest.mark.slow  # the whole loop, SFT included: started first (tests/conftest.py)
def test_the_loop_runs_reports_skips_on_rerun_and_redoes_a_changed_stage(tmp_path):
    """One whole loop (the expensive part), then a rerun and a changed recipe on it."""
    out = tmp_path / "out"
    with ScriptedServer(rules=RULES) as server:
        path = write(tmp_path / "loop.yaml", recipe(tmp_path, server.url))
        planned = check_dry_run(path, out, tmp_path / "moot-cache", server)
        moot.run(path, out=out)
        assert server.requests
        check_manifest(out)
        check_planned_calls(planned, out, server)
        check_report(out)
        check_view(out)

        moved = tmp_path / "moved"  # keys do not depend on where the folder is
        out.rename(moved)
        server.clear_log()
        result = moot.run(path, out=moved)
        assert server.requests == []
        assert stdout(result).count("skipped") == len(STAGES)

        data = yaml.safe_load(path.read_text())
        data["stages"]["generate-base"]["seed"] = 7  # it changes; control-base and quality use it
        result = moot.run(write(path, data), out=moved)
        assert skipped(result) == {
            "debate",
            "sft",
            "generate-tuned",
            "control-tuned",
            "debatrix",
        }
        assert "stage generate-base changed" in stderr(result)
        manifest = json.loads((moved / "manifest.json").read_text())
        assert manifest["stages"]["generate-base"]["options"]["seed"] == 7


def check_dry_run(path: Path, out: Path, cache: Path, server: ScriptedServer) -> dict[str, int]:
    """`moot run --dry-run` of the fresh recipe: every stage that calls a model is counted, from
    what the stages before it would write; no request, nothing written. Its calls per stage."""
    plan = stdout(moot.run(path, out=out, dry_run=True))
    assert server.requests == [] and not out.exists()
    assert not cache.exists()
    assert "not in the estimate" not in plan
    calls: dict[str, int] = {}
    for line in plan.splitlines():
        role, *rest = line.split() or [""]
        if "/" in role and len(rest) == 6:  # role, stage, model, calls, tokens in and out, cost
            stage = role.split("/")[0]
            calls[stage] = calls.get(stage, 0) + int(rest[2])
    assert set(calls) == set(STAGES) - {"sft"}
    assert f"{out / 'sft'}/adapter" in plan  # the adapter to be, a local model
    # the dataset follows the debates: one statement each
    assert f"sft (moot train sft): calls no model; it reads {out / 'debate'}/dataset.jsonl: 2 " in (
        plan
    )
    return calls


def check_planned_calls(planned: dict[str, int], out: Path, server: ScriptedServer) -> None:
    """The dry run's calls per stage are the real run's: its ledgers, and the server's log."""
    stages = json.loads((out / "manifest.json").read_text())["stages"]
    real = {name: stages[name]["ledger"]["total"]["calls"] for name in planned}
    assert planned == real
    answers = [r for r in server.requests if r.body and r.body.get("model") == "base"]
    assert real["generate-base"] == len(answers)
    assert real["generate-tuned"] == len(json.loads((out / "generate-tuned.json").read_text()))


def check_view(out: Path) -> None:
    """The run's `moot view` page: every stage with a run folder, named in manifest and report."""
    assert json.loads((out / "manifest.json").read_text())["view"] == "view.html"
    assert "[view.html](view.html)" in (out / "report.md").read_text()
    page = (out / "view.html").read_text()
    data = re.search(r'id="moot-data">(.*?)</script>', page, re.S).group(1)
    runs = json.loads(data)["runs"]
    assert [run["name"].rsplit(": ", 1)[1] for run in runs] == [
        "debate",
        "control-base",
        "control-tuned",
        "quality",
        "debatrix",
    ]
    assert {run["command"] for run in runs} >= {"moot debate", "moot eval quality", "moot judge"}


def skipped(result: moot.Result) -> set[str]:
    """The stages `moot run` skipped, done before."""
    return skipped_by("\n".join(result.lines))


def skipped_by(stdout: str) -> set[str]:
    return {line.split()[1].rstrip(":") for line in stdout.splitlines() if "skipped" in line}


def check_manifest(out: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "moot-run" and manifest["order"] == STAGES
    stages = manifest["stages"]
    assert {name: stages[name]["status"] for name in STAGES} == dict.fromkeys(STAGES, "done")
    # references resolved to the earlier stages' outputs
    assert stages["sft"]["options"]["overrides"][0] == f"data.train={out / 'debate'}/dataset.jsonl"
    assert stages["quality"]["options"]["baseline"] == str(out / "generate-base.json")
    assert stages["quality"]["depends_on"] == ["generate-tuned", "generate-base"]
    # each ledger is the one its command wrote: 2 debates' calls; 2 answers judged; a command
    # that writes none (generate) has its clients' ledger; training calls no model
    assert stages["debate"]["ledger"]["total"]["calls"] >= 2 + 2
    assert stages["control-base"]["ledger"]["total"]["calls"] == 2
    assert stages["generate-tuned"]["ledger"]["total"]["calls"] == 2
    assert stages["generate-tuned"]["ledger"]["by_role"][0]["model"].startswith("hf/")
    assert stages["sft"]["ledger"] is None
    assert all(stages[name]["seconds"] >= 0 for name in STAGES)
    assert (out / "sft" / "adapter" / "adapter_config.json").is_file()
    tuned = json.loads((out / "generate-tuned.json").read_text())
    assert [r["side"] for r in tuned] == ["affirmative", "negative"]


def check_report(out: Path) -> None:
    report = (out / "report.md").read_text()
    control, rest = report.split("## Pairwise quality")
    quality, debatrix = rest.split("## Debatrix")
    assert "## Controllability" in control
    rows = {line.split("|")[1].strip(): line for line in control.splitlines() if "|" in line}
    # the judge answered "100 0" to all: CC_P 1 and CC_N 0 on both sides, nothing unreadable
    assert rows["cc_p"].count("1.000") == 2 and rows["cc_n"].count("0.000") == 2
    assert rows["parse_failures"].split("|")[2:4] == [" 0 ", " 0 "]
    rows = {line.split("|")[1].strip(): line for line in quality.splitlines() if "|" in line}
    # "7 6" in both orders: a win as the first answer, a loss as the second: ties
    assert rows["items"].split("|")[2].strip() == "2"
    assert {"wins", "ties", "losses", "order_inconsistency", "errors"} <= set(rows)
    rows = {line.split("|")[1].strip(): line for line in debatrix.splitlines() if "|" in line}
    assert rows["judgments"].split("|")[2].strip() == "1"  # a sample: --limit 1 of 2 debates
    assert rows["complete"].split("|")[2].strip() == "1"
    assert "moot view" in report  # the place the view's link goes


DPO_CONFIG = """\
model: {{base: {base}, chat_template: llama-2}}
data: {{max_length: 128}}
lora: {{r: 4, alpha: 8, dropout: 0.0}}
training: {{max_steps: 2, learning_rate: 1.0e-2, warmup_steps: 0, activation_checkpointing: false}}
"""


@pytest.mark.torch
def test_preferences_and_dpo_run_as_stages_and_the_report_sets_three_models_side_by_side(
    tmp_path,
):
    """Answers A and B judged in both orders (A always better) → `data preferences` → `train
    dpo` on a tiny Llama → its adapter answers → judged; the report's tables have one column per
    model and per comparison, as the recipe labels them; a rerun does nothing."""
    from tests.tiny import tiny_llama

    base = tiny_llama(tmp_path / "base", ["zoos", "animals", "yes", "no"], says_words=True)
    config = tmp_path / "dpo.yaml"
    config.write_text(DPO_CONFIG.format(base=base), encoding="utf-8")
    rules = [  # B first in the reverse order: the second (A) is better, so both orders agree
        Rule(pattern=r"Assistant 1's Answer\]\s*<<<answer \w+>>>\s*BETA", reply="3 8\nB is thin."),
        Rule(pattern="performance of two AI assistants", reply="8 3\nA is better."),
        Rule(pattern=".", model="a", reply="ALPHA: zoos harm animals, say the keepers."),
        Rule(pattern=".", model="b", reply="BETA: no."),
        *RULES,
    ]
    with ScriptedServer(rules=rules) as server:
        data = recipe(tmp_path, server.url)
        remote = {"api-base": server.url, "max-retries": 0}
        judge = {"judge": "openai/judge", **remote}
        answers = {"command": "generate", "dataset": data["stages"]["generate-base"]["dataset"]}

        def control(responses: str) -> dict:
            return {"command": "eval controllability", "responses": responses, **judge}

        def quality(responses: str, baseline: str) -> dict:
            return {"command": "eval quality", "responses": responses, "baseline": baseline}

        stages = {
            "answers-a": {**answers, "model": "openai/a", **remote},
            "answers-b": {**answers, "model": "openai/b", **remote},
            "labels": {**quality("{answers-a}", "{answers-b}"), **judge},
            "preferences": {"command": "data preferences", "runs": ["{labels}"]},
            "dpo": {
                "command": "train dpo",
                "config": str(config),
                "overrides": ["data.train={preferences}"],
            },
            "answers-dpo": {**answers, "model": "{dpo}/adapter", "max-tokens": 4},
            "control-a": control("{answers-a}"),
            "control-b": control("{answers-b}"),
            "control-dpo": control("{answers-dpo}"),
            "quality-dpo": {**quality("{answers-dpo}", "{answers-b}"), **judge},
        }
        report = {
            "controllability": {"a": "control-a", "b": "control-b", "a+dpo": "control-dpo"},
            "quality": {"a vs b": "labels", "a+dpo vs b": "quality-dpo"},
        }
        path = write(tmp_path / "dpo-loop.yaml", {"stages": stages, "report": report})
        out = tmp_path / "out"
        moot.run(path, out=out)
        pairs = [json.loads(line) for line in (out / "preferences" / "train.jsonl").open()]
        assert [pair["chosen"][0]["content"][:6] for pair in pairs] == ["ALPHA:"] * 2
        assert [pair["rejected"][0]["content"] for pair in pairs] == ["BETA: no."] * 2
        manifest = json.loads((out / "dpo" / "manifest.json").read_text())
        assert manifest["trainer"] == "dpo" and manifest["steps"] == 2
        assert manifest["data"]["train"]["samples"] == 2
        assert len(json.loads((out / "answers-dpo.json").read_text())) == 2

        tables = (out / "report.md").read_text().split("## ")
        control_table = next(t for t in tables if t.startswith("Controllability"))
        assert "| metric | a (control-a) | b (control-b) | a+dpo (control-dpo) |" in control_table
        rows = {
            line.split("|")[1].strip(): line for line in control_table.splitlines() if "|" in line
        }
        assert rows["items"].split("|")[2:5] == [" 2 "] * 3  # each column its stage's
        quality_table = next(t for t in tables if t.startswith("Pairwise quality"))
        assert "| metric | a vs b (labels) | a+dpo vs b (quality-dpo) |" in quality_table
        rows = {
            line.split("|")[1].strip(): line for line in quality_table.splitlines() if "|" in line
        }
        assert rows["wins"].split("|")[2].strip() == "2"  # A won in both orders, twice

        server.clear_log()
        assert skipped(moot.run(path, out=out)) == set(stages)
        assert server.requests == []


def test_a_failed_stage_resumes_on_rerun_and_the_earlier_ones_are_skipped(tmp_path):
    with ScriptedServer(rules=RULES) as server:
        data = recipe(tmp_path, server.url)
        stages = {name: data["stages"][name] for name in ("generate-base", "control-base")}
        path = write(tmp_path / "loop.yaml", {"stages": stages})
        server.add_fault(Fault("500", times=1, match="supporting versus opposing"))
        with pytest.raises(moot.RunFailed) as failed:
            moot.run(path, out=tmp_path / "out")
        assert type(failed.value) is moot.RunFailed and failed.value.result.exit_code == 1
        assert "stage control-base failed (exit 1)" in stderr(failed.value.result)
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["stages"]["control-base"]["status"] == "failed"
        assert manifest["stages"]["generate-base"]["status"] == "done"
        server.clear_log()
        result = moot.run(path, out=tmp_path / "out")
        assert "stage generate-base: done before" in stdout(result)
        assert len(server.requests) == 1  # only the failed judgment is paid again


@pytest.mark.subprocess
def test_a_killed_stage_resumes_on_rerun_without_paying_twice(tmp_path, env):
    with ScriptedServer(rules=RULES) as server:
        data = recipe(tmp_path, server.url)
        path = write(
            tmp_path / "loop.yaml", {"stages": {"answers": data["stages"]["generate-base"]}}
        )
        server.add_fault(Fault("hang", match="Zoos fund conservation", hang_seconds=60))
        process = popen_moot("run", path, "--out", tmp_path / "out", env=env)
        log = tmp_path / "out" / ".answers.json.progress.jsonl"
        deadline = time.monotonic() + 60
        while not (log.exists() and log.read_text().count("\n") == 1):  # one of two answered
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["stages"]["answers"]["status"] == "running"  # what the kill left
        server.clear_log()
        result = run_moot("run", path, "--out", tmp_path / "out", env=env)
        assert result.returncode == 0, result.stderr
        assert "stage answers: moot generate (resuming)" in result.stdout
        assert len(server.requests) == 1  # the answer the kill cut off, and only it


@pytest.mark.parametrize(
    ("stage", "problem"),
    [
        (
            {"command": "debate", "topics": "t.json", "roundz": 2},
            "stage bad: unknown option 'roundz'",
        ),
        ({"command": "debate"}, "stage bad: missing option 'topics'"),
        ({"command": "eval nonsense"}, "stage bad: unknown command 'eval nonsense'"),
        ({"command": "debate", "topics": "{nowhere}"}, "stage bad: {nowhere} names no earlier"),
        ({"command": "debate", "topics": "t.json", "out": "x"}, "stage bad: `out` is set by"),
        (
            {"command": "train sft", "config": str(TRAIN_TINY), "overrides": ["lora.rr=2"]},
            "stage bad: ",
        ),
    ],
)
def test_a_bad_recipe_is_one_line_exit_2_and_nothing_runs(
    stage, problem, tmp_path, scripted_server
):
    good = {"command": "generate", "dataset": "t.jsonl", "model": "openai/x"}
    good |= {"api-base": scripted_server.url}
    path = write(tmp_path / "bad.yaml", {"stages": {"first": good, "bad": stage}})
    with pytest.raises(moot.InputError) as refused:
        moot.run(path, out=tmp_path / "out")
    assert refused_in_one_line(refused.value).startswith(f"{path}: {problem}")
    assert not (tmp_path / "out").exists()
    assert scripted_server.requests == []


GOOD_STAGE = {"command": "generate", "dataset": "t.jsonl", "model": "openai/x"}


@pytest.mark.parametrize(
    ("recipe", "problem"),
    [
        ({"reprot": {}}, "reprot: unknown key (did you mean 'report'?)"),
        ({"stages": {"bad": {"dataset": "t.jsonl"}}}, "stages.bad.command: required"),
        ({"stages": {"b c": GOOD_STAGE}}, "stages: stage 'b c': a name of letters, digits"),
        ({"report": {"qualty": "first"}}, "report.qualty: unknown key (did you mean 'quality'?)"),
        ({"report": {"controllability": {}}}, "report.controllability: "),
        ({"report": {"quality": {}}}, "report.quality: "),
        (
            {"report": {"quality": {"a vs b": "first"}}},
            "report.quality: 'first' is not a `eval quality` stage",
        ),
        ({"report": {"quality": "first"}}, "report.quality: 'first' is not a `eval quality` stage"),
    ],
)
def test_a_recipe_of_the_wrong_shape_is_one_line_naming_the_key(recipe, problem, tmp_path):
    path = write(tmp_path / "bad.yaml", {"stages": {"first": GOOD_STAGE}} | recipe)
    with pytest.raises(moot.InputError) as refused:
        moot.run(path, out=tmp_path / "out")
    assert refused_in_one_line(refused.value).startswith(f"{path}: {problem}")
    assert not (tmp_path / "out").exists()


def test_dry_run_of_the_tiny_loop_prices_every_stage_and_says_if_the_budget_fits(
    tmp_path, monkeypatch
):
    """`moot run --dry-run` of a fresh examples/loop-tiny.yaml, from another folder (its paths
    are its folder's): every model stage is counted (the later ones from what the earlier ones
    would write), the embedded model is not started, nothing is written, and the whole recipe's
    estimate is set against --budget. examples/loop-gpt.yaml plans from there too."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "loop"
    recipe_ = ROOT / "examples" / "loop-tiny.yaml"
    plan = stdout(moot.run(recipe_, out=out, dry_run=True, budget=0.01))
    for stage in ("debate", "generate-base", "generate-tuned", "control-base", "quality"):
        assert f"\n{stage}: " in plan, stage  # its items
    assert f"generate-tuned/generator             generate         hf/{out}/sft/adapter " in plan
    assert "not in the estimate" not in plan
    assert "budget: the estimate fits within --budget $0.0100" in plan  # local: $0
    assert f"it reads {out}/debate/dataset.jsonl: 2 records" in plan  # sft's data.train
    plan = stdout(moot.run(ROOT / "examples" / "loop-gpt.yaml", out="gpt", dry_run=True))
    assert "debatrix: judgments" in plan
    plan = stdout(moot.run(ROOT / "examples" / "loop-tiny-dpo.yaml", out=out, dry_run=True))
    assert re.search(rf"generate-dpo/generator +generate +hf/{out}/dpo/adapter ", plan)
    assert re.search(r"\nlabels: judgments +16 +0 +16\n", plan)  # 8 topics x 2 sides
    for stage in ("preferences (moot data preferences)", "dpo (moot train dpo)"):
        assert f"stage {stage}: calls no model" in plan
    assert "not in the estimate" not in plan
    assert list(tmp_path.iterdir()) == []


def test_the_run_budget_is_shared_a_stopped_stage_ends_the_run_and_a_rerun_pays_nothing_twice(
    tmp_path,
):
    """The recipe's `budget:` is the whole run's: a stage gets what the stages before it left,
    is stopped by it (exit 3, `stopped`, not failed), and a rerun with a larger --budget (the
    command line's wins) and a `budget` of the stage's own (how it runs: its key stays) resumes
    it: the requests of both runs are a clean run's."""
    prices = tmp_path / "prices.json"
    price = {"input": 1000, "output": 1000}  # $0.001 a token
    prices.write_text(json.dumps({"openai/base": price, "openai/judge": price}))
    with ScriptedServer(rules=RULES) as server:
        data = recipe(tmp_path, server.url)
        stages = {name: data["stages"][name] for name in ("generate-base", "control-base")}
        stages["generate-base"]["max-tokens"] = 16
        # a judgment reserves about $0.9 (its prompt and 512 tokens): not one fits in $0.5
        path = write(
            tmp_path / "loop.yaml", {"stages": stages, "budget": 0.5, "prices": str(prices)}
        )
        with pytest.raises(moot.RunStopped) as stopped:
            moot.run(path, out=tmp_path / "out")
        assert stopped.value.result.exit_code == 3
        said = stderr(stopped.value.result)
        spent = re.search(r"stopped at the run's --budget \$0\.5000 \(\$(\S+) spent", said)
        assert spent and float(spent.group(1)) > 0, said  # by generate-base
        said = stderr(stopped.value.result.stages["control-base"])  # the stage's own
        stage = stopped.value.result.stages["control-base"]
        assert set(stage.messages) <= set(stopped.value.result.messages)  # the run's too
        left = re.search(r"budget reached: spent \$0\.0000 of \$(\S+);", said)
        assert left and float(left.group(1)) == pytest.approx(0.5 - float(spent.group(1)), abs=1e-4)
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["stages"]["generate-base"]["status"] == "done"
        assert manifest["stages"]["control-base"]["status"] == "stopped"
        first = len(server.requests)
        assert first == 2  # the answers; no judgment
        stages["control-base"]["budget"] = 50
        path = write(path, {"stages": stages, "budget": 0.5, "prices": str(prices)})
        result = moot.run(path, out=tmp_path / "out", budget=100)
        assert "stage generate-base: done before" in stdout(result)
        assert "changed" not in stderr(result)
        assert len(server.requests) == first + 2  # the two judgments: a clean run's 4 requests


def test_dry_run_refuses_a_stage_s_own_bad_input_and_notes_an_input_no_plan_tells(tmp_path):
    """A later stage's own missing file is refused (exit 2, one line) before a run would pay for
    the stages before it; a file of an earlier stage that its plan does not describe is noted."""
    data = recipe(tmp_path, "http://127.0.0.1:9")
    stages = {name: data["stages"][name] for name in ("debate", "generate-base", "quality")}
    stages["quality"] |= {"responses": "{generate-base}", "baseline": str(tmp_path / "no.json")}
    out = tmp_path / "out"
    path = write(tmp_path / "a.yaml", {"stages": stages})
    with pytest.raises(moot.InputError) as refused:
        moot.run(path, out=out, dry_run=True)
    missing = f"--baseline {tmp_path / 'no.json'}: file not found"
    assert refused_in_one_line(refused.value) == f"{path}: stage quality: {missing}"
    stages = {"debate": stages["debate"], "answers": dict(stages["generate-base"])}
    stages["answers"]["dataset"] = "{debate}/dataset"  # written, but not planned: no JSON
    plan = stdout(moot.run(write(tmp_path / "b.yaml", {"stages": stages}), out=out, dry_run=True))
    assert "note: stage answers (moot generate): not in the estimate; it reads the output of " in (
        plan
    )
    assert "debate: debates" in plan and "answers:" not in plan
    assert not out.exists()


def stages_of(data: dict, *names: str) -> dict:
    return {name: dict(data["stages"][name]) for name in names}


@pytest.mark.subprocess  # the Hub's address: huggingface_hub reads HF_ENDPOINT on import
def test_how_a_finished_stage_runs_leaves_it_finished_and_a_push_added_only_pushes(tmp_path):
    """The server moved (another --api-base), timeouts, retries, concurrency, verbosity and a
    push changed on finished stages: nothing is paid again, the push is made, once."""
    from tests.cli.helpers import TOKEN, hub_env
    from tests.hub_server import ScriptedHub

    with (
        ScriptedHub(TOKEN) as hub,
        ScriptedServer(rules=RULES) as a,
        ScriptedServer(rules=RULES) as b,
    ):
        env = hub_env(hub, tmp_path)
        data = recipe(tmp_path, a.url)
        stages = stages_of(data, "debate", "generate-base", "control-base")
        path = write(tmp_path / "loop.yaml", {"stages": stages})
        result = run_moot("run", path, "--out", tmp_path / "out", env=env)
        assert result.returncode == 0, result.stderr
        paid = len(a.requests)
        assert paid > 0
        for stage in stages.values():
            stage |= {"api-base": b.url, "timeout": 7, "max-retries": 3, "concurrency": 2}
            stage |= {"max-concurrency": 1, "verbose": True}
        stages["debate"]["push-to-hub"] = "me/debates"
        finished = {"generate-base", "control-base"}
        for skips in (finished, finished | {"debate"}):  # the push, then nothing
            result = run_moot("run", write(path, {"stages": stages}), "--out", tmp_path / "out",
                              env=env)  # fmt: skip
            assert result.returncode == 0, result.stderr
            assert "changed" not in result.stderr
            assert (len(a.requests), b.requests) == (paid, [])
            assert skipped_by(result.stdout) == skips
            assert len(hub.repo("me/debates").commits) == 1  # pushed by the first rerun alone
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        assert manifest["stages"]["debate"]["options"]["push-to-hub"] == "me/debates"


def test_an_edited_input_redoes_its_stage_and_the_stages_that_read_its_output_by_path(tmp_path):
    """Inputs count by content wherever they are named: an edited dataset redoes the stage that
    reads it, and a stage naming that stage's output by its literal path (not `{stage}`) is
    redone with it, not skipped with stale results."""
    out = tmp_path / "out"
    with ScriptedServer(rules=RULES) as server:
        data = recipe(tmp_path, server.url)
        stages = stages_of(data, "generate-base", "control-base")
        stages["control-base"]["responses"] = str(out / "generate-base.json")
        path = write(tmp_path / "loop.yaml", {"stages": stages})
        moot.run(path, out=out)
        dataset = Path(stages["generate-base"]["dataset"])
        dataset.write_text(dataset.read_text().replace("Captivity", "Confinement"))
        server.clear_log()
        result = moot.run(path, out=out)
        assert skipped(result) == set()
        for stage in ("generate-base", "control-base"):
            assert f"moot: stage {stage} changed since its last run" in stderr(result)
        judged = [r for r in server.requests if "supporting versus opposing" in json.dumps(r.body)]
        # the new affirmative answer is judged; the negative one's prompt is the cache's
        answer = json.loads((out / "generate-base.json").read_text())[0]
        assert answer["argument"] == "Confinement harms animals"
        assert len(judged) == 1 and answer["response"] in json.dumps(judged[0].body)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["stages"]["control-base"]["depends_on"] == ["generate-base"]


@pytest.mark.slow  # it trains an SFT step in process: left out of `make test-fast`
def test_an_edited_data_train_named_in_the_sft_config_redoes_the_sft_stage(tmp_path):
    """A `train sft` stage's data.train is an input though only its config names it: edited,
    the stage is redone (a run would train on the new data), not skipped as done."""
    data = tmp_path / "sft.jsonl"
    data.write_text((ROOT / "examples" / "sft-tiny.jsonl").read_text())
    config = yaml.safe_load(TRAIN_TINY.read_text())
    config["data"]["train"] = "sft.jsonl"  # relative to the recipe's folder
    config["training"] |= {"num_train_epochs": 1, "max_steps": 1}
    write(tmp_path / "sft.yaml", config)
    sft = {"command": "train sft", "config": "sft.yaml"}
    path = write(tmp_path / "loop.yaml", {"stages": {"sft": sft}})
    out = tmp_path / "out"
    moot.run(path, out=out, quiet=True)
    assert "stage sft: done before, skipped" in stdout(moot.run(path, out=out, dry_run=True))
    data.write_text(data.read_text().replace("zoo", "park"))
    plan = stdout(moot.run(path, out=out, dry_run=True))
    assert f"stage sft: changed since its last run (or a stage it uses did): its output {out}" in (
        plan
    )


def test_paths_are_the_recipe_s_and_a_moved_input_deletes_nothing(tmp_path, monkeypatch):
    """A recipe's relative paths are its folder's, wherever moot runs from; an input moved away
    is refused before the finished stage that read it is deleted or anything is paid."""
    folder = tmp_path / "recipe"
    (folder / "data").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    out = tmp_path / "out"
    with ScriptedServer(rules=RULES) as server:
        data = recipe(folder / "data", server.url)
        stages = stages_of(data, "generate-base", "control-base")
        stages["generate-base"]["dataset"] = "data/test.jsonl"
        path = write(folder / "loop.yaml", {"stages": stages})
        for cwd in (tmp_path / "elsewhere", folder):
            monkeypatch.chdir(cwd)
            result = moot.run(path, out=out)
        assert skipped(result) == {"generate-base", "control-base"}
        paid, answers = len(server.requests), (out / "generate-base.json").read_text()
        (folder / "data").rename(folder / "data-moved")
        with pytest.raises(moot.InputError) as refused:
            moot.run(path, out=out)
        assert refused_in_one_line(refused.value) == (
            f"{path}: stage generate-base: data/test.jsonl: file not found"
        )
        assert (out / "generate-base.json").read_text() == answers
        assert (out / "control-base" / "summary.json").is_file()
        assert len(server.requests) == paid


def test_two_stages_of_one_name_or_a_stage_named_like_the_run_s_files_are_refused(tmp_path):
    """YAML would keep the second stage of one name alone; a stage named `manifest` would write
    its answers over the run's manifest.json. Each is one line, exit 2, nothing run."""
    good = "{command: generate, dataset: t.jsonl, model: openai/x}"
    cases = {
        f"stages:\n  gen: {good}\n  judge: {good}\n  gen: {good}\n":
            "line 4: cannot read recipe: key 'gen' repeated",
        f"stages:\n  manifest: {good}\n":
            "stages: stage 'manifest': its output would be the run's own manifest.json",
        f"stages:\n  Report: {good}\n":
            "stages: stage 'Report': its output would be the run's own report.md",
        f"stages:\n  gen: {good}\n  Gen: {good}\n":
            "stages: stage 'Gen': its output would be stage 'gen''s (on a disk that ignores case)",
    }  # fmt: skip
    path = tmp_path / "bad.yaml"
    for text, problem in cases.items():
        path.write_text(text)
        with pytest.raises(moot.InputError) as refused:
            moot.run(path, out=tmp_path / "out")
        assert refused_in_one_line(refused.value).startswith(
            f"{path}{',' if problem[0] == 'l' else ':'} {problem}"
        )
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"shard": "3/2"}, "invalid --shard '3/2': need 0 <= I < N"),
        ({"topics": "nowhere.json"}, "nowhere.json: file not found"),
        ({"budget": 1}, "--budget needs the price of openai/debater, which is unknown: give it "),
    ],
)
def test_a_later_stage_s_bad_input_is_refused_before_the_first_stage_pays(bad, problem, tmp_path):
    with ScriptedServer(rules=RULES) as server:
        data = recipe(tmp_path, server.url)
        stages = stages_of(data, "generate-base", "debate")
        stages["debate"] |= bad
        path = write(tmp_path / "loop.yaml", {"stages": stages})
        with pytest.raises(moot.MootError) as refused:
            moot.run(path, out=tmp_path / "out")
        assert refused_in_one_line(refused.value).startswith(f"{path}: stage debate: {problem}")
        assert server.requests == []
        assert not (tmp_path / "out").exists()


def test_a_run_folder_keyed_by_an_earlier_version_is_taken_over_not_redone(tmp_path):
    """Keys changed with issue 29 (hub-private, api-base, ... left them; folders joined them): a
    stage an earlier version finished, under that version's key, is kept and keyed anew."""
    rows = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
         "id": n}
        for q, a, n in (("Hi", "Hello", "a"), ("Yo", "Hey", "b"))
    ]  # fmt: skip
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    mix = {"command": "data mix", "in": ["rows.jsonl"], "hub-private": True, "eval-fraction": 0}
    path, out = write(tmp_path / "recipe.yaml", {"stages": {"mix": mix}}), tmp_path / "out"
    moot.run(path, out=out, quiet=True)
    manifest = json.loads((out / "manifest.json").read_text())
    key = manifest["stages"]["mix"]["key"]
    # the key 6750b4e's graphs/loop.stage_key gave this stage (hub-private counted then)
    manifest["stages"]["mix"]["key"] = "4b278d33db2d3b61"
    (out / "manifest.json").write_text(json.dumps(manifest))
    made = (out / "mix").stat().st_mtime_ns
    result = moot.run(path, out=out)
    assert "stage mix: done before" in stdout(result) and "redone" not in stderr(result)
    assert (out / "mix").stat().st_mtime_ns == made
    assert json.loads((out / "manifest.json").read_text())["stages"]["mix"]["key"] == key


def test_a_stages_rpm_and_tpm_are_its_models_limit(tmp_path):
    """A stage's ``rpm:``/``tpm:`` are its command's ``--rpm``/``--tpm``: the plan's time."""
    data = recipe(tmp_path, "http://127.0.0.1:9/v1")
    stage = {**data["stages"]["generate-base"], "rpm": 1, "max-tokens": 16}
    path = write(tmp_path / "loop.yaml", {"stages": {"generate-base": stage}})
    plan = stdout(moot.run(path, out=tmp_path / "out", dry_run=True))
    assert "limits: openai/base needs about 2.0 min at its --rpm/--tpm" in plan  # 2 answers
    stage |= {"rpm": None, "tpm": 1000}
    path = write(path, {"stages": {"generate-base": stage}})
    plan = stdout(moot.run(path, out=tmp_path / "out", dry_run=True))
    assert re.search(r"limits: openai/base needs about 0\.\d min", plan), plan
