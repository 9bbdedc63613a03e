"""Running the real `moot` command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.cli.forkserver import ForkedRun, fork_server_for

#: The token the scripted Hub wants (`tests.hub_server.ScriptedHub`).
TOKEN = "hf_scriptedHubToken0123456789"


def hub_env(hub: Any, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a moot process that pushes to `hub`, a `ScriptedHub`.

    huggingface_hub reads ``HF_ENDPOINT`` when it is imported, in the child; an empty ``HF_HOME``
    keeps any saved login out.
    """
    return moot_env(
        HF_ENDPOINT=hub.url,
        HF_TOKEN=TOKEN,
        HF_HOME=str(home / "hf-home"),
        HF_HUB_OFFLINE="0",
        HF_HUB_DISABLE_XET="0",  # the Hub's own answers keep uploads off Xet storage
        MOOT_CACHE_DIR=str(home / "moot-cache"),
        **extra,
    )


def local_files(folder: Path) -> dict[str, bytes]:
    """The files of `folder` a push sends: all but moot's own marks."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".moot" not in p.relative_to(folder).parts
    }


def assert_no_token(*texts: str | bytes) -> None:
    for text in texts:
        blob = text if isinstance(text, bytes) else text.encode()
        assert TOKEN.encode() not in blob


ARGUMENTS_REPLY = (
    '{"arguments": ["First argument number {n} holds.", "Second argument {n} holds."]}'
)


#: The marks of the tests that may start moot processes: the tiers `make test-fast` leaves out.
PROCESS_TIERS = ("subprocess", "slow", "embedded")
#: The running test's node id when it carries none of them (set by tests/conftest.py).
unmarked_test: str | None = None


def assert_process_tier() -> None:
    """Refuse to start a moot process in a test of the fast tier: such a test says so by a mark."""
    if unmarked_test is not None:
        raise AssertionError(
            f"{unmarked_test} starts a moot process: mark it `subprocess`"
            " (or test it in process, through moot's Python API)"
        )


def moot_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(extra)
    return env


def run_moot(
    *args: object,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    limits: dict[str, int] | None = None,
) -> subprocess.CompletedProcess:
    """`moot args` as a real process, forked from a server that has done its imports already.

    `limits` are its soft resource limits, as ``ulimit`` sets them (``{"RLIMIT_FSIZE": bytes}``:
    a write past that file size fails, ``File too large``, as on a full disk).
    """
    assert_process_tier()
    env = env or moot_env()
    return fork_server_for(env).run([str(a) for a in args], env, timeout, limits)


def run_fresh_moot(
    *args: object, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m moot args` in a fresh interpreter, start-up and all, as a shell runs it."""
    assert_process_tier()
    return subprocess.run(
        [sys.executable, "-m", "moot", *map(str, args)],
        capture_output=True,
        text=True,
        env=env or moot_env(),
        timeout=timeout,
    )


def popen_moot(*args: object, env: dict[str, str] | None = None) -> ForkedRun:
    """`moot args` started as `run_moot` starts it, used as `subprocess.Popen(..., text=True)`.

    Its SIGINT is the default (Ctrl-C raises KeyboardInterrupt), as at a terminal, even in a
    suite started in the background (`make test &`), whose children inherit an ignored SIGINT.
    """
    assert_process_tier()
    env = env or moot_env()
    return fork_server_for(env).start([str(a) for a in args], env)


def stdout(result: Any) -> str:
    """What the command line prints of a `moot.Result` on standard output (`moot.result.show`):
    its lines (a dry run: its plan), then its summary table."""
    return "\n".join([*result.lines, *(["", result.summary] if result.summary else [])])


def stderr(result: Any) -> str:
    """What the command line says of a `moot.Result` on standard error: notes, then failures."""
    return "\n".join([*result.notes, *result.messages])


def refused_in_one_line(error: Exception) -> str:
    """What the command line prints after ``moot: error: `` for `error`: one line, exit 2."""
    from moot.core.errors import MootError

    assert isinstance(error, MootError), repr(error)  # exit 2
    assert "\n" not in str(error), str(error)
    return str(error)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels of the PNG at `path`, from its header (fails on a non-PNG)."""
    head = Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", f"{path}: not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def command_parsers() -> dict[tuple[str, ...], Any]:
    """Every command of moot's parser tree (``("eval", "quality")``), with its parser."""
    from moot.cli.main import build_parser

    def leaves(parser: Any, words: tuple[str, ...] = ()) -> Any:
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, sub in action.choices.items():
                    if name in action._name_parser_map and sub.prog.endswith(name):  # no alias
                        yield from leaves(sub, (*words, name))
                return
        yield words, parser

    return dict(leaves(build_parser()))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_topics(path: Path, topics: list[str]) -> Path:
    path.write_text(json.dumps(topics), encoding="utf-8")
    return path


BP_LONG = {
    "OG": "Opening_Government_(OG)",
    "OO": "Opening_Opposition_(OO)",
    "CG": "Closing_Government_(CG)",
    "CO": "Closing_Opposition_(CO)",
}


def write_bp_competition(folder: Path, gold: dict[int, str]) -> None:
    """A BP-Competition folder in PanelBench's released layout, one debate per gold row."""
    order = ["OG", "OO", "OG", "OO", "CG", "CO", "CG", "CO"]  # paper, Appendix B.3
    for sub in ("motion", "speech", "gold"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for number in gold:
        motion = {
            "motion": f"This House would explore space ({number})",
            "pro_speakers": [BP_LONG["OG"], BP_LONG["CG"]],
            "con_speakers": [BP_LONG["OO"], BP_LONG["CO"]],
            "info_slide": "No information",
            "speech_order": [BP_LONG[t] for t in order],
        }
        speeches = [
            {"speaker_name": BP_LONG[t], "content": f"Speech {i + 1} by {t}."}
            for i, t in enumerate(order)
        ]
        (folder / "motion" / f"bp_{number:03d}.yml").write_text(json.dumps(motion))
        (folder / "speech" / f"bp_{number:03d}.yml").write_text(json.dumps(speeches))
    rows = [
        f'{number},"{label}"' if "," in label else f"{number},{label}"
        for number, label in gold.items()
    ]
    (folder / "gold" / "gold.csv").write_text("bp_id,label\n" + "\n".join(rows) + "\n")
