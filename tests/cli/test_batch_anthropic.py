"""``--batch`` for ``anthropic/...`` models: Anthropic's Message Batches, on the scripted server.

litellm sends the live requests (``POST /v1/messages``); moot's batches carry the same bodies.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import moot
from moot.testing import Fault, ScriptedServer
from tests.cli.test_batch import ARGUMENTS, FAST, debate, outputs

KEY = "sk-ant-scripted-0123456789"
MODEL = "anthropic/claude-x"
PRICES = {MODEL: {"input": 1.0, "output": 2.0}}


def run(server: ScriptedServer, tmp_path, name: str, **extra: object):
    origin = server.url.removesuffix("/v1")  # litellm appends /v1/messages to an Anthropic base
    return debate(server, tmp_path, tmp_path / name, model=MODEL, api_base=origin, **extra)


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("MOOT_API_KEY", KEY)  # the key moot sends to a custom api_base
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-sent-to-a-custom-server")


def test_an_anthropic_batch_run_writes_what_a_live_run_writes(tmp_path):
    with ScriptedServer(rules=[ARGUMENTS], api_key=KEY) as server:
        live = run(server, tmp_path, "live", prices=PRICES)
        sent = [r.body for r in server.requests if r.path == "/v1/messages"]
    with ScriptedServer(rules=[ARGUMENTS], api_key=KEY, batch_polls=1) as server:
        batched = run(server, tmp_path, "batched", prices=PRICES, **FAST)
        paths = Counter(request.path for request in server.requests)
        lines = server.batch_lines
    assert live.exit_code == batched.exit_code == 0
    assert outputs(tmp_path / "batched") == outputs(tmp_path / "live")
    assert "/v1/messages" not in paths and paths["/v1/messages/batches"] == 6
    assert all(request.authorized for request in server.requests)
    # each batch request's params are the body litellm sent live for it
    canonical = Counter(json.dumps(body, sort_keys=True) for body in sent)
    assert canonical == Counter(json.dumps(line.body, sort_keys=True) for line in lines)
    assert len(lines) == len({line.custom_id for line in lines}) == live.ledger.total().calls
    assert batched.ledger.total().batch_calls == len(lines)
    assert batched.ledger.spent() == pytest.approx(live.ledger.spent() / 2)
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())
    assert KEY.encode() not in written


def test_expired_and_overloaded_requests_are_asked_again_a_refused_one_is_not(tmp_path):
    faults = [Fault("batch_expired", times=1), Fault("503", match="Should zoos", times=1)]
    with ScriptedServer(rules=[ARGUMENTS], api_key=KEY, faults=faults, batch_polls=1) as server:
        result = run(server, tmp_path, "out", max_retries=2, **FAST)
        asked = Counter(line.custom_id for line in server.batch_lines)
    assert result.exit_code == 0
    assert sorted(asked.values(), reverse=True)[:3] == [2, 2, 1]
    assert result.ledger.total().retries == 2
    with ScriptedServer(rules=[ARGUMENTS], api_key=KEY) as server:
        run(server, tmp_path, "live")
    assert outputs(tmp_path / "out") == outputs(tmp_path / "live")
    # an invalid request is the request's fault: not asked again, the run says so
    with ScriptedServer(api_key=KEY, faults=[Fault("400", times=1)], batch_polls=1) as server:
        with pytest.raises(moot.api.RunFailed, match="invalid_request_error in batch") as failed:
            run(server, tmp_path, "refused", max_retries=2, **FAST)
        asked = Counter(line.custom_id for line in server.batch_lines)
    assert failed.value.result.exit_code == 1 and max(asked.values()) == 1
