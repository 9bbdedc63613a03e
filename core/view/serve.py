"""`moot view --serve`: the page on a local HTTP server that follows the runs while they run.

The server binds 127.0.0.1 only and answers under one path, ``/<token>/`` (a random
`secrets.token_urlsafe`, printed once): a request without it is refused (403), before anything is
read. Under it:

- ``/<token>/``: the page (`moot.core.view.page.render_view`, the same as the static one, its
  data read when it is asked for), with ``live`` set: it then asks every second for
- ``live?cursor=...``: what is new since its cursors (`moot.core.view.live.LiveRuns.update`);
- ``view.data/<name>``: a large page's data files (`moot.core.view.page.split_items`);
- ``files/<run>/<path>``: a file of the run numbered `run` (its folder's files only: no ``..``, no
  symlink out, `moot.core.view.payload.inside`), as plain text, never run by the browser;
- ``labels`` (POST): a label, checked against the run's items and their fields
  (`moot.core.labels.check_label`) and appended to ``RUN/labels/<labeller>.jsonl``: the only
  thing the server writes.

Every text the server sends has the environment's secrets taken out, as the static page does.
"""

from __future__ import annotations

import hmac
import json
import secrets
import sys
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, unquote, urlsplit

from moot.core.errors import ConfigError, InputError, WriteError
from moot.core.labels import append_label, check_label, check_labeller, run_fields
from moot.core.view.live import LiveRuns, parse_cursors
from moot.core.view.page import INLINE_ITEMS, embedded_json, render_view, split_items
from moot.core.view.payload import inside, read_run

#: Milliseconds between two looks of the page at what is new.
EVERY_MS = 1000
#: Headers of every answer: nothing cached, no referrer (the token is in the address).
HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
#: The largest request body: a label with its note.
BODY_LIMIT = 64 * 1024
#: A run's file is shown as text: a page in a run folder never runs in the server's origin.
RAW = "default-src 'none'; sandbox"


