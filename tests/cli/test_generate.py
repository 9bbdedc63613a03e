"""`moot generate`: any model answers the DEBATunE test instructions in the paper's format."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from moot.cli import main
from moot.core.data.responses import load_responses
from moot.core.data.topics import load_topics
from moot.core.errors import InputError
from moot.graphs.debatune_generate import debate_test_instructions
from moot.testing import Fault, ScriptedServer
from tests.cli.helpers import run_moot
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


@pytest.mark.subprocess
def test_generate_writes_the_model_output_format_and_resumes(tmp_path):
    out = tmp_path / "responses.json"
    with ScriptedServer() as server:
        server.add_fault(Fault(kind="500", times=1, match="N2 research"))
        args = [
            "generate",
            "--dataset",
            dataset(tmp_path),
            "--model",
            "openai/m",
            "--api-base",
            server.url,
            "--out",
            out,
            "--max-retries",
            0,
            "--max-tokens",
            64,
        ]
        first = run_moot(*args)
        assert (
            first.returncode == 1
            and "1 of 6 instructions failed" in first.stderr
            and not out.exists()
        )
        server.clear_log()
        second = run_moot(*args)
        assert second.returncode == 0, second.stderr
        assert len(server.requests) == 1  # only the failed instruction is asked again
        server.clear_log()
        assert run_moot(*args).returncode == 0 and server.requests == []
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


@pytest.mark.subprocess
def test_topics_without_arguments_are_refused(tmp_path, scripted_server):
    path = tmp_path / "topics.json"
    path.write_text('["Should zoos be banned?"]')
    result = run_moot(
        "generate",
        "--dataset",
        path,
        "--model",
        "openai/m",
        "--api-base",
        scripted_server.url,
        "--out",
        tmp_path / "r.json",
    )
    assert result.returncode == 2 and "needs topics with arguments" in result.stderr


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


def test_an_argument_listed_twice_is_refused(tmp_path):
    topic = {**TOPIC, "Negative": {"arguments": ["N1 species", "N1 species"]}}
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(topic) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="topic 0: argument 'N1 species' listed twice"):
        debate_test_instructions(load_topics(path), str(path))


def tiny_model(folder: Path) -> Path:
    """A random-weight Llama-architecture model with a word-level tokenizer, built offline."""
    return tiny_llama(folder, ["zoos", "are", "good", "bad", "animals", "because"], says_words=True)


@pytest.mark.subprocess
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
    result = run_moot(
        "generate",
        "--dataset",
        dataset(tmp_path),
        "--model",
        model,
        "--template",
        "vicuna",
        "--max-tokens",
        4,
        "--out",
        out,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"instructions +6 +0 +6 +0", result.stdout)
    records = json.loads(out.read_text())
    assert len(records) == 6 and all(isinstance(r["raw_output"], str) for r in records)


@pytest.mark.subprocess
def test_template_is_only_for_local_models(tmp_path, scripted_server):
    result = run_moot(
        "generate",
        "--dataset",
        dataset(tmp_path),
        "--model",
        "openai/m",
        "--api-base",
        scripted_server.url,
        "--template",
        "vicuna",
        "--out",
        tmp_path / "r.json",
    )
    assert result.returncode == 2 and "--template applies to local model folders" in result.stderr


@pytest.mark.subprocess
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
    args = ["generate", "--dataset", topics, "--template", "vicuna", "--out", out]
    result = run_moot(*args, "--model", model, "--max-length", total)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())[0]["raw_output"] == by_length[0]
    both = run_moot(*args, "--model", model, "--max-length", total, "--max-tokens", 3)
    assert (
        both.returncode == 2 and "--max-length and --max-tokens exclude each other" in both.stderr
    )
    api = ["--model", "openai/m", "--api-base", scripted_server.url, "--max-length", total]
    served = run_moot("generate", "--dataset", topics, "--out", tmp_path / "s.json", *api)
    assert served.returncode == 2 and "--max-length applies to local model" in served.stderr


def ledger_line(stdout: str) -> list[str]:
    """The generator's ledger row: calls, cached, retries, prompt and completion tokens."""
    row = next(line for line in stdout.splitlines() if line.startswith("generator"))
    return row.split()[3:8]


@pytest.mark.subprocess
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
    args = ["generate", "--dataset", topics, "--model", model, "--template", "vicuna"]
    args += ["--max-tokens", 6, "--batch-size", 4, "--cache", tmp_path / "cache.sqlite"]
    first = run_moot(*args, "--out", tmp_path / "first.json")
    assert first.returncode == 0, first.stderr
    records = json.loads((tmp_path / "first.json").read_text())
    assert [r["raw_output"] for r in records] == [text for text, *_ in expected]
    prompt, completion = (sum(reply[i] for reply in expected) for i in (2, 3))
    assert ledger_line(first.stdout) == ["6", "0", "0", str(prompt), str(completion)]
    again = run_moot(*args, "--out", tmp_path / "again.json")  # a new run: all from the cache
    assert again.returncode == 0 and ledger_line(again.stdout)[:2] == ["6", "6"]
    assert json.loads((tmp_path / "again.json").read_text()) == records


@pytest.mark.subprocess
def test_local_model_options_without_a_local_model_are_refused(tmp_path, scripted_server):
    model = tiny_model(tmp_path / "tiny")
    args = ["generate", "--dataset", dataset(tmp_path), "--out", tmp_path / "r.json"]
    served = run_moot(
        *args, "--model", "openai/m", "--api-base", scripted_server.url, "--batch-size", 2
    )
    assert served.returncode == 2 and served.stderr.count("\n") == 1
    assert "--batch-size: for local model folders (hf/...) only" in served.stderr
    assert scripted_server.requests == []
    import torch

    if not torch.cuda.is_available():  # asked for a GPU that is not there
        gpu = run_moot(*args, "--model", model, "--device", "cuda")
        assert gpu.returncode == 2 and "--device cuda: this machine has 0 CUDA" in gpu.stderr
    bad = run_moot(*args, "--model", model, "--device", "gpu")
    assert bad.returncode == 2 and "unknown device 'gpu'" in bad.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.subprocess
def test_vllm_backend_without_vllm_exits_2_with_one_line(tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: this checks the message of a machine without it")
    model = tiny_model(tmp_path / "tiny")
    out = tmp_path / "r.json"
    args = ["generate", "--dataset", dataset(tmp_path), "--model", model, "--out", out]
    result = run_moot(*args, "--backend", "vllm")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--backend vllm needs the vllm package" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


def test_vllm_backend_answers_like_transformers(tmp_path):
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip("needs vLLM (the moot[vllm] extra) and a CUDA GPU; neither is here")
    model = tiny_model(tmp_path / "tiny")
    args = ["generate", "--dataset", dataset(tmp_path), "--model", model, "--max-tokens", 4]
    for backend in ("transformers", "vllm"):
        out = tmp_path / f"{backend}.json"
        extra = ["--dtype", "float32", "--backend", backend, "--batch-size", 8, "--no-cache"]
        result = run_moot(*args, *extra, "--out", out)
        assert result.returncode == 0, result.stderr
    records = [json.loads((tmp_path / f"{b}.json").read_text()) for b in ("transformers", "vllm")]
    assert [r["raw_output"] for r in records[0]] == [r["raw_output"] for r in records[1]]
