"""`LocalModel`: batched greedy generation answers as one-at-a-time generation does."""

from __future__ import annotations

from pathlib import Path

import pytest

from moot.core.llm.local_hf import LocalModel
from tests.tiny import tiny_llama

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast

WORDS = ["zoos", "are", "good", "bad", "animals", "because", "cages", "cost"]
#: Prompts of different lengths (so rows are left-padded) with different budgets, some by
#: ``max_length`` (the prompt counts), greedy by temperature 0 or by the model's own default.
REQUESTS = [
    ("zoos are good", {"max_tokens": 12, "temperature": 0}),
    ("animals because bad zoos are cages cost good bad", {"max_tokens": 5, "temperature": 0}),
    ("cost", {"max_tokens": 12}),
    ("zoos zoos are bad because animals", {"max_length": 60, "temperature": 0.0}),
    ("cages", {"max_tokens": 7, "temperature": 0}),
    ("good because", {"max_tokens": 16, "temperature": 0}),
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama, whose end tokens are </s> and two words it says: some rows end early."""
    from transformers import GenerationConfig

    folder = tiny_llama(tmp_path_factory.mktemp("tiny") / "model", WORDS)
    config = GenerationConfig.from_pretrained(folder)
    config.eos_token_id = [2, 4 + WORDS.index("cages"), 4 + WORDS.index("zoos")]
    config.save_pretrained(folder)
    return folder


def chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_batched_greedy_generation_equals_one_at_a_time(model_dir):
    alone = LocalModel(str(model_dir))
    expected = [alone.generate(chat(text), params) for text, params in REQUESTS]
    batched = LocalModel(str(model_dir), batch_size=4)
    futures = [batched.submit(chat(text), params) for text, params in REQUESTS]
    assert [f.result(timeout=60) for f in futures] == expected
    assert alone.batch_sizes == {1: len(REQUESTS)}
    assert max(batched.batch_sizes) > 1 and sum(batched.batch_sizes.values()) < len(REQUESTS)
    # the rows did not all run to one length: cutting at each row's end token was exercised
    assert {"stop", "length"} <= {finish for _, finish, _, _ in expected}
    assert len({completion for *_, completion in expected}) > 2


def test_sampled_requests_run_alone_with_their_own_seed(model_dir):
    model = LocalModel(str(model_dir), batch_size=4)
    params = [{"max_tokens": 8, "temperature": 1.0, "seed": seed} for seed in (1, 2, 1, 3)]
    futures = [model.submit(chat("zoos are good"), p) for p in params]
    replies = [f.result(timeout=60) for f in futures]
    assert model.batch_sizes == {1: 4}
    assert replies[0] == replies[2] == model.generate(chat("zoos are good"), params[0])


def test_cpu_runs_in_float32_unless_asked(model_dir):
    import torch

    default = LocalModel(str(model_dir))
    assert default.precision == "float32" and default.model.device.type == "cpu"
    half = LocalModel(str(model_dir), device="cpu", dtype="bfloat16")
    assert half.precision == "bfloat16" and half.model.dtype == torch.bfloat16
    text, finish, prompt, completion = half.generate(chat("zoos"), {"max_tokens": 3})
    assert finish in ("stop", "length") and prompt > 0 and 0 < completion <= 3


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU (none on this machine)"
)
def test_cuda_batched_float32_equals_one_at_a_time(model_dir):
    alone = LocalModel(str(model_dir), device="cuda", dtype="float32")
    batched = LocalModel(str(model_dir), device="cuda", dtype="float32", batch_size=8)
    assert alone.model.device.type == "cuda"
    expected = [alone.generate(chat(text), params) for text, params in REQUESTS]
    futures = [batched.submit(chat(text), params) for text, params in REQUESTS]
    assert [f.result(timeout=60) for f in futures] == expected
    assert LocalModel(str(model_dir)).precision in ("bfloat16", "float16")  # auto on a GPU
