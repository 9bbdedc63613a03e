"""Pushing a finished artifact folder, its card included, to a Hugging Face Hub repository.

Through ``huggingface_hub``: `HfApi.create_repo` (an existing repository is kept) and
`HfApi.upload_folder`, one commit of every file but moot's own marks (``.moot/``). The endpoint
is ``huggingface_hub``'s (``HF_ENDPOINT``, read when it is imported) and the token its own
(``HF_TOKEN``, else the one ``hf auth login`` saved); moot never reads, prints or writes the
token. `check_push` runs before any paid work; a push that fails raises `PushError` and leaves
the local folder as it was. After a push, ``.moot/hub.json`` records where the folder went, so
a model trained on it can name it in its card (`pushed_repo`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from moot.core.data.hub_requests import bound_hub_requests, hub_timeout
from moot.core.data.records import write_json
from moot.core.errors import ConfigError, MootError
from moot.core.redaction import redact, sending

#: Where a pushed folder records its repository.
PUSHED = Path(".moot") / "hub.json"


class PushError(MootError):
    """A push the Hub refused, or that could not reach it; the local artifact is intact."""


def check_repo_id(repo: str) -> str:
    """`repo` if it is a Hub repository id ``owner/name``.

    Raises:
        ConfigError: It is not (named with the Hub's own rule that it breaks).
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError as exc:
        problem = str(exc).replace(" Use `repo_type` argument if needed.", "")  # not ours
        raise ConfigError(f"--push-to-hub {repo!r}: {problem}") from None
    if repo.count("/") != 1:
        raise ConfigError(f"--push-to-hub {repo!r}: expected owner/name")
    return repo


def check_push(repo: str) -> None:
    """Whether a push to `repo` can happen, before any work: its id, online, a token.

    Raises:
        ConfigError: A bad repository id, ``HF_HUB_OFFLINE`` set, no token, or a bad
            ``MOOT_HUB_TIMEOUT``.
    """
    check_repo_id(repo)
    from huggingface_hub import constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise ConfigError(f"--push-to-hub {repo}: HF_HUB_OFFLINE is set; unset it to push")
    hub_timeout()  # a bad MOOT_HUB_TIMEOUT is found now, not after the work
    if not sending(get_token()):  # the token is sent, so never written
        raise ConfigError(
            f"--push-to-hub {repo}: no Hugging Face token; set HF_TOKEN or run `hf auth login`"
        )


def push_folder(
    folder: Path,
    repo: str,
    kind: Literal["dataset", "model"],
    *,
    private: bool = False,
    quiet: bool = False,
) -> str:
    """Upload `folder` (its card included, ``.moot/`` left out) to `repo`; the commit's URL.

    The repository is created when missing (`private` then sets its visibility). The upload is
    one commit, so the repository shows the whole folder or none of this push.

    Raises:
        PushError: The Hub refused a request (its status and message) or could not be reached.
    """
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import disable_progress_bars

    if quiet:
        disable_progress_bars()
    folder = Path(folder)
    bound_hub_requests()
    api = HfApi()
    try:
        api.create_repo(repo, repo_type=kind, private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo,
            repo_type=kind,
            folder_path=folder,
            ignore_patterns=[".moot/*", ".moot/**", "**/.moot/**"],
            commit_message=f"moot: {folder.name}",
        )
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise PushError(_failure(repo, f"HTTP {status}: {_first_line(exc)}")) from None
    except httpx.TimeoutException:
        raise PushError(_failure(repo, f"no reply within {hub_timeout():g}s")) from None
    except (httpx.HTTPError, OSError, ValueError) as exc:
        raise PushError(_failure(repo, _first_line(exc))) from None
    write_json(folder / PUSHED, {"repo": repo, "kind": kind, "commit": commit.oid})
    return str(commit.commit_url)


def pushed_repo(folder: str | Path) -> str | None:
    """The Hub repository `folder` was last pushed to, or None (never pushed, or not a folder)."""
    try:
        found = json.loads((Path(folder) / PUSHED).read_text(encoding="utf-8")).get("repo")
    except (OSError, ValueError, AttributeError):
        return None
    return found if isinstance(found, str) else None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _failure(repo: str, reason: str) -> str:
    return f"push to {repo} failed: {redact(reason)}"  # a message must never carry the token
