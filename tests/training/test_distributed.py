"""Real multi-process LoRA SFT on CPU (gloo) through the shipped accelerate configs.

Two kinds of worker program. `moot train sft` itself, launched by ``moot train sft --launch``:
the real chain, judged by its manifest. And a probe (`probe` at the bottom: trl SFTTrainer +
peft LoRA on a tiny random Llama) that reports what each rank saw (world size, its records, a
hash of its final LoRA weights), which the trainer does not expose: it shows that the launch
commands and configs make ranks share the data out and end with identical weights.

The ZeRO-3 tests are opt-in (``MOOT_SLOW_TESTS=1``): they take a minute, ~40 s more the first
time on a machine, while DeepSpeed JIT-compiles its CPU ops into ~/.cache/torch_extensions. So
is `moot train dpo --launch ddp` (~10 s): its launch is SFT's, tested here by default.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from moot.training.launch import accelerate_argv, launch_env
from moot.training.sft_trainer import exit_worker

pytestmark = pytest.mark.slow  # every test launches 2 training processes

RECORDS = 16  # 2 per device per step, 4 steps: each of 2 ranks trains on its own 8
STEPS = 4
TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}<s> {{ message['content'] }} "
    "{%- else -%}{% generation %}{{ message['content'] }} </s>{% endgeneration %} {% endif -%}"
    "{%- endfor -%}"
)
WORDS = ["zoos", "are", "good", "bad", "animals", "because"]
WORDS += [f"r{i}" for i in range(RECORDS)]  # r<i> marks record i, so ranks can say what they saw


def build_tiny_model(folder: Path) -> Path:
    """A random 1-layer Llama with a word-level tokenizer and a generation template."""
    from tests.tiny import tiny_llama  # test side only: workers run this file as a script

    return tiny_llama(folder, WORDS, TEMPLATE)


def records() -> list[dict]:
    answers = ["good because animals", "bad because zoos", "animals are good", "zoos are bad"]
    return [
        {
            "messages": [
                {"role": "user", "content": f"r{i} zoos are"},
                {"role": "assistant", "content": answers[i % 4]},
            ]
        }
        for i in range(RECORDS)
    ]


def lora_digest(state: dict) -> str:
    """sha256 over a LoRA state dict, names normalised to the saved form (no ``.default``)."""
    digest = hashlib.sha256()
    for name in sorted(state, key=lambda n: n.replace(".default", "")):
        digest.update(name.replace(".default", "").encode())
        digest.update(state[name].detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- test side


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_program(out: Path, model: Path, use_cpu: bool = True) -> list[str]:
    """The probe as each worker's program."""
    return [str(Path(__file__).resolve()), str(out), str(model), "--use-cpu", str(use_cpu)]


