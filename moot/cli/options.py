"""Every shared flag of the CLI, declared once, in groups commands compose.

A command adds the groups it needs (`model_option`, `call_options`, `run_options`, ...) and its
own flags. A flag a command cannot run without is declared with `required=True` here, not in
argparse: it may also come from ``--config``, so it is checked after the config is applied
(`moot.cli.runtime.check_required`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

DEFAULT_MODEL = "local/smollm2"


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    return _at_least(text, 1, "a positive integer")


def non_negative(text: str) -> int:
    """An argparse type: an integer of at least 0."""
    return _at_least(text, 0, "an integer of 0 or more")


def _at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def usd(text: str) -> float:
    """An argparse type: a positive, finite amount of US dollars."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a positive amount of USD, got {text}")
    return value


def sampling_temperature(text: str) -> float:
    """An argparse type: a sampling temperature, finite and from 0 to 2 (what the APIs accept)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 2:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 2, got {text}")
    return value


def device(text: str) -> str:
    """An argparse type: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``."""
    from moot.core.errors import ConfigError
    from moot.core.llm.devices import check_device

    try:
        return check_device(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def input_file(text: str) -> Path:
    """An argparse type: an input file; `moot.cli.runtime.check_paths` checks it exists."""
    return Path(text)


def input_folder(text: str) -> Path:
    """An argparse type: an input folder; `moot.cli.runtime.check_paths` checks it exists."""
    return Path(text)


def input_path(text: str) -> Path:
    """An argparse type: an input file or folder; `moot.cli.runtime.check_paths` checks it."""
    return Path(text)


def input_source(text: str) -> str:
    """An argparse type: an input file or folder, or what else its reader takes; it checks it.

    A hub dataset or model name, a shard ``--allow-partial`` skips, a missing run folder are
    the reader's to refuse. Where it names a local path, no output of the command may overlap it
    (`moot.cli.runtime.check_paths`).
    """
    return text


def output_path(text: str) -> Path:
    """An argparse type: a path moot writes; `moot.cli.runtime.check_paths` checks its names."""
    return Path(text)


def output_file(text: str) -> Path:
    """An argparse type: a file moot writes, ``--out FILE`` (checked likewise)."""
    return Path(text)


#: The kind of an `input_source`: checked by its reader, not for existence.
SOURCE = "source"

#: What each path type expects: the kind of input, or None for an output.
PATH_KINDS = {
    input_file: "file",
    input_folder: "folder",
    input_path: "file or folder",
    input_source: SOURCE,
    output_path: None,
    output_file: None,
}


def names(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated names."""
    found = tuple(name.strip() for name in text.split(",") if name.strip())
    if not found:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return found


def weights(text: str) -> dict[str, float]:
    """An argparse type: ``NAME=WEIGHT,...`` with weights of 0 or more."""
    found = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            weight = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT, got {part!r}") from None
        if not name.strip() or not weight >= 0:
            raise argparse.ArgumentTypeError(f"expected NAME=WEIGHT with WEIGHT >= 0, got {part!r}")
        found[name.strip()] = weight
    return found


def non_blank(text: str) -> str:
    """An argparse type: a name that is not blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must be a non-blank name")
    return text


class Endpoints(argparse.Action):
    """``--api-base``: a list of endpoints; each use adds one, or several separated by commas.

    Given on the command line, it replaces the list from ``--config`` instead of adding to it.
    The URLs are checked where the model spec is made (`moot.core.llm.spec.endpoint_list`).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        """Add this use's value to the list (the first use on the command line starts one)."""
        current = getattr(namespace, self.dest, None)
        given = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, [*given, str(values)])


def endpoint_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    help: str | None = None,
    dest: str | None = None,
) -> None:
    """An endpoint flag (``--api-base``, ``--api-base-a`` ...): repeatable, commas allowed."""
    parser.add_argument(
        flag,
        action=Endpoints,
        metavar="URL",
        help=help,
        **({"dest": dest} if dest else {}),
    )


def required(parser: argparse.ArgumentParser, *dests: str) -> None:
    """Mark flags the command needs, on the command line or in ``--config``."""
    marked = parser.get_default("required_flags") or ()
    parser.set_defaults(required_flags=(*marked, *dests))


