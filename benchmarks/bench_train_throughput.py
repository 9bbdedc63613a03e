"""LoRA SFT tokens per second on a tiny model: packing vs padding, 2 processes vs 1.

Packing on the CPU batches its packs as rows (``moot.training.sft_batches.PackedRows``), each row
with its own block-diagonal mask; trl's one flattened sequence per batch is for FlashAttention's
variable-length kernels.

Each variant is a real ``moot train sft`` run (its own process, or two under ``--launch ddp``) of
the same random-weight Llama (hidden 128, 4 layers, built from a config) on the same 384 chat
samples whose lengths spread from about 20 to 500 tokens, as debate statements do. Throughput is
the trainer's non-padding input tokens over its own ``train_runtime`` (start-up excluded), read
from the run's ``manifest.json``. Variants are interleaved over the rounds and the median is kept;
the ratios compare variants measured in this same run.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import _common

WORDS = (
    "zoos animals freedom conservation species habitat education welfare captivity research "
    "breeding public ethics wild policy evidence argument rebuttal claim impact harm"
)
VOCABULARY = WORDS.split(" ")
MODEL = (
    "{model_type: llama, hidden_size: 128, intermediate_size: 256, num_hidden_layers: 4, "
    "num_attention_heads: 4, num_key_value_heads: 4, max_position_embeddings: 1024}"
)
# name: (overrides, --launch, OMP_NUM_THREADS); 2 processes get one thread each (the launcher's)
VARIANTS = {
    "padding, 1 process": ([], None, None),
    "packing, 1 process": (["training.packing=true"], None, None),
    "padding, 1 process, 1 thread": ([], None, "1"),
    "padding, 2 processes": ([], "ddp", None),
}


def write_data(path: Path, samples: int, seed: int = 0) -> None:
    """Chat samples with answers of 10-400 words (long-tailed, like debate statements)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(samples):
            words = min(400, int(rng.paretovariate(1.2) * 10))
            answer = " ".join(rng.choice(VOCABULARY) for _ in range(words))
            question = "Argue about " + " ".join(rng.choice(VOCABULARY) for _ in range(8)) + "?"
            messages = [
                {"role": "user", "content": question},
                {"role": "assistant", "content": answer},
            ]
            handle.write(json.dumps({"messages": messages}) + "\n")


def run(name: str, round_: int, folder: Path, data: Path, epochs: int, env: dict) -> dict:
    """One training run in a new folder under `folder`; returns its manifest."""
    overrides, launch, threads = VARIANTS[name]
    out = folder / "runs" / f"{name.replace(', ', '-').replace(' ', '_')}-{round_}"
    cmd = [sys.executable, "-m", "moot", "train", "sft", "--config", str(folder / "bench.yaml")]
    cmd += ["--quiet", f"data.train={data}", f"training.output_dir={out}", *overrides]
    cmd += [f"training.epochs={epochs}"]
    if launch:
        cmd += ["--launch", launch, "--num-processes", "2"]
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env={**env, **({"OMP_NUM_THREADS": threads} if threads else {})},
    )
    if done.returncode:
        raise SystemExit(f"bench_train_throughput: {name} failed:\n{done.stderr[-2000:]}")
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def tokens_per_second(manifest: dict) -> float:
    runtime = next(
        e["train_runtime"] for e in reversed(manifest["log_history"]) if "train_runtime" in e
    )
    return manifest["tokens_seen"] / runtime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant")
    parser.add_argument("--samples", type=int, default=384)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--quick", action="store_true", help="padding and packing only (no thread or DDP variants)"
    )
    args = parser.parse_args()
    names = list(VARIANTS)[:2] if args.quick else list(VARIANTS)
    env = _common.offline_env()
    env.pop("OMP_NUM_THREADS", None)  # each variant gets the launcher's own thread setting
    print("bench_train_throughput: LoRA SFT tokens/s on a tiny Llama, CPU")
    print(f"machine: {_common.machine_note()}")
    with _common.temp_dir("moot-bench-train-") as folder:
        data = folder / "data.jsonl"
        write_data(data, args.samples)
        config = (
            f"model:\n  init: {MODEL}\n  tokenizer_vocab: 1024\n  chat_template: llama-2\n"
            "data:\n  max_length: 512\nlora:\n  r: 8\n  alpha: 16\n  dropout: 0.0\n"
            "training:\n  learning_rate: 1.0e-3\n  per_device_batch_size: 8\n"
            "  activation_checkpointing: false\n  logging_steps: 1000\n  seed: 0\n"
        )
        (folder / "bench.yaml").write_text(config, encoding="utf-8")
        results: dict[str, list[float]] = {name: [] for name in names}
        tokens = 0
        with _common.Stopwatch() as total:
            for round_ in range(args.rounds):
                for name in names:
                    manifest = run(name, round_, folder, data, args.epochs, env)
                    results[name].append(tokens_per_second(manifest))
                    tokens = manifest["data"]["train"]["tokens"]
                    print(
                        f"  round {round_ + 1} {name}: {results[name][-1]:,.0f} tokens/s",
                        flush=True,
                    )
    print(f"after: {_common.machine_note()}")
    print(f"runtime: {total.seconds:.1f} s; {args.samples} samples, {tokens} tokens per epoch")
    medians = {name: _common.median(values) for name, values in results.items()}
    print(f"\n{'variant':<30} {'median tokens/s':>16}")
    for name, value in medians.items():
        print(f"{name:<30} {value:>16,.0f}")
    base = medians["padding, 1 process"]
    packing = medians["packing, 1 process"] / base
    if args.quick:
        print(f"\nratio packing / padding (1 process): {packing:.2f}")
        return 0
    two = medians["padding, 2 processes"]
    print(f"ratio 2 processes / 1 process (padding): {two / base:.2f}")
    one_thread = medians["padding, 1 process, 1 thread"]
    print(f"ratio 2 processes / 1 process, one thread each (padding): {two / one_thread:.2f}")
    print(f"ratio packing / padding (1 process): {packing:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
