"""Every shared setting of the CLI, declared once, as settings mixins commands compose.

A command's settings (`moot.cli.settings.Settings`) inherit the mixins they need
(`CommonSettings`, `model_settings(...)`, `hub_settings(...)`, ...) and declare their own; the
flags are derived from them. A setting a command cannot run without has no default: it may also
come from ``--config``, so it is checked after the config is applied
(`moot.cli.runtime.check_required`). Here too are the parse functions (argparse types) settings
name, and the path kinds `moot.cli.runtime.check_paths` reads from them.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import create_model

from moot.cli.settings import Settings, flag

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
    return _seconds(text, zero=False)


def seconds_or_zero(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    return _seconds(text, zero=True)


def _seconds(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    high_enough = value >= 0 if zero else value > 0  # nan is neither
    if not (high_enough and value < float("inf")):
        what = "a number of seconds, 0 or more" if zero else "a positive number of seconds"
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
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


def hub_repo(text: str) -> str:
    """An argparse type: a Hugging Face Hub repository id, ``owner/name``."""
    from moot.core.errors import ConfigError
    from moot.core.hub.push import check_repo_id

    try:
        return check_repo_id(text)
    except ConfigError as exc:
        problem = str(exc).removeprefix(f"--push-to-hub {text!r}: ")
        raise argparse.ArgumentTypeError(problem) from None


#: Flags whose ``--config`` value may also be a mapping, inline, instead of a file's path.
INLINE_MAPPINGS = ("prices",)


# The shared settings. Each is declared once, here, as a field (`flag`) or a mixin a command's
# settings inherit from (`moot.cli.settings`); a parameterised one is made by a function (cached:
# the same parameters give the same class).


def single(name: str, annotation: Any, info: Any) -> type[Settings]:
    """A mixin of one setting, `name`, of type `annotation`, declared by `info` (a `flag`)."""
    return create_model(f"{name.title()}Setting", __base__=Settings, **{name: (annotation, info)})


def combined(name: str, *bases: type[Settings]) -> type[Settings]:
    """A mixin `name` of all the settings of `bases`, in their order."""
    return create_model(name, __base__=bases)


def endpoint_flag(help: str | None = None, flags: tuple[str, ...] = (), group: str = "") -> Any:
    """An endpoint setting (``--api-base``, ``--api-base-a`` ...): repeatable, commas allowed."""
    return flag(None, action=Endpoints, metavar="URL", help=help, flags=flags, group=group or None)


def out_flag(
    what: str = "output folder",
    metavar: str = "DIR",
    default: str | None = None,
    resolve: Callable[[argparse.Namespace], Path] | None = None,
    progress: bool = False,
    holds_runs: bool = False,
) -> Any:
    """``--out``: where the command writes; required unless `default` says what it defaults to.

    An output folder (`metavar` ``DIR``) belongs to the command and one run holds it at a time
    (`moot.cli.runtime.own_out`).

    Args:
        what: What it is, for the help.
        metavar: ``DIR`` for a folder, ``FILE`` for a file.
        default: What it defaults to, for the help (None: required).
        resolve: The default output for the parsed command line (resolved before any check,
            `moot.cli.runtime.execute`); it may refuse the command line (`ConfigError`).
        progress: The command keeps its progress log beside an ``--out FILE``
            (`moot.core.data.records.progress_log`).
        holds_runs: The folder holds other commands' run folders (`moot run`'s stages).
    """
    shown = f"default: {default}" if default else "required"
    facts = {"out_folder": metavar == "DIR", "out_default": resolve, "out_progress": progress}
    if holds_runs:
        facts["holds_runs"] = True
    how = {
        "parse": output_file if metavar == "FILE" else output_path,
        "metavar": metavar,
        "help": f"{what} ({shown})",
        "parser": facts,
    }
    return flag(**how) if default is None else flag(None, **how)


class OutputSettings(Settings):
    """``--quiet``, ``--verbose`` and ``--debug``: every command has them."""

    quiet: bool = flag(False, action="store_true", group="output", help="print nothing but errors")
    verbose: bool = flag(
        False,
        action="store_true",
        group="output",
        help="log each retried model call on stderr, and why",
    )
    debug: bool = flag(
        False, action="store_true", suppress=True, group="output", help="show tracebacks"
    )


class CommonSettings(OutputSettings):
    """``--config`` too: what every command has but `moot train sft` (its config is its own)."""

    config: Path | None = flag(
        None,
        parse=input_file,
        metavar="FILE",
        group="output",
        help="YAML file of option values (keys = flags)",
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


def limit_flag(unit: str, group: str | None = None) -> Any:
    """``--limit N``: only the first N items (a rerun without it does the rest)."""
    return flag(
        None,
        parse=positive,
        metavar="N",
        group=group,
        help=f"only the first N {unit} (default: all)",
    )


@functools.cache
def run_settings(concurrency: int, unit: str) -> type[Settings]:
    """What every model-calling command shares: concurrency, a limit, the cache, and output.

    Args:
        concurrency: Its default ``--concurrency``.
        unit: What one item is, for the help text (``debates``, ``questions``).
    """
    in_flight = flag(
        concurrency,
        parse=positive,
        metavar="N",
        group="run",
        help=f"{unit} in flight at once (default {concurrency})",
    )

    class RunSettings(CommonSettings):
        concurrency: int = in_flight
        limit: int | None = limit_flag(unit, "run")
        cache: Path | None = flag(
            None,
            parse=output_path,
            metavar="FILE",
            group="run",
            help="request cache file (default $MOOT_CACHE_DIR)",
        )
        no_cache: bool = flag(
            False, action="store_true", group="run", help="do not read or write the cache"
        )
        progress_every: float = flag(
            60.0,
            parse=seconds_or_zero,
            metavar="S",
            group="run",
            help="off a terminal: a progress line on stderr every S seconds (default 60; 0: one "
            "at the end of each stage)",
        )
        batch: bool = flag(
            False,
            action="store_true",
            group="batch",
            help="ask through the provider's batch API: about half the price, answered within "
            f"24 h; every one of the {unit} in flight, one batch per step (docs/cli.md)",
        )
        no_wait: bool = flag(
            False,
            action="store_true",
            group="batch",
            help="with --batch: submit, then exit 0; collect with moot collect OUT or the same "
            "command again",
        )
        batch_fallback: str = flag(
            "batch",
            choices=("batch", "live"),
            group="batch",
            help="a request a batch failed or left unanswered is asked again: in the next batch "
            "(default) or live",
        )
        batch_poll: float = flag(
            30.0,
            parse=seconds,
            metavar="S",
            group="batch",
            help="seconds between two looks at a submitted batch (default 30)",
        )

    return RunSettings


def model_flag(
    flag_name: str = "--model",
    *,
    what: str = "model",
    default: str | None = DEFAULT_MODEL,
    note: str = "",
) -> Any:
    """The model spec of a command's one model role, as ``--model``, ``--judge`` or ``--detector``.

    Its setting is always ``model``.
    """
    shown = f"default {default}" if default else "required"
    how = {
        "flags": (flag_name,),
        "metavar": "SPEC",
        "help": f"{what} ({shown}{'; ' + note if note else ''})",
    }
    return flag(**how) if default is None else flag(default, **how)


@functools.cache
def model_settings(
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
) -> type[Settings]:
    """Everything a model-calling command shares: its model, how it is called, how it runs.

    Args:
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
    model = model_flag(flag, what=what, default=default, note=note)
    parts = [single("model", str, model)]
    if max_tokens is not None:
        parts.append(max_tokens_settings(max_tokens))
    parts += [call_settings(temperature), PromptSettings]
    if constrained is not None:
        parts.append(constrained_settings(constrained))
    parts += [CostSettings, run_settings(concurrency, unit)]
    return combined("ModelSettings", *parts)


