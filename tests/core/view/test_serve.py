"""`moot view --serve`'s server in process: a large run's page and its data files."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from moot.cli.main import build_parser
from moot.core.view.live import LiveRuns
from moot.core.view.page import CHUNK, INLINE_ITEMS
from moot.core.view.serve import ViewServer


@pytest.fixture(autouse=True)
def _kinds() -> None:
    build_parser()  # each command registers its output's kind


def test_a_large_run_is_served_as_a_list_and_data_files_under_the_token(tmp_path):
    (tmp_path / ".moot").mkdir()
    (tmp_path / ".moot" / "owner.json").write_text('{"command": "moot debate"}')
    records = [{"id": f"d{i}", "topic": f"T{i}", "status": "ok"} for i in range(INLINE_ITEMS + 1)]
    (tmp_path / "debates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    server = ViewServer(LiveRuns([tmp_path]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page = urllib.request.urlopen(server.url).read().decode()
        data = json.loads(page.split('id="moot-data">')[1].split("</script>")[0])
        chunks, [run] = data["chunks"], data["runs"]
        assert data["live"] == {"every": 1000} and "record" not in run["items"][0]
        assert run["cursor"]["offset"] == (tmp_path / "debates.jsonl").stat().st_size
        name = f"{chunks['folder']}/{chunks['prefix']}-0-1.js"  # the run's second file
        script = urllib.request.urlopen(server.url + name).read().decode()
        assert script.startswith("mootChunk(0,1,") and script.count('"topic"') == CHUNK
        assert f'"id":"d{CHUNK}"' in script and f'"id":"d{2 * CHUNK}"' not in script
        with pytest.raises(urllib.error.HTTPError) as refused:  # a file of no page of this token
            urllib.request.urlopen(server.url.replace(server.token, "x" * 32) + name)
        assert refused.value.code == 403
    finally:
        server.shutdown()
        server.server_close()