class ViewServer(ThreadingHTTPServer):
    """The server of `serve`: the runs, the token, the latest page's data files.

    Args:
        live: The runs it shows.
        port: Its port on 127.0.0.1 (0: a free one).
        hidden: Strings no answer may hold (`moot.core.redaction.known_secrets`).
    """

    daemon_threads = True

    def __init__(self, live: LiveRuns, port: int = 0, hidden: Sequence[str] = ()) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.live, self.secrets = live, list(hidden)
        self.token = secrets.token_urlsafe(24)
        self.data_files: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr for a request that failed (not socketserver's traceback)."""
        from moot.core.redaction import redact

        error = sys.exc_info()[1]
        print(f"moot view: a request failed: {redact(str(error))}", file=sys.stderr, flush=True)

    @property
    def url(self) -> str:
        """The page's address, token and all."""
        return f"http://127.0.0.1:{self.server_address[1]}/{self.token}/"

    def page(self) -> str:
        """The page, its data read now; a large one's data files kept for it to load."""
        payload = {**self.live.payload(), "live": {"every": EVERY_MS}}
        title = "moot view: " + ", ".join(run["name"] for run in payload["runs"])
        if sum(len(run["items"]) for run in payload["runs"]) > INLINE_ITEMS:
            payload, files = split_items(payload, "view.data", self.secrets)
            self.data_files = files
        return render_view(payload, title, self.secrets)

    def label(self, body: Any) -> dict[str, Any]:
        """Append the label `body` (``{run, labeller, item, field, value, note?}``) to its run.

        Returns:
            The line written (`moot.core.labels.append_label`).

        Raises:
            ValueError: A run, labeller, item, field or value that is not one (one line).
        """
        if not isinstance(body, dict):
            raise ValueError("a label is a JSON object")
        folders = [path for path, _ in self.live.shown()]
        number, labeller = body.pop("run", None), body.pop("labeller", None)
        if not isinstance(number, int) or not 0 <= number < len(folders):
            raise ValueError(f"no run {json.dumps(number)} (0 to {len(folders) - 1})")
        labeller = check_labeller(labeller)
        with self.lock:  # one run read and one line appended at a time
            checked = check_label(body, run_fields(read_run(folders[number])))
            return append_label(folders[number], labeller, checked)


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Nothing: each line would show the token."""

    def do_GET(self) -> None:  # noqa: N802
        """Answer a GET under the token."""
        path = self._route()
        if path is None:
            return
        routes: dict[str, Callable[[str], None]] = {"": self._page, "live": self._live}
        head, _, rest = path.partition("/")
        if head in routes and not rest:
            routes[head](urlsplit(self.path).query)
        elif head == "view.data" and rest in self.server.data_files:
            self._send(self.server.data_files[rest], "text/javascript")
        elif head == "files":
            self._file(rest)
        else:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")

    def do_POST(self) -> None:  # noqa: N802
        """A label (``labels``): checked, then appended to ``RUN/labels/<labeller>.jsonl``."""
        path = self._route()
        if path is None:
            return
        if path != "labels":
            return self._refuse(HTTPStatus.NOT_FOUND, "not found: only labels are written")
        size = self.headers.get("Content-Length") or "0"
        if not size.isdigit():
            self.close_connection = True
            return self._refuse(HTTPStatus.LENGTH_REQUIRED, "a label needs its Content-Length")
        size = int(size)
        if size > BODY_LIMIT:
            self.close_connection = True
            return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "a label is a few lines")
        try:
            line = self.server.label(json.loads(self.rfile.read(size).decode("utf-8")))
        except ValueError as exc:  # JSON, UTF-8, the record: `check_label`'s one line
            return self._refuse(HTTPStatus.BAD_REQUEST, f"label refused: {exc}")
        except (InputError, WriteError) as exc:  # the run unreadable, or a full disk: not kept
            return self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, f"label not kept: {exc}")
        self._send(embedded_json(line, self.server.secrets), "application/json")

    def _route(self) -> str | None:
        """The path under the token, or None once a request without it is refused (403)."""
        path = urlsplit(self.path).path
        token, slash, rest = path.removeprefix("/").partition("/")
        if not hmac.compare_digest(token.encode(), self.server.token.encode()):
            self._refuse(HTTPStatus.FORBIDDEN, "forbidden: the address moot view printed is needed")
            return None
        if not slash:  # the page's relative addresses need its trailing slash
            self.send_response(HTTPStatus.MOVED_PERMANENTLY)
            self.send_header("Location", f"/{token}/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return rest

    def _page(self, query: str) -> None:
        try:
            page = self.server.page()
        except InputError as exc:  # a folder gone, a labels file that is not one: said in one line
            return self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        self._send(page, "text/html")

    def _live(self, query: str) -> None:
        try:
            cursors = parse_cursors(parse_qs(query).get("cursor", [""])[0])
            update = self.server.live.update(cursors)
        except ValueError as exc:
            return self._refuse(HTTPStatus.BAD_REQUEST, str(exc))
        except InputError as exc:  # a folder gone or unreadable: the page says so
            update = {"error": str(exc)}
        self._send(embedded_json(update, self.server.secrets), "application/json")

    def _file(self, rest: str) -> None:
        """A file of a run, as text; a path out of it refused (403)."""
        number, _, name = rest.partition("/")
        folders = [path for path, _ in self.server.live.shown()]
        parts = unquote(name).split("/")
        if not number.isdigit() or int(number) >= len(folders) or not name:
            return self._refuse(HTTPStatus.NOT_FOUND, "not found")
        if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
            return self._refuse(HTTPStatus.FORBIDDEN, "forbidden: a path out of the run")
        try:
            path = inside(folders[int(number)], "/".join(parts))
        except InputError as exc:
            return self._refuse(HTTPStatus.FORBIDDEN, f"forbidden: {exc.problem}")
        if not path.is_file():
            return self._refuse(HTTPStatus.NOT_FOUND, "not found")
        text = path.read_bytes().decode("utf-8", errors="replace")
        for secret in self.server.secrets:
            text = text.replace(secret, "[redacted]")
        self._send(text, "text/plain", {"Content-Security-Policy": RAW})

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        self._send(message + "\n", "text/plain", status=status)

    def _send(
        self,
        body: str | bytes,
        kind: str,
        headers: dict[str, str] | None = None,
        status: HTTPStatus = HTTPStatus.OK,
    ) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        for name, value in {**HEADERS, **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(
    folders: Sequence[Path],
    debates: Path | None = None,
    port: int = 0,
    out: TextIO | None = None,
) -> None:
    """Serve the page of `folders` until Ctrl-C, its address printed once on `out`.

    Args:
        folders: Run folders (`moot.core.view.live.LiveRuns`): each is read once first.
        debates: The debates a `moot judge` folder judged (its ``--debates``).
        port: The port on 127.0.0.1 (0: a free one).
        out: Where the address goes (default: standard output).

    Raises:
        InputError: A folder `moot view` cannot show, or a bad debates file.
        ConfigError: The port is taken (or not one moot may bind).
    """
    from moot.core.redaction import known_secrets

    live = LiveRuns(folders, debates)
    try:
        server = ViewServer(live, port, known_secrets())
    except OSError as exc:
        raise ConfigError(f"port {port} on 127.0.0.1: {exc.strerror}") from None
    print(f"moot view: {server.url} (Ctrl-C stops it)", file=out or sys.stdout, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