@functools.cache
def call_settings(temperature: float | None = 0.0) -> type[Settings]:
    """How a command's model is called: endpoint, key, sampling, timeouts, retries, window.

    A `temperature` of None sends none, so the model's own default applies.
    """
    shown = "none sent: the model's own" if temperature is None else f"{temperature:g}"
    calls = "model calls"
    sampling = flag(
        temperature,
        parse=sampling_temperature,
        group=calls,
        help=f"sampling temperature (default {shown})",
    )

    class CallSettings(local_settings("auto", calls)):  # type: ignore[misc]
        api_base: list[str] | None = endpoint_flag(
            "OpenAI-compatible server of the model; several (replicas of one model: repeat the "
            "flag or separate URLs by commas) share the requests, each debate on one",
            group=calls,
        )
        router: Path | None = flag(
            None,
            parse=input_file,
            metavar="FILE",
            group=calls,
            help="litellm Router config (YAML: model_list, routing_strategy, ...) whose "
            "model_name is the model spec, instead of --api-base (docs/scaling.md)",
        )
        endpoint_cooldown: float | None = flag(
            None,
            parse=seconds,
            metavar="S",
            group=calls,
            help="seconds one of several endpoints stays out once it failed "
            "--endpoint-max-fails times (default 30)",
        )
        endpoint_max_fails: int | None = flag(
            None,
            parse=positive,
            metavar="N",
            group=calls,
            help="failures, each within --endpoint-cooldown of the one before, that take one of "
            "several endpoints out (default 2)",
        )
        api_key_env: str | None = flag(
            None, metavar="VAR", group=calls, help="environment variable holding the key"
        )
        temperature: float | None = sampling
        seed: int = flag(0, parse=int, group=calls, help="base sampling seed (default 0)")
        timeout: float | None = flag(
            None,
            parse=seconds,
            metavar="S",
            group=calls,
            help="deadline of each request, connect to last byte, before it is retried "
            "(default 120; 600 for local/*)",
        )
        max_retries: int = flag(
            5, parse=int, metavar="N", group=calls, help="retries per call (default 5)"
        )
        max_concurrency: int | None = flag(
            None,
            parse=positive,
            metavar="N",
            group=calls,
            help="requests in flight per model and endpoint (default: no bound but --concurrency)",
        )
        rpm: int | None = flag(
            None,
            parse=positive,
            metavar="N",
            group=calls,
            help="requests per minute per model at most (default: the provider's headers' limit)",
        )
        tpm: int | None = flag(
            None,
            parse=positive,
            metavar="N",
            group=calls,
            help="tokens per minute per model at most, prompt plus max_tokens (default: likewise)",
        )
        context_window: int | None = flag(
            None, parse=positive, metavar="TOKENS", group=calls, help="the model's context window"
        )

    return CallSettings


