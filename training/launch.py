"""Launching `moot train sft` on several processes or machines through `accelerate launch`.

``moot train sft --config FILE --launch ddp --num-processes 2`` does not train itself: it runs
``python -m accelerate.commands.launch --config_file <shipped config> --num_processes 2 ...
-m moot train sft --config FILE [overrides]``, which starts one ``moot train sft`` (without
``--launch``) per process. The shipped accelerate configs are in ``training/accelerate/``.

What the command line does on a machine without CUDA (measured with accelerate 1.15,
torch 2.13 CPU; the config files say more):

- ``--cpu`` / ``use_cpu: true`` would make accelerate start ONE process whatever
  ``--num_processes`` says, so the configs keep ``use_cpu: false``. Each worker must then ask
  for CPU itself (``use_cpu=True`` in the SFT config, as the trainer does without CUDA), or it
  trains alone, as rank 0 of a world of 1; for DDP moot also exports ``ACCELERATE_USE_CPU=true``
  (not for DeepSpeed, which it breaks).
- ``--num_cpu_threads_per_process`` is set to the cores per process unless ``OMP_NUM_THREADS``
  is set: two 2-thread workers on 2 cores train 5x slower than two 1-thread ones.
- FSDP is refused: accelerate runs it as plain DDP on a CPU process group.
- ZeRO-3 works (DeepSpeed's CPU accelerator) but needs DeepSpeed installed and a C++ compiler.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from moot.core.errors import ConfigError

#: The ``--launch`` choices, each with its accelerate config ``training/accelerate/<name>.yaml``.
LAUNCHES: tuple[str, ...] = ("ddp", "fsdp", "zero3", "zero3-offload")

#: The DeepSpeed release the ZeRO-3 configs were tested with (it is not a moot dependency).
DEEPSPEED_REQUIREMENT = "deepspeed==0.19.8"

CONFIG_DIR = Path(__file__).resolve().parent / "accelerate"

#: Seconds `run_launch` gives the launcher to stop its workers after Ctrl-C or SIGTERM.
STOP_GRACE_SECONDS = 60.0

#: Age (s) past which a C++ extension build lock was left by a killed build: DeepSpeed builds
#: its CPU ops in under three minutes on 2 cores.
STALE_BUILD_LOCK_SECONDS = 600.0


def accelerate_config(launch: str) -> Path:
    """The shipped accelerate config file for a ``--launch`` choice.

    Args:
        launch: One of `LAUNCHES`.

    Returns:
        The path of ``training/accelerate/<launch>.yaml`` inside the installed package.

    Raises:
        ConfigError: If ``launch`` is not one of `LAUNCHES`.
    """
    if launch not in LAUNCHES:
        raise ConfigError(f"--launch must be one of {', '.join(LAUNCHES)}, not {launch!r}")
    return CONFIG_DIR / f"{launch}.yaml"


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (imports torch, so it is asked only when needed)."""
    import torch

    return torch.cuda.is_available()


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _check(
    launch: str,
    num_processes: int,
    num_machines: int,
    machine_rank: int,
    main_process_ip: str | None,
    main_process_port: int | None,
    cpu: bool,
) -> None:
    """Refuse launches that accelerate would start wrongly or that cannot run here."""
    accelerate_config(launch)
    if num_processes < 1:
        raise ConfigError(f"--num-processes must be at least 1, not {num_processes}")
    if num_machines < 1:
        raise ConfigError(f"--num-machines must be at least 1, not {num_machines}")
    if not 0 <= machine_rank < num_machines:
        raise ConfigError(
            f"--machine-rank must be between 0 and {num_machines - 1} "
            f"(--num-machines {num_machines}), not {machine_rank}"
        )
    if num_processes < num_machines:
        raise ConfigError(
            f"--num-processes {num_processes} is fewer than --num-machines {num_machines}: "
            "it counts the processes on all machines together"
        )
    if num_processes % num_machines:
        raise ConfigError(
            f"--num-processes counts the processes on all machines together: {num_processes} "
            f"does not split evenly over {num_machines} machines"
        )
    if num_machines > 1 and not main_process_ip:
        raise ConfigError(
            "training on several machines needs --main-process-ip, the address of the "
            "machine with --machine-rank 0, which every machine can reach"
        )
    if main_process_port is not None and not 0 <= main_process_port <= 65535:
        raise ConfigError(f"--main-process-port must be a TCP port, not {main_process_port}")
    if launch == "fsdp" and cpu:
        raise ConfigError(
            "FSDP needs GPUs: on a machine without CUDA accelerate silently runs an FSDP config "
            "as plain DDP. Use --launch ddp (or zero3 with DeepSpeed installed) here."
        )
    if launch.startswith("zero3"):
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                f"--launch {launch} needs DeepSpeed, which is not installed: "
                f"pip install {DEEPSPEED_REQUIREMENT}"
            )
        compiler = os.environ.get("CXX") or "c++"
        if cpu and shutil.which(compiler) is None:
            raise ConfigError(
                f"--launch {launch} on CPU needs a C++ compiler ({compiler} not found): DeepSpeed "
                "compiles its CPU ops when training starts. Install one (apt-get install g++) "
                "or set CXX."
            )


