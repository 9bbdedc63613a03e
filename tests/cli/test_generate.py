"""`moot generate`: any model answers the DEBATunE test instructions in the paper's format.

In process (`moot.generate(...)`, `moot.cli.main`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import moot
from moot.cli import main
from moot.core.data.responses import load_responses
from moot.core.data.topics import load_topics
from moot.core.errors import InputError
from moot.graphs.debatune_generate import debate_test_instructions
from moot.testing import Fault, ScriptedServer
from tests.cli.helpers import refused_in_one_line, stderr, stdout
from tests.tiny import tiny_llama

TOPIC = {
    "topic": "Should zoos be banned?",
    "Affirmative": {"arguments": ["A1 cages", "A2 stress", "A3 cost"]},
    "Negative": {"arguments": ["N1 species", "N2 research", "N3 education"]},
}


def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "test_arg.jsonl"
    path.write_text(json.dumps(TOPIC) + "\n", encoding="utf-8")
    return path


def test_generate_writes_the_model_output_format_and_resumes(tmp_path):
    out = tmp_path / "responses.json"
    with ScriptedServer() as server:
        server.add_fault(Fault(kind="500", times=1, match="N2 research"))
        options = {"dataset": dataset(tmp_path), "model": "openai/m", "api_base": server.url}
        options |= {"out": out, "max_retries": 0, "max_tokens": 64}
        with pytest.raises(moot.RunFailed) as first:
            moot.generate(**options)
        assert type(first.value) is moot.RunFailed and first.value.result.exit_code == 1
        assert "1 of 6 instructions failed" in stderr(first.value.result) and not out.exists()
        server.clear_log()
        moot.generate(**options)
        assert len(server.requests) == 1  # only the failed instruction is asked again
        server.clear_log()
        moot.generate(**options)
        assert server.requests == []
    records = json.loads(out.read_text())
    assert [(r["side"], r["argument"]) for r in records] == [
        ("affirmative", "A1 cages"),
        ("affirmative", "A2 stress"),
        ("affirmative", "A3 cost"),
        ("negative", "N1 species"),
        ("negative", "N2 research"),
        ("negative", "N3 education"),
    ]
    assert records[0]["instruction"].startswith('Suppose you are affirmative to the topic "Should')
    assert all(r["response"] for r in records)
    assert len(load_responses(out)) == 6  # the judges read it


def test_topics_without_arguments_are_refused(tmp_path, scripted_server):
    path = tmp_path / "topics.json"
    path.write_text('["Should zoos be banned?"]')
    with pytest.raises(moot.MootError) as refused:
        moot.generate(
            dataset=path, model="openai/m", api_base=scripted_server.url, out=tmp_path / "r.json"
        )
    assert "needs topics with arguments" in str(refused.value)


def unwritable_outs(tmp_path: Path) -> list[tuple[Path, str]]:
    folder = tmp_path / "adir"
    folder.mkdir()
    efile = tmp_path / "efile"
    efile.write_text("mine")
    outs = [(folder, "is a folder"), (efile / "sub" / "r.json", f"{efile} is not a folder")]
    if os.geteuid() != 0:  # root may write anywhere
        readonly = tmp_path / "ro"
        readonly.mkdir(mode=0o500)
        outs.append((readonly / "r.json", f"cannot write in {readonly}"))
    return outs


def test_an_unwritable_out_is_refused_before_any_model_call(tmp_path, scripted_server, capsys):
    path = dataset(tmp_path)
    before = path.read_bytes()
    for out, problem in [*unwritable_outs(tmp_path), (path, "is the input --dataset")]:
        args = [
            "generate",
            "--dataset",
            path,
            "--model",
            "openai/m",
            "--api-base",
            scripted_server.url,
        ]
        code = main([*map(str, args), "--out", str(out), "--no-cache", "--quiet"])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"moot: error: --out {out}") and problem in err
        assert err.count("\n") == 1 and scripted_server.requests == []
    assert not any((tmp_path / "adir").iterdir())  # no progress ledger either
    assert not (tmp_path / ".adir.progress.jsonl").exists() and (tmp_path / "efile").is_file()
    assert path.read_bytes() == before


def test_off_a_terminal_progress_is_a_line_every_interval_and_one_at_the_end(tmp_path, capsys):
    args = ["generate", "--dataset", dataset(tmp_path), "--model", "openai/m", "--no-cache"]
    args += ["--max-retries", 0, "--concurrency", 1, "--progress-every", 0.05]
    with ScriptedServer(latency=0.05) as server:
        server.add_fault(Fault(kind="500", times=1, match="N2 research"))
        args += ["--api-base", server.url]
        code = main([*map(str, args), "--out", str(tmp_path / "r.json")])
        err = capsys.readouterr().err  # not a terminal
        quiet = main([*map(str, args), "--out", str(tmp_path / "q.json"), "--quiet"])
        quiet_err = capsys.readouterr().err
    assert code == 1 and "\r" not in err and "\x1b" not in err
    *running, end = [line for line in err.splitlines() if line.startswith("moot: instructions:")]
    counts = [int(line.split()[2]) for line in running]
    assert len(running) >= 2 and counts == sorted(counts) and counts[-1] < 6, err
    assert all(", ETA " in line and "; calls " in line for line in running)
    assert re.fullmatch(
        r"moot: instructions: 6 of 6 finished \(1 failed\); calls 6, retries 0, tokens \d+, "
        r"unpriced; [\d.]+/s, took [\d.]+s",
        end,
    ), err
    assert quiet == 0 and "moot: instructions:" not in quiet_err


def test_an_argument_listed_twice_is_refused(tmp_path):
    topic = {**TOPIC, "Negative": {"arguments": ["N1 species", "N1 species"]}}
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(topic) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="topic 0: argument 'N1 species' listed twice"):
        debate_test_instructions(load_topics(path), str(path))


def tiny_model(folder: Path) -> Path:
    """A random-weight Llama-architecture model with a word-level tokenizer, built offline."""
    return tiny_llama(folder, ["zoos", "are", "good", "bad", "animals", "because"], says_words=True)


@pytest.mark.parametrize("adapter", [False, True], ids=["model", "lora-adapter"])
def test_generate_with_a_local_model_folder(adapter, tmp_path):
    model = tiny_model(tmp_path / "tiny")
    if adapter:
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        peft_model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(model),
            LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]),
        )
        peft_model.save_pretrained(tmp_path / "adapter")
        AutoTokenizer.from_pretrained(model).save_pretrained(tmp_path / "adapter")
        model = tmp_path / "adapter"
    out = tmp_path / "responses.json"
    result = moot.generate(
        dataset=dataset(tmp_path), model=model, template="vicuna", max_tokens=4, out=out
    )
    assert re.search(r"instructions +6 +0 +6 +0", stdout(result))
    records = json.loads(out.read_text())
    assert len(records) == 6 and all(isinstance(r["raw_output"], str) for r in records)


def test_template_is_only_for_local_models(tmp_path, scripted_server):
    with pytest.raises(moot.MootError) as refused:
        moot.generate(
            dataset=dataset(tmp_path), model="openai/m", api_base=scripted_server.url,
            template="vicuna", out=tmp_path / "r.json",
        )  # fmt: skip
    assert "--template applies to local model folders" in str(refused.value)


def test_max_length_counts_the_prompt_as_the_references_generate(tmp_path, scripted_server):
    from moot.core.errors import ContextWindowExceeded
    from moot.core.llm.local_hf import LocalModel
    from moot.prompts import template_source

    model = tiny_model(tmp_path / "tiny")
    local = LocalModel(str(model), template_source("chat_templates/vicuna.j2"))
    topics = dataset(tmp_path)
    first = debate_test_instructions(load_topics(topics), str(topics))[0]["instruction"]
    messages = [{"role": "user", "content": first}]
    prompt = local.generate(messages, {"max_tokens": 1})[2]
    total = prompt + 3  # generate(max_length=total) in the reference: 3 new tokens at most
    by_length = local.generate(messages, {"max_length": total})
    assert by_length == local.generate(messages, {"max_tokens": 3})
    assert by_length[2] == prompt and by_length[3] <= 3
    with pytest.raises(ContextWindowExceeded, match=f"fill max_length {prompt}"):
        local.generate(messages, {"max_length": prompt})
    out = tmp_path / "responses.json"
    options = {"dataset": topics, "template": "vicuna", "out": out}
    moot.generate(**options, model=model, max_length=total)
    assert json.loads(out.read_text())[0]["raw_output"] == by_length[0]
    with pytest.raises(moot.MootError) as both:
        moot.generate(**options, model=model, max_length=total, max_tokens=3)
    assert "--max-length and --max-tokens exclude each other" in str(both.value)
    api = {"model": "openai/m", "api_base": scripted_server.url, "max_length": total}
    with pytest.raises(moot.MootError) as served:
        moot.generate(dataset=topics, out=tmp_path / "s.json", **api)
    assert "--max-length applies to local model" in str(served.value)


def ledger_line(stdout: str) -> list[str]:
    """The generator's ledger row: calls, cached, retries, prompt and completion tokens."""
    row = next(line for line in stdout.splitlines() if line.startswith("generator"))
    return row.split()[3:8]