@functools.cache
def local_settings(dtype: str = "auto", group: str | None = None) -> type[Settings]:
    """``--device`` and ``--dtype``: where a model run in process (``hf/<path>``) runs, and how.

    Args:
        dtype: The default ``--dtype`` (``float32`` for the P.D. scorer).
        group: Their argument group's title.
    """
    from moot.core.llm.devices import DTYPES

    shown = "bfloat16 on a GPU, else float32" if dtype == "auto" else dtype
    where = flag(
        None,
        parse=device,
        metavar="DEVICE",
        group=group,
        help="where a local model folder runs: auto (default: CUDA if present, else the CPU; "
        "MPS only when asked), cpu, cuda, cuda:N, mps",
    )
    precision = flag(
        None if dtype == "auto" else dtype,
        choices=DTYPES,
        group=group,
        help=f"precision of a local model folder's weights (default: {shown})",
    )

    class LocalSettings(Settings):
        device: str | None = where
        dtype: str | None = precision

    return LocalSettings


@functools.cache
def batch_settings(default: int, unit: str) -> type[Settings]:
    """``--batch-size N`` and ``--backend``: how a model run in process batches its work.

    Args:
        default: The default ``--batch-size``.
        unit: What one batch row is, for the help (``greedy requests``).
    """
    batching = "local model batching"

    per_pass = flag(
        default,
        parse=positive,
        metavar="N",
        group=batching,
        help=f"{unit} per forward pass of a local model (default {default})",
    )

    class BatchSettings(Settings):
        batch_size: int = per_pass
        backend: str = flag(
            "transformers",
            choices=("transformers", "vllm"),
            group=batching,
            help="engine of a local model: transformers (default), or vllm (the moot[vllm] "
            "extra and a CUDA GPU; it batches on its own)",
        )

    return BatchSettings


class PromptSettings(Settings):
    """``--prompts DIR``: the run's own templates over the built-ins (`moot.cli.prompts`)."""

    prompts: Path | None = flag(
        None,
        parse=input_folder,
        metavar="DIR",
        group="model calls",
        help="templates that replace the built-ins of the same path under prompts/ (start one "
        "with `moot templates export DIR`); a deviation from the paper (docs/faithfulness.md)",
    )


class CostSettings(Settings):
    """``--prices FILE`` and ``--budget USD``: what calls cost and the most a run may spend."""

    prices: Path | dict[str, Any] | None = flag(
        None,
        parse=input_file,
        metavar="FILE",
        group="cost",
        help="model prices in USD per million tokens, over litellm's cost map (JSON or YAML: "
        '{"openai/my-model": {"input": 0.2, "output": 0.6, "cached_input": 0.1}}); in '
        "--config also inline",
    )
    budget: float | None = flag(
        None,
        parse=usd,
        metavar="USD",
        group="cost",
        help="stop before the run could spend more than USD (exit 3; a rerun goes on)",
    )