def launch(argv: list[str], env_extra: dict[str, str], timeout: float = 300) -> None:
    """Run one launch command and fail the test with its output if it fails."""
    env = {**os.environ, **env_extra, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, failure(result.stdout + result.stderr)


def failure(output: str) -> str:
    """The lines of a failed launch worth reading: errors first, then the end."""
    errors = [line for line in output.splitlines() if "Error" in line or "error:" in line]
    return "\n".join([*errors[:40], "...", output[-4000:]])


def rank_facts(out: Path, world: int) -> list[dict]:
    facts = [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]
    assert sorted(out.glob("rank*.json")) == [out / f"rank{r}.json" for r in range(world)]
    return facts


def assert_trained_together(out: Path, world: int, distributed_type: str) -> None:
    """Every rank was one of `world`, saw its own records, and ended with the same weights."""
    from safetensors.torch import load_file

    facts = rank_facts(out, world)
    for rank, fact in enumerate(facts):
        assert fact["rank"] == rank and fact["world_size"] == world
        assert fact["distributed_type"] == distributed_type
        assert fact["lora_B_trained"]  # B starts at zero: it moved, so training happened
    seen = [set(fact["seen"]) for fact in facts]
    assert [len(s) for s in seen] == [STEPS * 2] * world  # 2 records a step, none twice
    assert set().union(*seen) == {f"r{i}" for i in range(RECORDS)}  # shared out, not repeated
    assert len({fact["hash"] for fact in facts}) == 1
    saved = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert lora_digest(saved) == facts[0]["hash"]  # what rank 0 saved is what every rank holds


def test_two_gloo_ranks_on_two_machines_share_the_data_and_end_identical(tmp_path, tiny_model):
    """2-process gloo DDP through the shipped ddp config, as --num-machines 2 with one process
    each: every "machine" (here a launcher on 127.0.0.1) runs its own command."""
    port = free_port()
    launch_machines(
        [
            [
                *accelerate_argv(
                    "ddp",
                    2,
                    num_machines=2,
                    machine_rank=rank,
                    main_process_ip="127.0.0.1",
                    main_process_port=port,
                    cpu=True,
                ),
                *probe_program(tmp_path, tiny_model),
            ]
            for rank in (0, 1)
        ],
        {**launch_env("ddp", cpu=True), "HF_HUB_OFFLINE": "1"},
        tmp_path / "logs",
    )
    assert_trained_together(tmp_path, 2, "MULTI_CPU")


def launch_machines(commands: list[list[str]], env_extra: dict, logs: Path, timeout: float = 300):
    """Run one launch command per machine at once, and fail as soon as one machine fails.

    Waiting on the machines one by one would hide a failure: when machine 1 fails, machine 0's
    launcher waits out torch elastic's 300 s exit barrier before it returns.
    """
    logs.mkdir()
    env = {**os.environ, **env_extra}
    machines = []
    for rank, command in enumerate(commands):
        with (logs / f"machine{rank}.log").open("w") as log:  # a file: a full pipe would block
            machines.append(
                subprocess.Popen(
                    command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )

    def outputs() -> str:
        return "\n".join(
            f"--- machine {rank} exited {machine.poll()}:\n"
            + failure((logs / f"machine{rank}.log").read_text(errors="replace"))
            for rank, machine in enumerate(machines)
        )

    deadline = time.monotonic() + timeout
    try:
        while (codes := [m.poll() for m in machines]) != [0] * len(machines):
            if any(code not in (None, 0) for code in codes):
                time.sleep(2)  # let the others fail too, if they are going to
                pytest.fail(f"a machine failed: {codes}\n{outputs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s: {codes}\n{outputs()}")
            time.sleep(0.2)
    finally:
        for machine in machines:
            if machine.poll() is None:
                os.killpg(machine.pid, signal.SIGKILL)  # the launcher and its workers
                machine.wait()


def moot_launch(
    out: Path,
    launch: str,
    trainer: str = "sft",
    config: str | Path = "examples/train-tiny.yaml",
    overrides: tuple[str, ...] = ("training.epochs=2",),
) -> dict:
    """`moot train <trainer> --launch <launch> --num-processes 2` (the tiny SFT example unless
    told otherwise); its manifest."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            *(sys.executable, "-m", "moot", "train", trainer),
            *("--config", config, f"training.output_dir={out}", *overrides),
            *("--quiet", "--launch", launch, "--num-processes", "2"),
        ],
        cwd=root,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, failure(result.stdout + result.stderr)
    printed = result.stderr.splitlines()[0]
    assert "accelerate.commands.launch" in printed and f"-m moot train {trainer}" in printed
    assert "{'loss'" not in result.stdout  # --quiet reached the workers
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["processes"] == 2 and manifest["device"] == "cpu"
    assert (out / "adapter" / "adapter_model.safetensors").is_file()
    card = (out / "adapter" / "README.md").read_text()  # moot's card, by the launching command
    assert "library_name: peft" in card and "- moot\n" in card and "cpu, 2 |" in card
    return manifest


@pytest.fixture(scope="module")
def ddp_manifest(tmp_path_factory) -> dict:
    return moot_launch(tmp_path_factory.mktemp("ddp") / "run", "ddp")


def test_moot_train_sft_launch_ddp_end_to_end(ddp_manifest):
    """The real chain: `moot train sft --launch ddp` -> accelerate -> 2 x `moot train sft`."""
    assert ddp_manifest["steps"] == 4  # 12 samples, 4 per device x 2 processes: 2 steps an epoch
    assert ddp_manifest["losses"]["train_loss"] > 0


needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs DeepSpeed (pip install deepspeed==0.19.8)",
)


def opt_in(cost: str) -> pytest.MarkDecorator:
    """Skip unless ``MOOT_SLOW_TESTS`` is set: a test that costs `cost`, too much for the suite."""
    return pytest.mark.skipif(
        not os.environ.get("MOOT_SLOW_TESTS"),
        reason=f"slow: {cost}; set MOOT_SLOW_TESTS=1 to run it",
    )


# ZeRO-3 on CPU costs a minute (2.5 while DeepSpeed compiles its ops) and a machine-wide build
# cache: opt-in, so the default suite stays fast and independent of ~/.cache.
slow = opt_in("1-2.5 min (DeepSpeed compiles its CPU ops)")


@needs_deepspeed
@slow
def test_zero3_trains_what_ddp_trains(tmp_path, ddp_manifest):
    manifest = moot_launch(tmp_path / "run", "zero3")
    assert manifest["steps"] == ddp_manifest["steps"]
    assert manifest["losses"]["train_loss"] == pytest.approx(
        ddp_manifest["losses"]["train_loss"], rel=1e-3
    )


@needs_deepspeed
@slow
def test_zero3_offload_trains_what_ddp_trains(tmp_path, ddp_manifest):
    manifest = moot_launch(tmp_path / "run", "zero3-offload")
    assert manifest["losses"]["train_loss"] == pytest.approx(
        ddp_manifest["losses"]["train_loss"], rel=1e-3
    )


DPO_CONFIG = """\
model: {{base: {base}}}
data: {{train: {train}, max_length: 32}}
lora: {{r: 4, alpha: 8, dropout: 0.0}}
training: {{max_steps: 4, per_device_train_batch_size: 2, learning_rate: 1.0e-2, seed: 0,
  activation_checkpointing: false}}
"""


@opt_in("~10 s on 2 cores: two more processes import trl and train")
def test_moot_train_dpo_launch_ddp_from_an_sft_adapter(tmp_path, tiny_model):
    """`moot train dpo --launch ddp` from a LoRA adapter: rank 0 merges it into OUT/base while
    rank 1 waits for it, then both train DPO on their share of the pairs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    lora = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model), lora).save_pretrained(
        tmp_path / "sft"
    )
    pairs = tmp_path / "pairs.jsonl"
    pair = {"chosen": "good because animals", "rejected": "bad because zoos"}
    pairs.write_text(
        "".join(json.dumps({"prompt": f"r{i} zoos are", **pair}) + "\n" for i in range(RECORDS))
    )
    config = tmp_path / "dpo.yaml"
    config.write_text(DPO_CONFIG.format(base=tmp_path / "sft", train=pairs))
    out = tmp_path / "run"
    manifest = moot_launch(out, "ddp", "dpo", config, ())
    assert manifest["trainer"] == "dpo" and manifest["method"] == "lora"
    assert manifest["steps"] == STEPS  # 16 pairs, 2 per device x 2 processes: 4 steps an epoch
    assert manifest["epochs"] == 1 and manifest["data"]["train"]["samples"] == RECORDS
    assert manifest["base"] == str(out / "base") and (out / "base" / "config.json").is_file()
    adapter = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(out / "base")