def test_batch_size_answers_as_one_at_a_time_with_the_same_tokens_and_cache(tmp_path):
    from moot.core.llm.local_hf import LocalModel
    from moot.prompts import template_source

    model = tiny_model(tmp_path / "tiny")
    topics = dataset(tmp_path)
    alone = LocalModel(str(model), template_source("chat_templates/vicuna.j2"))
    params = {"max_tokens": 6, "temperature": 0.0, "seed": 0}
    expected = [
        alone.generate([{"role": "user", "content": item["instruction"]}], params)
        for item in debate_test_instructions(load_topics(topics), str(topics))
    ]
    options = {"dataset": topics, "model": model, "template": "vicuna", "max_tokens": 6}
    options |= {"batch_size": 4, "cache": tmp_path / "cache.sqlite"}
    first = stdout(moot.generate(**options, out=tmp_path / "first.json"))
    records = json.loads((tmp_path / "first.json").read_text())
    assert [r["raw_output"] for r in records] == [text for text, *_ in expected]
    prompt, completion = (sum(reply[i] for reply in expected) for i in (2, 3))
    assert ledger_line(first) == ["6", "0", "0", str(prompt), str(completion)]
    # a new run: all from the cache
    again = stdout(moot.generate(**options, out=tmp_path / "again.json"))
    assert ledger_line(again)[:2] == ["6", "6"]
    assert json.loads((tmp_path / "again.json").read_text()) == records


