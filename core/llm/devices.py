"""Where an in-process model runs and in which precision: ``--device`` and ``--dtype``.

``auto`` (the default) means CUDA where torch sees a GPU, else the CPU. Apple's MPS is used only
when asked (``--device mps``): generation and scoring there differ from the CPU's in ways moot
does not test, so a Mac runs on the CPU unless told otherwise. The automatic precision is
bfloat16 on a CUDA GPU that supports it (float16 on older ones) and float32 everywhere else; the
P.D. scorer defaults to float32 on every device (`moot.core.metrics.perspective_diversity`).
"""

from __future__ import annotations

from typing import Any

from moot.core.errors import ConfigError

#: ``--device`` values (``cuda:N`` also names one GPU).
DEVICES = ("auto", "cpu", "cuda", "mps")
#: ``--dtype`` values.
DTYPES = ("auto", "float32", "bfloat16", "float16")


def check_device(text: str) -> str:
    """`text` if it names a device moot knows (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``).

    Raises:
        ConfigError: Any other name.
    """
    base, _, index = text.partition(":")
    if text in DEVICES or (base == "cuda" and index.isdigit()):
        return text
    raise ConfigError(f"unknown device {text!r}: choose from {', '.join(DEVICES)} or cuda:N")


def choose_device(device: str | None) -> str:
    """The torch device for `device` (None or ``auto``: CUDA if present, else CPU).

    Raises:
        ConfigError: A device that is asked for and not present here.
    """
    import torch

    wanted = check_device(device or "auto")
    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(wanted.partition(":")[2] or 0)
        if index >= count:
            raise ConfigError(f"--device {wanted}: this machine has {count} CUDA device(s)")
    if wanted == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("--device mps: Apple's MPS is not available here")
    return wanted


def choose_dtype(dtype: str | None, device: str) -> Any:
    """The torch dtype for `dtype` on `device` (None or ``auto``: see the module docstring).

    Raises:
        ConfigError: An unknown name.
    """
    import torch

    name = dtype or "auto"
    if name not in DTYPES:
        raise ConfigError(f"unknown dtype {name!r}: choose from {', '.join(DTYPES)}")
    if name == "auto":
        if not device.startswith("cuda"):
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return getattr(torch, name)


def dtype_name(dtype: Any) -> str:
    """``float32`` for ``torch.float32`` (for identities and manifests)."""
    return str(dtype).removeprefix("torch.")
