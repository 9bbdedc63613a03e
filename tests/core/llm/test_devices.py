"""`--device` and `--dtype`: auto is CUDA + bfloat16 where present, else the CPU in float32."""

from __future__ import annotations

import pytest
import torch

from moot.core.errors import ConfigError
from moot.core.llm.devices import check_device, choose_device, choose_dtype

NO_CUDA = not torch.cuda.is_available()


@pytest.mark.skipif(not NO_CUDA, reason="checks a machine without a GPU (this one has one)")
def test_auto_is_the_cpu_in_float32_without_a_gpu():
    assert choose_device(None) == choose_device("auto") == "cpu"
    assert choose_dtype(None, "cpu") is torch.float32
    assert choose_dtype("bfloat16", "cpu") is torch.bfloat16
    with pytest.raises(ConfigError, match="--device cuda:1: this machine has 0 CUDA"):
        choose_device("cuda:1")


def test_mps_is_never_chosen_automatically_and_names_are_checked():
    assert choose_device(None) in ("cpu", "cuda")
    assert choose_dtype("auto", "mps") is torch.float32
    for bad in ("gpu", "cuda:x", "cuda:"):
        with pytest.raises(ConfigError, match="unknown device"):
            check_device(bad)
    with pytest.raises(ConfigError, match="unknown dtype 'fp8'"):
        choose_dtype("fp8", "cpu")


@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU (none on this machine)")
def test_auto_on_a_gpu_is_cuda_in_half_precision():
    assert choose_device(None) == "cuda"
    assert choose_dtype(None, "cuda") in (torch.bfloat16, torch.float16)
