"""A scripted Hugging Face Hub on 127.0.0.1: just the API calls an upload makes, in memory.

``huggingface_hub`` reads its endpoint from ``HF_ENDPOINT`` when it is imported, so a process
pointed at `ScriptedHub.url` (its environment set before it starts) pushes here and nothing
leaves the machine. Served:

- ``POST /api/repos/create`` (409 when the repo exists, as the Hub answers),
- ``GET /api/{models,datasets}/NS/NAME[/revision/REV]`` (repo info: its files and last commit),
- ``POST /api/validate-yaml`` (the README's front matter must parse as a YAML mapping),
- ``POST /api/{models,datasets}/NS/NAME/preupload/REV``: every file is a regular upload, so the
  client sends it inline in the commit and never reaches for LFS or Xet storage,
- ``POST /api/{models,datasets}/NS/NAME/commit/REV`` (NDJSON: a header, then ``file`` lines
  with base64 content and ``deletedFile`` lines).

Every request is logged (method, path, status, whether it carried the token; never the token).
`ScriptedHub.refuse` makes the next matching requests fail with a status, e.g. 401.

Run it alone with ``python -m tests.hub_server --token T``; it prints
``READY http://127.0.0.1:PORT`` and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import signal
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["HubRepo", "HubRequest", "ScriptedHub", "main"]

_REPO = r"(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+)"
_ROUTES = (
    ("POST", re.compile(r"/api/repos/create"), "create"),
    ("POST", re.compile(r"/api/validate-yaml"), "validate_yaml"),
    ("POST", re.compile(rf"/api/{_REPO}/preupload/(?P<rev>[^/]+)"), "preupload"),
    ("POST", re.compile(rf"/api/{_REPO}/commit/(?P<rev>[^/]+)"), "commit"),
    ("GET", re.compile(rf"/api/{_REPO}(?:/revision/(?P<rev>[^/]+))?"), "info"),
)


@dataclass(frozen=True)
class HubRequest:
    """One request as the scripted Hub saw it; the token is never recorded.

    Attributes:
        method: ``GET`` or ``POST``.
        path: The path, without the query string.
        status: The status answered.
        authorized: Whether it carried ``Authorization: Bearer <token>``.
        body: The request body as text (a commit's NDJSON, a JSON payload).
    """

    method: str
    path: str
    status: int
    authorized: bool
    body: str


@dataclass
class HubRepo:
    """A repository held in memory.

    Attributes:
        repo_id: ``namespace/name``.
        kind: ``model`` or ``dataset``.
        private: As asked at creation.
        files: Path in the repo → content, as of the last commit.
        commits: Each commit's summary, oldest first.
    """

    repo_id: str
    kind: str
    private: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)

    @property
    def sha(self) -> str:
        """The last commit's id (40 hex digits), from the commit count and the files."""
        digest = hashlib.sha1(str(len(self.commits)).encode())
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path])
        return digest.hexdigest()


class _Refusal(Exception):
    def __init__(self, status: int, message: str, **more: str) -> None:
        super().__init__(message)
        self.status, self.more = status, more