def out_option(
    parser: argparse.ArgumentParser,
    what: str = "output folder",
    metavar: str = "DIR",
    default: str | None = None,
    resolve: Callable[[argparse.Namespace], Path] | None = None,
    progress: bool = False,
) -> None:
    """``--out``: where the command writes; required unless `default` says what it defaults to.

    An output folder (`metavar` ``DIR``) belongs to the command and one run holds it at a time
    (`moot.cli.runtime.own_out`).

    Args:
        parser: The command's parser.
        what: What it is, for the help.
        metavar: ``DIR`` for a folder, ``FILE`` for a file.
        default: What it defaults to, for the help (None: required).
        resolve: The default output for the parsed command line (resolved before any check,
            `moot.cli.runtime.execute`); it may refuse the command line (`ConfigError`).
        progress: The command keeps its progress log beside an ``--out FILE``
            (`moot.core.data.records.progress_log`).
    """
    shown = f"default: {default}" if default else "required"
    kind = output_file if metavar == "FILE" else output_path
    parser.add_argument("--out", type=kind, metavar=metavar, help=f"{what} ({shown})")
    parser.set_defaults(out_folder=metavar == "DIR", out_default=resolve, out_progress=progress)
    if default is None:
        required(parser, "out")


def common_options(parser: argparse.ArgumentParser, config: bool = True) -> None:
    """``--config``, ``--quiet``, ``--verbose`` and ``--debug``: every command has them.

    Args:
        parser: The command's parser.
        config: Add ``--config`` (`moot train sft` has a config file of its own).
    """
    group = parser.add_argument_group("output")
    if config:
        group.add_argument(
            "--config",
            type=input_file,
            metavar="FILE",
            help="YAML file of option values (keys = flags)",
        )
    group.add_argument("--quiet", action="store_true", help="print nothing but errors")
    group.add_argument(
        "--verbose", action="store_true", help="log each retried model call on stderr, and why"
    )
    group.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks"
    )


def dry_run_option(parser: argparse.ArgumentParser) -> None:
    """``--dry-run``: print the plan (items, calls, tokens, cost) and exit; call and write nothing.

    Added by `moot.cli.registry.Commands.add` to every command that declares a plan.
    """
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print what a run would do (items, model calls, estimated tokens and cost) and "
        "exit 0: no request, nothing written; inputs are still checked",
    )


def run_options(parser: argparse.ArgumentParser, concurrency: int, unit: str) -> None:
    """What every model-calling command shares: concurrency, a limit, the cache, and output.

    Args:
        parser: The command's parser.
        concurrency: Its default ``--concurrency``.
        unit: What one item is, for the help text (``debates``, ``questions``).
    """
    group = parser.add_argument_group("run")
    group.add_argument(
        "--concurrency",
        type=positive,
        default=concurrency,
        metavar="N",
        help=f"{unit} in flight at once (default {concurrency})",
    )
    limit_option(group, unit)
    group.add_argument(
        "--cache",
        type=output_path,
        metavar="FILE",
        help="request cache file (default $MOOT_CACHE_DIR)",
    )
    group.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    common_options(parser)


def limit_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, unit: str) -> None:
    """``--limit N``: only the first N items (a rerun without it does the rest)."""
    parser.add_argument(
        "--limit", type=positive, metavar="N", help=f"only the first N {unit} (default: all)"
    )


def model_options(
    parser: argparse.ArgumentParser,
    *,
    what: str,
    concurrency: int,
    unit: str,
    flag: str = "--model",
    default: str | None = DEFAULT_MODEL,
    note: str = "",
    temperature: float | None = 0.0,
    max_tokens: int | None = None,
    constrained: str | None = None,
) -> None:
    """Everything a model-calling command shares: its model, how it is called, how it runs.

    Args:
        parser: The command's parser.
        what: What the model is, for the help (``judge model``).
        concurrency: The default ``--concurrency``.
        unit: What one item is, plural (``debates``), for the help.
        flag: The model's flag: ``--model``, ``--judge``, ``--detector``.
        default: The default model (None: required).
        note: A note for the model's help (``the paper used GPT-4``).
        temperature: The default ``--temperature``; None sends none (the model's own default).
        max_tokens: The default ``--max-tokens``, if the command has one.
        constrained: What ``--constrained`` asks for, if the command asks for JSON.
    """
    model_option(parser, flag, what=what, default=default, note=note)
    if max_tokens is not None:
        max_tokens_option(parser, max_tokens)
    call_options(parser, temperature)
    if constrained is not None:
        constrained_option(parser, constrained)
    cost_options(parser)
    run_options(parser, concurrency, unit)