_DEBATERS = "debaters (default: --model, --api-base, --temperature)"


class DebaterSettings(Settings):
    """Per-debater overrides of `moot debate`: ``--model-a``, ``--api-base-b``, ..."""

    model_a: str | None = flag(None, metavar="SPEC", group=_DEBATERS, help="debater A")
    api_base_a: list[str] | None = endpoint_flag(group=_DEBATERS)
    temperature_a: float | None = flag(
        None, parse=sampling_temperature, metavar="T", group=_DEBATERS
    )
    model_b: str | None = flag(None, metavar="SPEC", group=_DEBATERS, help="debater B")
    api_base_b: list[str] | None = endpoint_flag(group=_DEBATERS)
    temperature_b: float | None = flag(
        None, parse=sampling_temperature, metavar="T", group=_DEBATERS
    )


@functools.cache
def agent_settings(note: str = "") -> type[Settings]:
    """``--agent-model``, ``--agent-api-base``, ``--agent-temperature``: a second model role.

    Read with `moot.cli.runtime.debater_role` and the suffix ``agent`` (like the debaters').
    """
    agent = "agent (default: --model, --api-base, --temperature)"

    class AgentSettings(Settings):
        model_agent: str | None = flag(
            None, flags=("--agent-model",), metavar="SPEC", group=agent, help=f"agent model{note}"
        )
        api_base_agent: list[str] | None = endpoint_flag(flags=("--agent-api-base",), group=agent)
        temperature_agent: float | None = flag(
            None,
            flags=("--agent-temperature",),
            parse=sampling_temperature,
            metavar="T",
            group=agent,
        )

    return AgentSettings


@functools.cache
def max_tokens_settings(default: int) -> type[Settings]:
    """``--max-tokens``: the completion budget per call."""
    return single(
        "max_tokens",
        int,
        flag(
            default,
            parse=positive,
            metavar="N",
            help=f"completion budget per call (default {default})",
        ),
    )


@functools.cache
def constrained_settings(what: str) -> type[Settings]:
    """``--constrained/--no-constrained``: send a JSON schema as ``response_format``."""
    return single(
        "constrained",
        bool | None,
        flag(
            None,
            action=argparse.BooleanOptionalAction,
            help=f"ask for schema-constrained {what} (default: on for local/smollm2)",
        ),
    )


class RetrievalSettings(Settings):
    """The settings that choose a search tool (`moot retrieve`, `moot answer`)."""

    index: Path | None = flag(
        None, parse=input_folder, metavar="DIR", group="retrieval", help="index from moot index"
    )
    retriever: str = flag("bm25", choices=("bm25", "dense", "hybrid"), group="retrieval")
    embedder: str | None = flag(
        None,
        metavar="MODEL",
        group="retrieval",
        help="dense/hybrid query embedder (default: the index's)",
    )
    mmr: float | None = flag(
        None, parse=float, metavar="LAMBDA", group="retrieval", help="MMR re-ranking, in [0, 1]"
    )
    trusted_domains: bool = flag(
        False,
        action="store_true",
        group="retrieval",
        help="keep .edu .org .gov .info .pro URLs only",
    )
    web: bool = flag(
        False, action="store_true", group="retrieval", help="Brave web search instead of --index"
    )
    search_key_env: str = flag("MOOT_SEARCH_API_KEY", metavar="VAR", group="retrieval")
    search_api_base: str | None = flag(
        None, metavar="URL", group="retrieval", help="web search API root"
    )


@functools.cache
def hub_settings(what: str) -> type[Settings]:
    """``--push-to-hub REPO`` and ``--hub-private``: push the finished artifact with its card.

    The command pushes through `moot.cli.runtime.push`; `moot.cli.runtime.execute` checks the
    repository id, the token and ``HF_HUB_OFFLINE`` before any work.

    Args:
        what: What is pushed, for the help (``dataset``, ``adapter or model``).
    """
    hub = "Hugging Face Hub"

    class HubSettings(Settings):
        push_to_hub: str | None = flag(
            None,
            parse=hub_repo,
            metavar="REPO",
            group=hub,
            help=f"once the {what} is complete, push its folder with its card (README.md) to "
            "this Hub repository, owner/name (created if missing; token: HF_TOKEN or `hf auth "
            "login`)",
        )
        hub_private: bool = flag(
            False,
            action="store_true",
            group=hub,
            help="create the --push-to-hub repository private (an existing one keeps its "
            "visibility)",
        )

    return HubSettings