class ScriptedHub:
    """The scripted Hub; a context manager that serves in a background thread.

    Args:
        token: The token requests must carry; writes without it are refused with 401.
        port: The port (0: the OS picks one).
    """

    def __init__(self, token: str = "hf_scripted_token", *, port: int = 0) -> None:
        self.token = token
        self.repos: dict[tuple[str, str], HubRepo] = {}
        self._port = port
        self._lock = threading.Lock()
        self._log: list[HubRequest] = []
        self._refusals: list[tuple[str, int, int]] = []  # (route, status, times left)
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The endpoint, ``http://127.0.0.1:PORT`` (what ``HF_ENDPOINT`` takes)."""
        if self._httpd is None:
            raise RuntimeError("the scripted Hub is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def requests(self) -> list[HubRequest]:
        """The requests answered so far, in order."""
        with self._lock:
            return list(self._log)

    def repo(self, repo_id: str, kind: str = "dataset") -> HubRepo:
        """The repository `repo_id` of `kind` (``model`` or ``dataset``); KeyError if none."""
        with self._lock:
            return self.repos[(kind, repo_id)]

    def refuse(self, route: str, status: int, times: int = 1) -> None:
        """Answer the next `times` requests of `route` (``create``, ``commit``...) with `status`."""
        with self._lock:
            self._refusals.append((route, status, times))

    def start(self) -> ScriptedHub:
        """Listen and serve in a daemon thread; returns self."""
        hub = self

        class Handler(_Handler):
            owner = hub

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> ScriptedHub:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _handle(self, method: str, path: str, authorized: bool, body: bytes) -> tuple[int, Any]:
        found = [(r, m) for v, p, r in _ROUTES if v == method and (m := p.fullmatch(path))]
        if not found:
            return 404, {"error": f"not served by the scripted Hub: {method} {path}"}
        route, match = found[0]
        with self._lock:
            for index, (name, status, times) in enumerate(self._refusals):
                if name == route and times > 0:
                    self._refusals[index] = (name, status, times - 1)
                    return status, {"error": f"scripted refusal ({status})"}
        if method == "POST" and route != "validate_yaml" and not authorized:
            return 401, {"error": "Invalid credentials in Authorization header"}
        try:
            return 200, getattr(self, f"_{route}")(match, body)
        except _Refusal as refusal:
            return refusal.status, {"error": str(refusal), **refusal.more}

    def _find(self, match: re.Match) -> HubRepo:
        key = (match["kind"].removesuffix("s"), unquote(match["repo"]))
        if key not in self.repos:
            raise _Refusal(404, f"Repository not found: {key[1]}")
        return self.repos[key]

    def _create(self, match: re.Match, body: bytes) -> Any:
        payload = json.loads(body)
        repo_id = f"{payload['organization']}/{payload['name']}"
        kind = payload.get("type") or "model"
        prefix = "" if kind == "model" else f"{kind}s/"
        url = f"{self.url}/{prefix}{repo_id}"
        with self._lock:
            if (kind, repo_id) in self.repos:  # the Hub names the repo in its 409 too
                raise _Refusal(409, "You already created this repo", url=url)
            private = payload.get("visibility") == "private" or bool(payload.get("private"))
            self.repos[(kind, repo_id)] = HubRepo(repo_id, kind, private)
        return {"url": url, "name": repo_id}

    def _validate_yaml(self, match: re.Match, body: bytes) -> Any:
        import yaml

        content = json.loads(body)["content"]
        front = re.match(r"---\n(.*?)\n---\n", content, re.S)
        try:
            metadata = yaml.safe_load(front[1]) if front else {}
        except yaml.YAMLError as exc:
            raise _Refusal(400, f"README.md metadata is not YAML: {exc}") from None
        if not isinstance(metadata, dict):
            raise _Refusal(400, "README.md metadata is not a mapping")
        return {"errors": [], "warnings": []}

    def _info(self, match: re.Match, body: bytes) -> Any:
        with self._lock:
            repo = self._find(match)
            siblings = [{"rfilename": path} for path in sorted(repo.files)]
            return {"id": repo.repo_id, "sha": repo.sha, "private": repo.private,
                    "siblings": siblings}  # fmt: skip

    def _preupload(self, match: re.Match, body: bytes) -> Any:
        with self._lock:
            self._find(match)
        files = json.loads(body)["files"]
        return {
            "files": [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
            ]
        }

    def _commit(self, match: re.Match, body: bytes) -> Any:
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        with self._lock:
            repo = self._find(match)
            files = dict(repo.files)
            for line in lines:
                value = line["value"]
                if line["key"] == "file":
                    if value.get("encoding") != "base64":
                        raise _Refusal(400, f"{value['path']}: only base64 content is served")
                    files[value["path"]] = base64.b64decode(value["content"])
                elif line["key"] == "deletedFile":
                    files.pop(value["path"], None)
                elif line["key"] != "header":
                    raise _Refusal(400, f"{line['key']} operations are not served (LFS, copies)")
            repo.files = files
            repo.commits.append(lines[0]["value"]["summary"] if lines else "")
            prefix = "" if repo.kind == "model" else f"{repo.kind}s/"
            return {"commitUrl": f"{self.url}/{prefix}{repo.repo_id}/commit/{repo.sha}",
                    "commitOid": repo.sha}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the owner keeps its own log

    def do_GET(self) -> None:  # noqa: N802 - http.server dispatch
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802 - http.server dispatch
        self._serve("POST")

    def _serve(self, method: str) -> None:
        path = urlsplit(self.path).path
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        authorized = self.headers.get("Authorization") == f"Bearer {self.owner.token}"
        status, reply = self.owner._handle(method, path, authorized, body)
        text = body.decode("utf-8", "replace")
        with self.owner._lock:  # logged before the reply: a client that has it sees the entry
            self.owner._log.append(HubRequest(method, path, status, authorized, text))
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> int:
    """Serve a scripted Hub until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--token", default="hf_scripted_token", help="the token writes need")
    parser.add_argument("--port", type=int, default=0, help="port (0: let the OS pick)")
    args = parser.parse_args(argv)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    with ScriptedHub(args.token, port=args.port) as hub:
        print(f"READY {hub.url}", flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