def model_option(
    parser: argparse.ArgumentParser,
    flag: str = "--model",
    *,
    what: str = "model",
    default: str | None = DEFAULT_MODEL,
    note: str = "",
) -> None:
    """The model spec of a command's one model role, as ``--model``, ``--judge`` or ``--detector``.

    Its value is always ``args.model``.
    """
    shown = f"default {default}" if default else "required"
    parser.add_argument(
        flag,
        dest="model",
        default=default,
        metavar="SPEC",
        help=f"{what} ({shown}{'; ' + note if note else ''})",
    )
    if default is None:
        required(parser, "model")


def call_options(parser: argparse.ArgumentParser, temperature: float | None = 0.0) -> None:
    """How a command's model is called: endpoint, key, sampling, timeouts, retries, window.

    A `temperature` of None sends none, so the model's own default applies.
    """
    group = parser.add_argument_group("model calls")
    endpoint_option(
        group,
        "--api-base",
        "OpenAI-compatible server of the model; several (replicas of one model: repeat the "
        "flag or separate URLs by commas) share the requests, each debate on one",
    )
    group.add_argument(
        "--router",
        type=input_file,
        metavar="FILE",
        help="litellm Router config (YAML: model_list, routing_strategy, ...) whose model_name "
        "is the model spec, instead of --api-base (docs/scaling.md)",
    )
    group.add_argument(
        "--endpoint-cooldown",
        type=seconds,
        metavar="S",
        help="seconds one of several endpoints stays out once it failed --endpoint-max-fails "
        "times (default 30)",
    )
    group.add_argument(
        "--endpoint-max-fails",
        type=positive,
        metavar="N",
        help="failures, each within --endpoint-cooldown of the one before, that take one of "
        "several endpoints out (default 2)",
    )
    group.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the key")
    shown = "none sent: the model's own" if temperature is None else f"{temperature:g}"
    group.add_argument(
        "--temperature",
        type=sampling_temperature,
        default=temperature,
        help=f"sampling temperature (default {shown})",
    )
    group.add_argument("--seed", type=int, default=0, help="base sampling seed (default 0)")
    group.add_argument(
        "--timeout",
        type=seconds,
        metavar="S",
        help="deadline of each request, connect to last byte, before it is retried "
        "(default 120; 600 for local/*)",
    )
    group.add_argument(
        "--max-retries", type=int, default=5, metavar="N", help="retries per call (default 5)"
    )
    group.add_argument(
        "--max-concurrency",
        type=positive,
        metavar="N",
        help="requests in flight per model and endpoint (default: no bound but --concurrency)",
    )
    group.add_argument(
        "--context-window", type=positive, metavar="TOKENS", help="the model's context window"
    )
    local_options(group)


def local_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, dtype: str = "auto"
) -> None:
    """``--device`` and ``--dtype``: where a model run in process (``hf/<path>``) runs, and how.

    Args:
        parser: The command's parser or group.
        dtype: The default ``--dtype`` (``float32`` for the P.D. scorer).
    """
    from moot.core.llm.devices import DTYPES

    parser.add_argument(
        "--device",
        type=device,
        metavar="DEVICE",
        help="where a local model folder runs: auto (default: CUDA if present, else the CPU; "
        "MPS only when asked), cpu, cuda, cuda:N, mps",
    )
    shown = "bfloat16 on a GPU, else float32" if dtype == "auto" else dtype
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None if dtype == "auto" else dtype,
        help=f"precision of a local model folder's weights (default: {shown})",
    )


def batch_options(parser: argparse.ArgumentParser, default: int, unit: str) -> None:
    """``--batch-size N`` and ``--backend``: how a model run in process batches its work.

    Args:
        parser: The command's parser.
        default: The default ``--batch-size``.
        unit: What one batch row is, for the help (``greedy requests``).
    """
    group = parser.add_argument_group("local model batching")
    group.add_argument(
        "--batch-size",
        type=positive,
        default=default,
        metavar="N",
        help=f"{unit} per forward pass of a local model (default {default})",
    )
    group.add_argument(
        "--backend",
        choices=("transformers", "vllm"),
        default="transformers",
        help="engine of a local model: transformers (default), or vllm (the moot[vllm] extra "
        "and a CUDA GPU; it batches on its own)",
    )


#: Flags whose ``--config`` value may also be a mapping, inline, instead of a file's path.
INLINE_MAPPINGS = ("prices",)


