"""The `moot train sft --launch` command line and the shipped accelerate configs (no training)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.commands.launch import _validate_launch_command, launch_command_parser
from accelerate.utils import DistributedType

from moot.core.errors import ConfigError
from moot.training import launch as launch_mod
from moot.training.launch import (
    LAUNCHES,
    accelerate_argv,
    accelerate_config,
    launch_command,
    launch_env,
    run_launch,
    stale_build_locks,
)

EXPECTED_TYPE = {
    "ddp": DistributedType.MULTI_GPU,
    "fsdp": DistributedType.FSDP,
    "zero3": DistributedType.DEEPSPEED,
    "zero3-offload": DistributedType.DEEPSPEED,
}


@pytest.fixture
def deepspeed_installed(monkeypatch):
    """Pretend DeepSpeed is importable (it is not a moot dependency)."""
    real = launch_mod.importlib.util.find_spec
    monkeypatch.setattr(
        launch_mod.importlib.util,
        "find_spec",
        lambda name, *a: object() if name == "deepspeed" else real(name, *a),
    )


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def accelerate_sees(argv: list[str]):
    """What `accelerate launch` itself makes of our argv (its parser and validation, no launch)."""
    assert argv[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    args = launch_command_parser().parse_args(argv[3:])
    args, _, _ = _validate_launch_command(args)
    return args


@pytest.mark.parametrize("launch", LAUNCHES)
def test_shipped_configs_load_with_accelerates_loader(launch):
    path = accelerate_config(launch)
    assert path.is_file() and path.parent.name == "accelerate"
    config = load_config_from_file(str(path))
    assert isinstance(config, ClusterConfig)
    assert config.distributed_type == EXPECTED_TYPE[launch]
    # use_cpu would route accelerate to its one-process launcher; precision is the SFT config's
    assert config.use_cpu is False and config.mixed_precision == "no"
    # nested keys are not checked by the loader: each must be an `accelerate launch` option
    known = {action.dest for action in launch_command_parser()._actions}
    nested = [*config.fsdp_config, *config.deepspeed_config]
    assert set(nested) <= known, set(nested) - known


def test_config_details_that_matter():
    fsdp = load_config_from_file(str(accelerate_config("fsdp"))).fsdp_config
    assert fsdp["fsdp_version"] == 2
    assert fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert fsdp["fsdp_state_dict_type"] == "SHARDED_STATE_DICT"
    assert fsdp["fsdp_activation_checkpointing"] is False
    zero3 = load_config_from_file(str(accelerate_config("zero3"))).deepspeed_config
    offload = load_config_from_file(str(accelerate_config("zero3-offload"))).deepspeed_config
    assert zero3["zero_stage"] == offload["zero_stage"] == 3
    assert zero3["offload_optimizer_device"] == zero3["offload_param_device"] == "none"
    assert offload["offload_optimizer_device"] == offload["offload_param_device"] == "cpu"
    for ds in (zero3, offload):
        assert ds["zero3_save_16bit_model"] is True  # save_model() writes a plain adapter
        assert ds["deepspeed_multinode_launcher"] == "standard"  # no pdsh/ssh


def test_ddp_command_reinvokes_moot_without_launch(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    argv = launch_command("ddp", "runs/sft.yaml", ["lora.r=8", "lr=1e-4"], 2, cpu=False)
    assert argv[:3] == [sys.executable, "-m", "accelerate.commands.launch"]
    assert flag(argv, "--config_file") == str(accelerate_config("ddp"))
    assert flag(argv, "--num_processes") == "2"
    assert argv[-8:] == [
        *("-m", "moot", "train", "sft", "--config", "runs/sft.yaml"),
        *("lora.r=8", "lr=1e-4"),
    ]
    assert "--launch" not in argv
    assert flag(argv, "--main_process_port") == "0"  # one machine: accelerate picks a free port
    args = accelerate_sees(argv)
    assert args.multi_gpu and not args.cpu and args.num_processes == 2
    assert args.module and args.training_script == "moot"
    assert args.training_script_args == ["train", "sft", "--config", "runs/sft.yaml", *argv[-2:]]
    dpo = launch_command("ddp", "runs/dpo.yaml", [], 2, cpu=False, trainer="dpo")
    assert dpo[-6:] == ["-m", "moot", "train", "dpo", "--config", "runs/dpo.yaml"]
    assert accelerate_sees(dpo).training_script_args[:2] == ["train", "dpo"]


def test_multi_node_flags_reach_accelerate(deepspeed_installed):
    for launch in ("ddp", "zero3"):
        argv = launch_command(
            launch,
            "sft.yaml",
            [],
            8,
            num_machines=2,
            machine_rank=1,
            main_process_ip="10.1.2.3",
            main_process_port=29555,
            cpu=False,
        )
        args = accelerate_sees(argv)
        assert (args.num_processes, args.num_machines, args.machine_rank) == (8, 2, 1)
        assert (args.main_process_ip, args.main_process_port) == ("10.1.2.3", 29555)
        assert args.rdzv_backend == "static"
    assert args.use_deepspeed and args.zero_stage == 3
    assert args.deepspeed_multinode_launcher == "standard"


def test_multi_node_keeps_accelerates_default_port():
    argv = accelerate_argv("ddp", 4, num_machines=2, main_process_ip="10.1.2.3", cpu=False)
    assert "--main_process_port" not in argv  # 29500 on every machine, not a random one


def test_cpu_launch_exports_use_cpu_and_sets_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(launch_mod, "cores", lambda: 8)
    argv = accelerate_argv("ddp", 2, cpu=True)
    assert flag(argv, "--num_cpu_threads_per_process") == "4"  # cores per process, not 1 each
    assert "--cpu" not in argv  # --cpu would start a single process
    args = accelerate_sees([*argv, "train.py"])
    assert args.multi_gpu and not args.cpu and args.num_processes == 2
    assert launch_env("ddp", True) == {"ACCELERATE_USE_CPU": "true"}
    assert launch_env("ddp", False) == {}
    # with DeepSpeed ACCELERATE_USE_CPU makes accelerate set up CPU DDP under a partitioned model
    assert launch_env("zero3", True) == launch_env("zero3-offload", True) == {}
    two_machines = accelerate_argv("ddp", 4, num_machines=2, main_process_ip="h", cpu=True)
    assert flag(two_machines, "--num_cpu_threads_per_process") == "4"  # 2 processes per machine
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert "--num_cpu_threads_per_process" not in accelerate_argv("ddp", 2, cpu=True)
    assert "--num_cpu_threads_per_process" not in accelerate_argv("ddp", 2, cpu=False)


def test_cpu_is_detected_from_torch_when_not_given(monkeypatch):
    monkeypatch.setattr(launch_mod, "cuda_available", lambda: False)
    with pytest.raises(ConfigError, match="FSDP needs GPUs"):
        accelerate_argv("fsdp", 2)
    monkeypatch.setattr(launch_mod, "cuda_available", lambda: True)
    assert flag(accelerate_argv("fsdp", 2), "--config_file").endswith("fsdp.yaml")


def test_fsdp_is_refused_without_gpus():
    with pytest.raises(ConfigError, match="FSDP needs GPUs.*--launch ddp"):
        launch_command("fsdp", "sft.yaml", [], 2, cpu=True)


def test_zero3_without_deepspeed_names_the_pip_command(monkeypatch):
    real = launch_mod.importlib.util.find_spec
    monkeypatch.setattr(
        launch_mod.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "deepspeed" else real(name, *a),
    )
    for launch in ("zero3", "zero3-offload"):
        with pytest.raises(ConfigError, match=r"needs DeepSpeed.*pip install deepspeed==0\.19\.8"):
            launch_command(launch, "sft.yaml", [], 2, cpu=False)


def test_zero3_on_cpu_needs_a_compiler(deepspeed_installed, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(ConfigError, match="C\\+\\+ compiler"):
        launch_command("zero3", "sft.yaml", [], 2, cpu=True)
    argv = launch_command("zero3", "sft.yaml", [], 2, cpu=False)  # GPU machines: not checked here
    assert accelerate_sees(argv).use_deepspeed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(launch="tpu"), "--launch must be one of ddp, fsdp, zero3, zero3-offload"),
        (dict(num_processes=0), "--num-processes must be at least 1"),
        (dict(num_machines=0), "--num-machines must be at least 1"),
        (dict(num_machines=2, machine_rank=2, main_process_ip="h"), "--machine-rank must be"),
        (dict(machine_rank=-1), "--machine-rank must be"),
        (dict(num_processes=3, num_machines=2, main_process_ip="h"), "does not split evenly"),
        (dict(num_processes=2, num_machines=4, main_process_ip="h"), "fewer than"),
        (dict(num_machines=2), "needs --main-process-ip"),
        (dict(main_process_port=70000), "must be a TCP port"),
    ],
)
def test_bad_numbers_are_config_errors(kwargs, message):
    args = dict(launch="ddp", num_processes=2, cpu=False) | kwargs
    with pytest.raises(ConfigError, match=message):
        accelerate_argv(**args)


def test_run_launch_prints_the_command_and_returns_its_exit_code(monkeypatch, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    seen = {}

    class FakeLauncher:
        def __init__(self, argv, env, start_new_session):
            seen.update(argv=argv, env=env, start_new_session=start_new_session)

        def wait(self):
            return 3

    monkeypatch.setattr(launch_mod.subprocess, "Popen", FakeLauncher)
    code = run_launch("ddp", Path("my sft.yaml"), ["lr=1e-4"], 2, cpu=True)
    assert code == 3
    printed = capsys.readouterr().err.strip()
    assert shlex.split(printed) == ["ACCELERATE_USE_CPU=true", *seen["argv"]]
    assert "'my sft.yaml'" in printed  # shell-quoted, copy-pastable
    assert seen["env"]["ACCELERATE_USE_CPU"] == "true" and seen["start_new_session"]
    assert seen["argv"] == launch_command("ddp", "my sft.yaml", ["lr=1e-4"], 2, cpu=True)


def test_run_launch_refuses_before_starting_anything(monkeypatch):
    monkeypatch.setattr(launch_mod.subprocess, "Popen", lambda *a, **k: pytest.fail("started"))
    with pytest.raises(ConfigError, match="FSDP needs GPUs"):
        run_launch("fsdp", "sft.yaml", [], 2, cpu=True)


def test_a_lock_left_by_a_killed_deepspeed_build_is_refused_not_waited_on(
    deepspeed_installed, tmp_path, monkeypatch
):
    """torch waits forever on a build lock; a killed ZeRO-3 start once hung CI for 10 minutes."""
    fresh = tmp_path / "py311_cpu" / "cpu_adam" / "lock"
    stale = tmp_path / "py311_cpu" / "deepspeed_shm_comm" / "lock"
    for lock in (fresh, stale):
        lock.parent.mkdir(parents=True)
        lock.touch()
    hour_ago = stale.stat().st_mtime - 3600
    os.utime(stale, (hour_ago, hour_ago))
    assert stale_build_locks(tmp_path) == [stale]
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(launch_mod.subprocess, "Popen", lambda *a, **k: pytest.fail("started"))
    with pytest.raises(ConfigError, match=f"{stale} was left by a DeepSpeed op build"):
        run_launch("zero3", "sft.yaml", [], 2, cpu=False)
    stale.unlink()
    assert stale_build_locks(tmp_path) == []


def test_sigterm_stops_the_launcher_gracefully_so_it_can_stop_its_workers(tmp_path):
    """Killing `accelerate launch` outright orphans its workers (torchrun gives each a session of
    its own); moot forwards SIGTERM instead and waits for the launcher to end."""
    marker = tmp_path / "stopped"
    child = (
        "import pathlib, signal, sys, time\n"
        "def stop(*_):\n"
        f"    pathlib.Path({str(marker)!r}).write_text('bye')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "ready"
    previous = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    assert launch_mod._wait(process, grace=30) == 130
    assert marker.read_text() == "bye" and process.returncode == 0
    assert signal.getsignal(signal.SIGTERM) is previous


def test_the_cli_offers_exactly_the_shipped_launches():
    from moot.cli import training

    assert training.LAUNCHES == LAUNCHES
