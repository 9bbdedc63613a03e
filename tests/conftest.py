"""Test-wide setup: offline, isolated caches, no network beyond loopback."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import helpers
from tests.netguard import guard_loopback

# the `scripted_server` fixture: moot's tests use the one its users get (docs/testing.md)
pytest_plugins = ["moot.testing.pytest_plugin"]

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("OMP_NUM_THREADS", "1")
for _key in ("OPENAI_API_KEY", "MOOT_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

guard_loopback("tests")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOOT_CACHE_DIR", str(tmp_path / "moot-cache"))


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test when it is absent (users' clones)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared/data ({path} not found)")
    return path


#: Bare git mirrors of the papers' repositories (``<owner>+<name>/repo``) beside the checkout, as
#: ../shared is, or where MOOT_RELEASE_MIRRORS says: released files ../shared/data does not hold.
MIRRORS = Path(
    os.environ.get("MOOT_RELEASE_MIRRORS", Path(__file__).resolve().parents[1].parent / ".mirror")
)


def released_files(tmp: Path, repo: str, folder: str) -> Path:
    """The files under `folder` of a paper's released repository, written below `tmp`.

    They are read from a local bare mirror of the repository
    (``$MOOT_RELEASE_MIRRORS/<owner>+<name>/repo``, by default ``../.mirror``), never
    downloaded; the test is skipped when the mirror or the folder is absent.
    """
    import subprocess

    git_dir = MIRRORS / repo.replace("/", "+") / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"needs a mirror of {repo} ({git_dir} not found; set MOOT_RELEASE_MIRRORS)")
    git = ["git", f"--git-dir={git_dir}"]
    listed = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "HEAD", folder],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not listed:
        pytest.skip(f"{repo} has no {folder}")
    for name in listed:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True, check=True).stdout
        )
    return tmp / folder


def built_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]
) -> object:
    """`build(folder)` once per test session, however many xdist workers ask for it.

    A module-scoped fixture is built by every worker that runs one of the module's tests (three
    times under `make test`); an expensive one built here is made by the first worker that asks,
    in a folder all workers share, and the others wait for it and read its result. The result
    must pickle, and the tests must only read what it made.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # this session's, shared by its workers
    done, folder = root / f"{name}.pickle", root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker's build that failed
            folder.mkdir()
            done.write_bytes(pickle.dumps(build(folder)))
        return pickle.loads(done.read_bytes())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Let only the tests marked for a process tier start moot processes (`make test-fast`).

    Set before the item's fixtures, so a module-scoped fixture's runs are checked too.
    """
    marked = any(any(item.iter_markers(name)) for name in helpers.PROCESS_TIERS)
    helpers.unmarked_test = None if marked else item.nodeid


def _slow(item: pytest.Item) -> bool:
    return any(item.iter_markers("slow")) or any(item.iter_markers("embedded"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the slow tests (marked `slow` or `embedded`) first, spread over the xdist workers.

    The suite's wall time is set by the worker that finishes last. In collection order the
    embedded-model and training tests (tests/cli/test_embedded.py, tests/cli/test_train.py,
    tests/training/) came last, each up to minutes long, while the other workers sat idle.
    `--dist worksteal` (the Makefile's) gives worker k the k-th contiguous share of this list and
    later moves tests from the ends of the longest queues, so the slow tests are dealt to the
    heads of the shares: each worker starts on its own slow tests and the short ones fill in.
    Every worker computes the same order, as xdist requires; modules stay together otherwise.
    """
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    slow = [item for item in items if _slow(item)]
    if not slow:
        return
    rest = [item for item in items if not _slow(item)]
    ordered: list[pytest.Item] = []
    for worker in range(workers):
        share = (len(items) - len(ordered)) // (workers - worker)  # as worksteal splits
        heads = slow[worker::workers]
        ordered += heads
        taken = max(0, share - len(heads))
        ordered += rest[:taken]
        del rest[:taken]
    items[:] = ordered + rest