# --------------------------------------------------------------------------- worker side


def probe(out: Path, model_dir: Path, use_cpu: bool) -> None:
    """Train like `moot train sft` does, save the adapter, and report this rank's facts."""
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    seen: list[str] = []

    class Recording(SFTTrainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            seen.extend(self.processing_class.decode(row[1:2]) for row in inputs["input_ids"])
            return super().compute_loss(model, inputs, *args, **kwargs)

    config = SFTConfig(  # built before the model is loaded, so ZeRO-3 can partition at load
        output_dir=str(out / "run"),
        max_steps=STEPS,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        use_cpu=use_cpu,
        bf16=False,
        gradient_checkpointing=False,
        ddp_find_unused_parameters=False,
        report_to=[],
        save_strategy="no",
        assistant_only_loss=True,
        max_length=64,
        seed=0,  # the same on every rank
    )
    trainer = Recording(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=config,
        train_dataset=Dataset.from_list(records()),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
        ),
    )
    trainer.train()
    trainer.save_model(str(out / "adapter"))  # every rank: a collective under ZeRO-3
    lora = [(n, p) for n, p in trainer.model.named_parameters() if "lora_" in n]
    if any(hasattr(p, "ds_id") for _, p in lora):  # ZeRO-3: gather the partitions
        import deepspeed

        with deepspeed.zero.GatheredParameters([p for _, p in lora], modifier_rank=None):
            state = {n: p.detach().clone() for n, p in lora}
    else:
        state = dict(lora)
    accelerator = trainer.accelerator
    fact = {
        "rank": accelerator.process_index,
        "world_size": accelerator.num_processes,
        "distributed_type": accelerator.distributed_type.value,
        "hash": lora_digest(state),
        "lora_B_trained": any(p.abs().sum().item() > 0 for n, p in state.items() if "lora_B" in n),
        "seen": seen,
    }
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(fact))
    accelerator.wait_for_everyone()  # every rank past its last collective before any ends
    exit_worker()


if __name__ == "__main__":
    out, model_dir, _, use_cpu = sys.argv[1:5]
    probe(Path(out), Path(model_dir), use_cpu == "True")