def test_local_model_options_without_a_local_model_are_refused(tmp_path, scripted_server):
    model = tiny_model(tmp_path / "tiny")
    options = {"dataset": dataset(tmp_path), "out": tmp_path / "r.json"}
    with pytest.raises(moot.MootError) as served:
        moot.generate(**options, model="openai/m", api_base=scripted_server.url, batch_size=2)
    assert "--batch-size: for local model folders (hf/...) only" in refused_in_one_line(
        served.value
    )
    assert scripted_server.requests == []
    import torch

    if not torch.cuda.is_available():  # asked for a GPU that is not there
        with pytest.raises(moot.MootError) as gpu:
            moot.generate(**options, model=model, device="cuda")
        assert "--device cuda: this machine has 0 CUDA" in str(gpu.value)
    with pytest.raises(moot.MootError) as bad:
        moot.generate(**options, model=model, device="gpu")
    assert "unknown device 'gpu'" in str(bad.value)
    assert not (tmp_path / "r.json").exists()


def test_vllm_backend_without_vllm_exits_2_with_one_line(tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: this checks the message of a machine without it")
    model = tiny_model(tmp_path / "tiny")
    out = tmp_path / "r.json"
    with pytest.raises(moot.MootError) as refused:
        moot.generate(dataset=dataset(tmp_path), model=model, out=out, backend="vllm")
    assert "--backend vllm needs the vllm package" in refused_in_one_line(refused.value)
    assert not out.exists()


def test_vllm_backend_answers_like_transformers(tmp_path):
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip("needs vLLM (the moot[vllm] extra) and a CUDA GPU; neither is here")
    model = tiny_model(tmp_path / "tiny")
    options = {"dataset": dataset(tmp_path), "model": model, "max_tokens": 4}
    for backend in ("transformers", "vllm"):
        out = tmp_path / f"{backend}.json"
        extra = {"dtype": "float32", "backend": backend, "batch_size": 8, "no_cache": True}
        moot.generate(**options, **extra, out=out)
    records = [json.loads((tmp_path / f"{b}.json").read_text()) for b in ("transformers", "vllm")]
    assert [r["raw_output"] for r in records[0]] == [r["raw_output"] for r in records[1]]


def test_template_sends_debatunes_released_format_and_names_it_in_the_ids(tmp_path):
    from transformers import AutoTokenizer

    from moot.core.data.records import stable_id
    from moot.prompts import template_digest
    from tests.training.test_chat_templates import RELEASED_PROMPTS

    model, topics = tiny_model(tmp_path / "tiny"), dataset(tmp_path)
    options = {"dataset": topics, "model": model, "max_tokens": 1, "limit": 1}
    sent = {
        name: stdout(moot.generate(**options, template=name, out=tmp_path / f"{name}.json"))
        for name in ("vicuna", "llama-2")
    }
    # the prompt's tokens are the released llama2 prompt's: BOS, then its text (its own <s> too)
    first = debate_test_instructions(load_topics(topics), str(topics))[0]["instruction"]
    released = "<s>" + RELEASED_PROMPTS["llama-2"].format_map({"instruction": first})
    tokens = AutoTokenizer.from_pretrained(model)(released, add_special_tokens=False)["input_ids"]
    assert ledger_line(sent["llama-2"])[3] == str(len(tokens)) != ledger_line(sent["vicuna"])[3]
    # ids name the template, so a rerun in another format into the same --out asks again
    ids = {
        name: json.loads((tmp_path / f".{name}.json.progress.jsonl").read_text())["id"]
        for name in sent
    }
    identity = {"model": f"hf/{model}", "temperature": 0.0, "max_tokens": 1, "seed": 0}
    for name, template in (("vicuna", "vicuna.j2"), ("llama-2", "debatune/llama-2.j2")):
        digest = template_digest(f"chat_templates/{template}")
        assert ids[name] == stable_id("generate", identity | {"template": digest}, first)