def cost_options(parser: argparse.ArgumentParser) -> None:
    """``--prices FILE`` and ``--budget USD``: what calls cost and the most a run may spend."""
    group = parser.add_argument_group("cost")
    group.add_argument(
        "--prices",
        type=input_file,
        metavar="FILE",
        help="model prices in USD per million tokens, over litellm's cost map (JSON or YAML: "
        '{"openai/my-model": {"input": 0.2, "output": 0.6, "cached_input": 0.1}}); in '
        "--config also inline",
    )
    group.add_argument(
        "--budget",
        type=usd,
        metavar="USD",
        help="stop before the run could spend more than USD (exit 3; a rerun goes on)",
    )


def debater_options(parser: argparse.ArgumentParser) -> None:
    """Per-debater overrides of `moot debate`: ``--model-a``, ``--api-base-b``, ..."""
    group = parser.add_argument_group("debaters (default: --model, --api-base, --temperature)")
    for role in ("a", "b"):
        group.add_argument(f"--model-{role}", metavar="SPEC", help=f"debater {role.upper()}")
        endpoint_option(group, f"--api-base-{role}")
        group.add_argument(f"--temperature-{role}", type=sampling_temperature, metavar="T")


def agent_options(parser: argparse.ArgumentParser, note: str = "") -> None:
    """``--agent-model``, ``--agent-api-base``, ``--agent-temperature``: a second model role.

    Read with `moot.cli.runtime.debater_role` and the suffix ``agent`` (like the debaters').
    """
    group = parser.add_argument_group("agent (default: --model, --api-base, --temperature)")
    group.add_argument(
        "--agent-model", dest="model_agent", metavar="SPEC", help=f"agent model{note}"
    )
    endpoint_option(group, "--agent-api-base", dest="api_base_agent")
    group.add_argument(
        "--agent-temperature", dest="temperature_agent", type=sampling_temperature, metavar="T"
    )


def max_tokens_option(parser: argparse.ArgumentParser, default: int) -> None:
    """``--max-tokens``: the completion budget per call."""
    parser.add_argument(
        "--max-tokens",
        type=positive,
        default=default,
        metavar="N",
        help=f"completion budget per call (default {default})",
    )


def constrained_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--constrained/--no-constrained``: send a JSON schema as ``response_format``."""
    parser.add_argument(
        "--constrained",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"ask for schema-constrained {what} (default: on for local/smollm2)",
    )


def retrieval_options(parser: argparse.ArgumentParser) -> None:
    """The flags that choose a search tool (`moot retrieve`, `moot answer`)."""
    group = parser.add_argument_group("retrieval")
    group.add_argument("--index", type=input_folder, metavar="DIR", help="index from moot index")
    group.add_argument("--retriever", choices=("bm25", "dense", "hybrid"), default="bm25")
    group.add_argument(
        "--embedder", metavar="MODEL", help="dense/hybrid query embedder (default: the index's)"
    )
    group.add_argument("--mmr", type=float, metavar="LAMBDA", help="MMR re-ranking, in [0, 1]")
    group.add_argument(
        "--trusted-domains", action="store_true", help="keep .edu .org .gov .info .pro URLs only"
    )
    group.add_argument("--web", action="store_true", help="Brave web search instead of --index")
    group.add_argument("--search-key-env", default="MOOT_SEARCH_API_KEY", metavar="VAR")
    group.add_argument("--search-api-base", metavar="URL", help="web search API root")


def hub_repo(text: str) -> str:
    """An argparse type: a Hugging Face Hub repository id, ``owner/name``."""
    from moot.core.errors import ConfigError
    from moot.core.hub.push import check_repo_id

    try:
        return check_repo_id(text)
    except ConfigError as exc:
        problem = str(exc).removeprefix(f"--push-to-hub {text!r}: ")
        raise argparse.ArgumentTypeError(problem) from None


def hub_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--push-to-hub REPO`` and ``--hub-private``: push the finished artifact with its card.

    The command pushes through `moot.cli.runtime.push`; `moot.cli.runtime.execute` checks the
    repository id, the token and ``HF_HUB_OFFLINE`` before any work.

    Args:
        parser: The command's parser.
        what: What is pushed, for the help (``dataset``, ``adapter or model``).
    """
    group = parser.add_argument_group("Hugging Face Hub")
    group.add_argument(
        "--push-to-hub",
        type=hub_repo,
        metavar="REPO",
        help=f"once the {what} is complete, push its folder with its card (README.md) to this "
        "Hub repository, owner/name (created if missing; token: HF_TOKEN or `hf auth login`)",
    )
    group.add_argument(
        "--hub-private",
        action="store_true",
        help="create the --push-to-hub repository private (an existing one keeps its visibility)",
    )