def stale_build_locks(root: Path | None = None, now: float | None = None) -> list[Path]:
    """Build locks of torch C++ extensions (DeepSpeed's ops) that a killed build left behind.

    torch waits silently and forever while an extension's ``lock`` file exists, so one killed
    ZeRO-3 start would hang every later one on the machine.

    Args:
        root: Where torch builds extensions: ``TORCH_EXTENSIONS_DIR`` (one folder per
            extension) or, when ``None`` and that is unset, torch's default
            (``~/.cache/torch_extensions/<python>_<device>/<extension>``).
        now: The current time, for tests; ``None`` is ``time.time()``.

    Returns:
        The lock files older than `STALE_BUILD_LOCK_SECONDS`.
    """
    if root is None and (configured := os.environ.get("TORCH_EXTENSIONS_DIR")):
        root = Path(configured)
    elif root is None:
        from torch.utils.cpp_extension import get_default_build_root

        root = Path(get_default_build_root())
    now = time.time() if now is None else now
    locks = [*root.glob("*/lock"), *root.glob("*/*/lock")]
    return sorted(lock for lock in locks if now - lock.stat().st_mtime > STALE_BUILD_LOCK_SECONDS)


def accelerate_argv(
    launch: str,
    num_processes: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
    cpu: bool | None = None,
) -> list[str]:
    """The ``accelerate launch`` part of the command line, up to the program it starts.

    Args:
        launch: One of `LAUNCHES`.
        num_processes: Processes on all machines together.
        num_machines: Machines taking part; each runs the same command with its own rank.
        machine_rank: This machine's rank, 0 for the machine at ``main_process_ip``.
        main_process_ip: Address of the rank-0 machine (needed with several machines).
        main_process_port: Port on the rank-0 machine. ``None`` means a free port on a single
            machine (so that two trainings on one machine do not collide) and accelerate's
            default, 29500, on several machines.
        cpu: Whether the machine trains on CPU; ``None`` asks torch whether CUDA is there.

    Returns:
        ``[sys.executable, "-m", "accelerate.commands.launch", ...]``: the interpreter of this
        venv, so that the workers import the same moot, torch and accelerate.

    Raises:
        ConfigError: If the launch cannot work here (FSDP without CUDA, ZeRO-3 without DeepSpeed
            or, on CPU, without a C++ compiler) or the process/machine numbers do not fit.
    """
    cpu = (not cuda_available()) if cpu is None else cpu
    _check(
        launch, num_processes, num_machines, machine_rank, main_process_ip, main_process_port, cpu
    )
    argv = [sys.executable, "-m", "accelerate.commands.launch"]
    argv += ["--config_file", str(accelerate_config(launch))]
    argv += ["--num_processes", str(num_processes)]
    argv += ["--num_machines", str(num_machines), "--machine_rank", str(machine_rank)]
    if main_process_ip:
        argv += ["--main_process_ip", main_process_ip]
    if main_process_port is None and num_machines == 1:
        main_process_port = 0  # accelerate picks a free port
    if main_process_port is not None:
        argv += ["--main_process_port", str(main_process_port)]
    if cpu and not os.environ.get("OMP_NUM_THREADS"):
        per_process = max(1, cores() // (num_processes // num_machines))
        argv += ["--num_cpu_threads_per_process", str(per_process)]
    return argv


def launch_command(
    launch: str,
    config_path: str | Path,
    overrides: Sequence[str],
    num_processes: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
    cpu: bool | None = None,
    trainer: str = "sft",
) -> list[str]:
    """The full command line that runs ``moot train sft`` (or `trainer`) on every process.

    Args:
        launch: One of `LAUNCHES`.
        config_path: The SFT config file, passed on as ``--config`` (as given: with several
            machines it must name the file on each of them).
        overrides: What follows ``--config FILE`` on each worker's ``moot train sft`` line
            (flags such as ``--quiet``, then ``section.key=value`` overrides), unchanged.
        num_processes: Processes on all machines together.
        num_machines: Machines taking part.
        machine_rank: This machine's rank.
        main_process_ip: Address of the rank-0 machine.
        main_process_port: Port on the rank-0 machine (see `accelerate_argv`).
        cpu: Whether the machine trains on CPU; ``None`` asks torch.
        trainer: The ``moot train`` command each process runs: ``sft`` or ``dpo``.

    Returns:
        The argv: `accelerate_argv` followed by ``-m moot train sft --config FILE [overrides]``.
        Run it with `launch_env` added to the environment (as `run_launch` does).

    Raises:
        ConfigError: As `accelerate_argv`.

    Example:
        >>> argv = launch_command("ddp", "sft.yaml", ["lr=1e-4"], 2, cpu=False)
        >>> argv[-7:]
        ['-m', 'moot', 'train', 'sft', '--config', 'sft.yaml', 'lr=1e-4']
    """
    argv = accelerate_argv(
        launch, num_processes, num_machines, machine_rank, main_process_ip, main_process_port, cpu
    )
    return [*argv, "-m", "moot", "train", trainer, "--config", str(config_path), *overrides]


def launch_env(launch: str, cpu: bool) -> dict[str, str]:
    """Environment variables the launched workers need on top of the current ones.

    Args:
        launch: One of `LAUNCHES`.
        cpu: Whether the machine trains on CPU.

    Returns:
        ``{"ACCELERATE_USE_CPU": "true"}`` for DDP on CPU (TrainingArguments then joins the
        workers in a gloo process group even if the SFT config does not say ``use_cpu``), else
        nothing. Never for DeepSpeed: with it accelerate sets the workers up as plain CPU DDP
        while DeepSpeed partitions the model, and training fails; there the trainer's own
        ``use_cpu=True`` does the job.
    """
    return {"ACCELERATE_USE_CPU": "true"} if cpu and launch == "ddp" else {}


def run_launch(
    launch: str,
    config_path: str | Path,
    overrides: Sequence[str],
    num_processes: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
    cpu: bool | None = None,
    trainer: str = "sft",
) -> int:
    """Print the launch command line to stderr, run it and wait for it.

    Args:
        launch: One of `LAUNCHES`.
        config_path: The SFT config file.
        overrides: As `launch_command`'s.
        num_processes: Processes on all machines together.
        num_machines: Machines taking part.
        machine_rank: This machine's rank.
        main_process_ip: Address of the rank-0 machine.
        main_process_port: Port on the rank-0 machine.
        cpu: Whether the machine trains on CPU; ``None`` asks torch.
        trainer: As `launch_command`'s.

    Returns:
        The exit code of ``accelerate launch`` (non-zero if any worker failed).

    Raises:
        ConfigError: As `accelerate_argv`, or when a killed build left a lock that ZeRO-3
            would wait on (`stale_build_locks`); before anything is started.
    """
    cpu = (not cuda_available()) if cpu is None else cpu
    if launch.startswith("zero3") and (locks := stale_build_locks()):
        raise ConfigError(
            f"{locks[0]} was left by a DeepSpeed op build that was killed, and DeepSpeed would "
            "wait for it forever: delete it if no other training is starting on this machine"
        )
    argv = launch_command(
        launch,
        config_path,
        overrides,
        num_processes,
        num_machines,
        machine_rank,
        main_process_ip,
        main_process_port,
        cpu,
        trainer,
    )
    env = launch_env(launch, cpu)
    print(shlex.join([f"{k}={v}" for k, v in env.items()] + argv), file=sys.stderr, flush=True)
    # a session of its own: a Ctrl-C reaches accelerate once, forwarded by _wait, not twice
    process = subprocess.Popen(argv, env={**os.environ, **env}, start_new_session=True)
    return _wait(process)


def _wait(process: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> int:
    """Wait for ``accelerate launch``; on Ctrl-C or SIGTERM have it stop its workers first.

    torchrun starts each worker in a session of its own, so only the launcher can stop them:
    killing it outright would leave them running (and, in a collective, hanging for ever). It is
    sent SIGTERM, which torchrun's agent answers by stopping the workers, and killed only if it
    has not ended after `grace` seconds.

    Returns:
        The launcher's exit code, or 130 if this process was interrupted.
    """
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    """A SIGTERM handler that stops `_wait` like Ctrl-C does."""
    raise KeyboardInterrupt
