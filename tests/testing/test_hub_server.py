"""The scripted Hub itself: what it refuses, as the Hub would (the pushes are in tests/cli)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.hub_server import ScriptedHub


def post(hub: ScriptedHub, path: str, body: Any, token: str | None = "t0ken") -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(hub.url + path, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def hub() -> Any:
    with ScriptedHub("t0ken") as hub:
        yield hub


def test_creation_needs_the_token_and_a_repeat_is_409_with_the_url(hub: ScriptedHub) -> None:
    create = {"name": "x", "organization": "me", "type": "dataset"}
    assert post(hub, "/api/repos/create", create, token="wrong")[0] == 401
    assert post(hub, "/api/repos/create", create)[0] == 200
    status, reply = post(hub, "/api/repos/create", create)
    assert status == 409 and reply["url"].endswith("/datasets/me/x")
    assert [r.authorized for r in hub.requests] == [False, True, True]
    assert all("t0ken" not in r.body for r in hub.requests)


def test_front_matter_must_be_a_yaml_mapping(hub: ScriptedHub) -> None:
    good = {"content": "---\nlicense: mit\n---\n# x\n", "repoType": "dataset"}
    assert post(hub, "/api/validate-yaml", good)[0] == 200
    for front in ("license: [mit\n", "- a list\n"):
        bad = {"content": f"---\n{front}---\n# x\n", "repoType": "dataset"}
        assert post(hub, "/api/validate-yaml", bad)[0] == 400


def test_a_commit_stores_inline_files_and_refuses_lfs(hub: ScriptedHub) -> None:
    post(hub, "/api/repos/create", {"name": "m", "organization": "me"})
    header = {"key": "header", "value": {"summary": "one"}}
    inline = {"key": "file", "value": {"path": "a.txt", "content": "aGk=", "encoding": "base64"}}
    lines = b"".join(json.dumps(line).encode() + b"\n" for line in (header, inline))
    assert post(hub, "/api/models/me/m/commit/main", lines)[0] == 200
    assert hub.repo("me/m", "model").files == {"a.txt": b"hi"}
    lfs = {"key": "lfsFile", "value": {"path": "b.bin", "algo": "sha256", "oid": "0" * 64}}
    lines = b"".join(json.dumps(line).encode() + b"\n" for line in (header, lfs))
    assert post(hub, "/api/models/me/m/commit/main", lines)[0] == 400
    preupload = {"files": [{"path": "b.bin", "sample": "", "size": 10**9}]}
    status, reply = post(hub, "/api/models/me/m/preupload/main", preupload)
    assert status == 200 and reply["files"][0]["uploadMode"] == "regular"  # never LFS or Xet


def test_refusals_are_taken_in_order(hub: ScriptedHub) -> None:
    hub.refuse("create", 500, times=2)
    create = {"name": "x", "organization": "me"}
    assert [post(hub, "/api/repos/create", create)[0] for _ in range(3)] == [500, 500, 200]
    assert post(hub, "/api/nothing", {})[0] == 404
