"""Which shard of a job this process is, read from the scheduler that started it (``--shard auto``).

Read in this order; the first scheduler whose index variable is set decides, and the others are
not looked at (a torchrun inside a SLURM array task is that task's shard):

1. SLURM job arrays: ``SLURM_ARRAY_TASK_ID``, counted by ``SLURM_ARRAY_TASK_COUNT`` or by
   ``SLURM_ARRAY_TASK_MIN``/``SLURM_ARRAY_TASK_MAX`` (and ``SLURM_ARRAY_TASK_STEP``): task
   ``MIN + i*STEP`` is shard ``i``.
2. Kubernetes Indexed Jobs: ``JOB_COMPLETION_INDEX``, counted by ``JOB_COMPLETIONS``, which
   Kubernetes does not set: the Job's manifest sets it to its ``completions``.
3. torchrun and accelerate: ``RANK`` of ``WORLD_SIZE``.
"""

from __future__ import annotations

from collections.abc import Mapping

from moot.core.errors import ConfigError

#: The variable of each scheduler that names this process's index, in order of precedence.
INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX", "RANK")


def scheduler_shard(environ: Mapping[str, str]) -> tuple[int, int]:
    """This process's shard index and count, from its scheduler's variables in `environ`.

    Raises:
        ConfigError: No scheduler's index is set, or a variable is missing, not an integer or
            out of range (one line naming it).
    """
    if "SLURM_ARRAY_TASK_ID" in environ:
        return _slurm_shard(environ)
    if "JOB_COMPLETION_INDEX" in environ:
        return _checked(environ, "JOB_COMPLETION_INDEX", "JOB_COMPLETIONS")
    if "RANK" in environ:
        return _checked(environ, "RANK", "WORLD_SIZE")
    names = ", ".join(INDEX_VARIABLES)
    raise ConfigError(f"--shard auto: no scheduler's shard in the environment ({names})")


def _slurm_shard(environ: Mapping[str, str]) -> tuple[int, int]:
    """A SLURM array task's shard: its place in the array's evenly stepped range of ids."""
    task = _integer(environ, "SLURM_ARRAY_TASK_ID")
    low = _integer(environ, "SLURM_ARRAY_TASK_MIN", default=0)
    step = _integer(environ, "SLURM_ARRAY_TASK_STEP", default=1)
    if step < 1:
        raise ConfigError(f"--shard auto: SLURM_ARRAY_TASK_STEP is {step}, not a positive step")
    count = None
    if "SLURM_ARRAY_TASK_MAX" in environ:
        count = (_integer(environ, "SLURM_ARRAY_TASK_MAX") - low) // step + 1
    if "SLURM_ARRAY_TASK_COUNT" in environ:
        given = _integer(environ, "SLURM_ARRAY_TASK_COUNT")
        if count is not None and given != count:  # a list (--array=1,3,7) is not a range
            raise ConfigError(
                f"--shard auto: SLURM_ARRAY_TASK_COUNT is {given}, but MIN..MAX by STEP holds "
                f"{count} tasks: the array is not an evenly stepped range (--array=A-B or "
                "A-B:S); give --shard I/N"
            )
        count = given
    if count is None:
        raise ConfigError(
            "--shard auto: SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor "
            "SLURM_ARRAY_TASK_MAX"
        )
    if (task - low) % step:
        raise ConfigError(
            f"--shard auto: SLURM_ARRAY_TASK_ID {task} is not SLURM_ARRAY_TASK_MIN {low} plus a "
            f"multiple of SLURM_ARRAY_TASK_STEP {step}"
        )
    return _in_range("SLURM_ARRAY_TASK_ID", (task - low) // step, count)


def _checked(environ: Mapping[str, str], index: str, count: str) -> tuple[int, int]:
    """The shard named by the variables `index` and `count`, both required."""
    if count not in environ:
        raise ConfigError(f"--shard auto: {index} is set but not {count}")
    return _in_range(index, _integer(environ, index), _integer(environ, count))


def _in_range(variable: str, index: int, count: int) -> tuple[int, int]:
    if count < 1 or not 0 <= index < count:
        raise ConfigError(
            f"--shard auto: {variable} gives shard {index} of {count}; need 0 <= index < count"
        )
    return index, count


def _integer(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    """The integer in variable `name` (`default` when unset and a default is given)."""
    text = environ.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text or "")
    except ValueError:
        raise ConfigError(f"--shard auto: {name}={text!r} is not an integer") from None
