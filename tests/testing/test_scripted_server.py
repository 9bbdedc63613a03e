import concurrent.futures
import http.client
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from moot.core.llm.tokens import count_message_tokens, count_tokens
from moot.testing import Fault, FaultKind, Rule, ScriptedServer, ServerConfig

USER_HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def client(server: ScriptedServer, key: str = "test-key", timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=timeout)


def chat(server: ScriptedServer, messages: list[dict[str, Any]] = USER_HI, **kwargs: Any) -> Any:
    return client(server).chat.completions.create(model="m", messages=messages, **kwargs)


def text(server: ScriptedServer, messages: list[dict[str, Any]] = USER_HI, **kwargs: Any) -> str:
    return chat(server, messages, **kwargs).choices[0].message.content


def raw(
    server: ScriptedServer, method: str, path: str, body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=5)
    try:
        conn.request(method, path, None if body is None else json.dumps(body))
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


# --- replies ---------------------------------------------------------------


def test_deterministic_reply_shape(server: ScriptedServer) -> None:
    first, second = chat(server), chat(server)
    content = first.choices[0].message.content
    assert content == second.choices[0].message.content
    assert first.object == "chat.completion" and first.id.startswith("chatcmpl-")
    assert first.choices[0].finish_reason == "stop"
    assert first.choices[0].message.role == "assistant"
    assert 8 <= len(content.split()) <= 40 and content.endswith(".")
    assert first.usage.prompt_tokens == count_message_tokens(USER_HI)
    assert first.usage.completion_tokens == count_tokens(content)
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


def test_reply_depends_on_request(server: ScriptedServer) -> None:
    assert text(server, seed=1) == text(server, seed=1)
    assert text(server, seed=1) != text(server, seed=2)
    assert text(server, temperature=0.0) != text(server, temperature=1.0)
    assert text(server) != text(server, [{"role": "user", "content": "something else"}])


def test_max_tokens_cuts_words(server: ScriptedServer) -> None:
    response = chat(server, max_tokens=3)
    assert len(response.choices[0].message.content.split()) == 3
    assert response.choices[0].finish_reason == "length"
    limited = chat(server, max_completion_tokens=5).choices[0].message.content
    assert len(limited.split()) == 5


def test_rules_count_matches_and_first_wins() -> None:
    rules = [Rule(r"ping", "pong {n}"), Rule(r"p", "fallback {n}"), Rule("js", '{"k": {n}}')]
    with ScriptedServer(rules=rules) as server:
        assert [text(server, [{"role": "user", "content": "ping"}]) for _ in range(3)] == [
            "pong 0",
            "pong 1",
            "pong 2",
        ]
        assert text(server, [{"role": "user", "content": "pong"}]) == "fallback 0"
        assert text(server, [{"role": "user", "content": "js"}]) == '{"k": 0}'  # braces kept


def test_rule_roles_and_runtime_rules(server: ScriptedServer) -> None:
    messages = [
        {"role": "system", "content": "You are the JUDGE."},
        {"role": "user", "content": "first\nargument"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "verdict?"},
    ]
    server.add_rule(Rule("JUDGE", "from user", role="user"))
    server.add_rule(Rule("first.argument", "not last", role="last"))
    server.add_rule(Rule("JUDGE.*verdict", "whole transcript"))  # re.S spans messages
    server.add_rule(Rule("JUDGE", "system rule", role="system"))
    assert text(server, messages) == "whole transcript"
    assert text(server, messages[:1]) == "system rule"


def test_a_rule_may_match_one_model_alone() -> None:
    rules = [Rule("verdict", "from juror b", model="juror-b"), Rule("verdict", "from any")]
    with ScriptedServer(rules=rules) as server:
        ask = [{"role": "user", "content": "verdict?"}]
        replies = [
            client(server).chat.completions.create(model=m, messages=ask).choices[0].message.content
            for m in ("juror-a", "juror-b")
        ]
    assert replies == ["from any", "from juror b"]


# --- structured output -----------------------------------------------------


SCHEMA = {
    "type": "object",
    "properties": {
        "winner": {"type": "string", "enum": ["pro", "con"]},
        "score": {"type": "integer", "minimum": 3, "maximum": 7},
        "reasons": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "detail": {"$ref": "#/$defs/Detail"},
        "note": {"type": ["string", "null"]},
        "confident": {"type": "boolean"},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["winner", "score", "reasons", "detail", "note", "confident", "ratio"],
    "additionalProperties": False,
    "$defs": {
        "Detail": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        }
    },
}


def test_json_schema_reply(server: ScriptedServer) -> None:
    response_format = {"type": "json_schema", "json_schema": {"name": "v", "schema": SCHEMA}}
    content = text(server, response_format=response_format)
    assert content == text(server, response_format=response_format)
    value = json.loads(content)
    assert set(value) == set(SCHEMA["required"])
    assert value["winner"] == "pro"
    assert isinstance(value["score"], int) and 3 <= value["score"] <= 7
    assert len(value["reasons"]) == 2 and all(isinstance(r, str) and r for r in value["reasons"])
    assert isinstance(value["detail"]["summary"], str)
    assert isinstance(value["note"], str) and isinstance(value["confident"], bool)
    assert 0 <= value["ratio"] <= 1


def test_json_object_reply_and_rule_precedence(server: ScriptedServer) -> None:
    assert isinstance(json.loads(text(server, response_format={"type": "json_object"})), dict)
    server.add_rule(Rule("hi", "scripted"))
    assert text(server, response_format={"type": "json_object"}) == "scripted"


# --- faults ----------------------------------------------------------------


def test_429_with_retry_after_then_recovers(server: ScriptedServer) -> None:
    server.add_fault(Fault("429", retry_after=2))
    with pytest.raises(openai.RateLimitError) as caught:
        chat(server)
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.body["type"] == "rate_limit_error"
    assert chat(server).choices[0].finish_reason == "stop"
    assert [r.outcome for r in server.requests] == ["429", "ok"]


def limited_chat(server: ScriptedServer, max_tokens: int = 10) -> tuple[int, dict[str, str]]:
    body = {"model": "m", "messages": USER_HI, "max_tokens": max_tokens}
    status, headers, _ = raw(server, "POST", "/v1/chat/completions", body)
    return status, {name.lower(): value for name, value in headers.items()}


def test_requests_per_window_are_enforced_with_openai_headers() -> None:
    with ScriptedServer(rpm=3, limit_window=2.0) as server:
        answered = [limited_chat(server) for _ in range(4)]
        statuses = [status for status, _ in answered]
        assert statuses == [200, 200, 200, 429]
        remaining = [h["x-ratelimit-remaining-requests"] for _, h in answered[:3]]
        assert remaining == ["2", "1", "0"]
        assert all(h["x-ratelimit-limit-requests"] == "3" for _, h in answered)
        # a request refills every 2/3 s: the 429 says when the next one fits
        waited = int(answered[3][1]["retry-after-ms"])
        assert 0 < waited <= 667 and answered[3][1]["retry-after"] == "1"
        assert re.fullmatch(r"\d+ms|\d+(\.\d+)?s", answered[3][1]["x-ratelimit-reset-requests"])
        time.sleep(waited / 1000 + 0.05)
        assert limited_chat(server)[0] == 200
        outcomes = [r.outcome for r in server.requests]
    assert outcomes == ["ok", "ok", "ok", "rate_limited", "ok"]


def test_tokens_per_window_charge_the_prompt_and_max_tokens() -> None:
    prompt = count_message_tokens(USER_HI)
    with ScriptedServer(tpm=2 * (prompt + 50), limit_window=60.0) as server:
        first, second, third = (limited_chat(server, max_tokens=50) for _ in range(3))
        too_large = limited_chat(server, max_tokens=10_000)
    assert (first[0], second[0], third[0]) == (200, 200, 429)
    assert first[1]["x-ratelimit-remaining-tokens"] == str(prompt + 50)
    assert second[1]["x-ratelimit-remaining-tokens"] == "0"
    assert 0 < int(third[1]["retry-after-ms"]) <= 60_000
    assert too_large[0] == 429 and "retry-after-ms" not in too_large[1]  # it never fits


def test_limits_travel_to_a_subprocess_server_in_its_config() -> None:
    config = ServerConfig(rpm=5, tpm=1000, limit_window=1.5)
    assert ServerConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("500", openai.InternalServerError),
        ("503", openai.InternalServerError),
        ("400", openai.BadRequestError),
    ],
)
def test_error_faults(
    server: ScriptedServer, kind: FaultKind, error: type[openai.APIStatusError]
) -> None:
    server.add_fault(Fault(kind, retry_after=0.5))
    with pytest.raises(error) as caught:
        chat(server)
    assert caught.value.status_code == int(kind)
    retry_after = caught.value.response.headers.get("retry-after")
    assert retry_after == ("0.5" if kind == "503" else None)  # Retry-After only on 429/503
    assert [(r.status, r.outcome) for r in server.requests] == [(int(kind), kind)]


def test_faults_stop_after_times_and_respect_match(server: ScriptedServer) -> None:
    server.add_fault(Fault("500", times=2, match="flaky"))
    assert chat(server).choices  # no match: not consumed
    flaky = [{"role": "user", "content": "a flaky call"}]
    for _ in range(2):
        with pytest.raises(openai.InternalServerError):
            chat(server, flaky)
    assert chat(server, flaky).choices
    assert [r.outcome for r in server.requests] == ["ok", "500", "500", "ok"]


def test_fault_rate_is_seeded_per_body_and_arrival() -> None:
    def outcomes(seed: int, order: list[int]) -> dict[int, list[str]]:
        faults = [Fault("429", times=10**9, rate=0.25, seed=seed)]
        with ScriptedServer(faults=faults) as server:
            seen: dict[int, list[str]] = {i: [] for i in order}
            for i in order:
                body = {"model": "m", "messages": [{"role": "user", "content": f"call {i}"}]}
                status = raw(server, "POST", "/v1/chat/completions", body)[0]
                seen[i].append({200: "ok", 429: "429"}[status])
            return seen

    calls = [i for i in range(100) for _ in range(3)]  # each body three times
    first = outcomes(7, calls)
    assert outcomes(7, calls[::-1]) == first  # the same faults in another arrival order
    assert outcomes(8, calls) != first
    share = sum(o == "429" for seen in first.values() for o in seen) / len(calls)
    assert 0.15 < share < 0.35
    assert any(len(set(seen)) > 1 for seen in first.values())  # drawn per arrival
    with pytest.raises(ValueError, match="rate"):
        Fault("500", rate=1.5)


def test_malformed_and_truncated_bodies(server: ScriptedServer) -> None:
    server.add_fault(Fault("malformed"))
    server.add_fault(Fault("truncated"))
    status, _, body = raw(server, "POST", "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)
    status, headers, body = raw(server, "POST", "/v1/chat/completions", {"messages": USER_HI})
    assert status == 200 and int(headers["Content-Length"]) == len(body)
    assert body.startswith(b'{"id": "chatcmpl-')
    with pytest.raises(ValueError):
        json.loads(body)
    server.add_fault(Fault("truncated"))
    with pytest.raises(ValueError):  # the SDK surfaces a JSON decoding error
        chat(server)
    assert [r.outcome for r in server.requests] == ["malformed", "truncated", "truncated"]


def test_hang_times_out_client() -> None:
    with ScriptedServer(faults=[Fault("hang", hang_seconds=2.0)]) as server:
        with pytest.raises(openai.APITimeoutError):
            client(server, timeout=0.3).chat.completions.create(model="m", messages=USER_HI)
        assert chat(server).choices  # the fault is used up; stop() interrupts the hang


# --- context window, auth, validation --------------------------------------


def test_context_length_exceeded() -> None:
    long = [{"role": "user", "content": "word " * 100}]
    with ScriptedServer(context_window=50) as server:
        with pytest.raises(openai.BadRequestError) as caught:
            chat(server, long)
        tokens = count_message_tokens(long)
        assert caught.value.code == "context_length_exceeded"
        assert caught.value.body == {
            "message": "This model's maximum context length is 50 tokens. However, your "
            f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        with pytest.raises(openai.BadRequestError) as caught:
            chat(server, max_tokens=48)  # prompt fits, prompt + completion does not
        assert caught.value.code == "context_length_exceeded"
        assert "(8 in the messages, 48 in the completion)" in caught.value.message
        assert chat(server, max_tokens=42).choices  # exactly the window is fine
        assert [r.outcome for r in server.requests][-1] == "ok"


def test_api_key_enforced_and_never_logged() -> None:
    with ScriptedServer(api_key="sekrit-123") as server:
        with pytest.raises(openai.AuthenticationError) as caught:
            client(server, key="wrong").chat.completions.create(model="m", messages=USER_HI)
        assert caught.value.code == "invalid_api_key"
        assert (
            client(server, key="sekrit-123")
            .chat.completions.create(model="m", messages=USER_HI)
            .choices
        )
        assert client(server, key="sekrit-123").models.list().data[0].id == "scripted"
        assert raw(server, "GET", "/v1/models")[0] == 401
        assert raw(server, "GET", "/health")[0] == 200  # health needs no key
        log = server.requests
        assert [(r.status, r.authorized) for r in log] == [
            (401, False),
            (200, True),
            (200, True),
            (401, False),
            (200, False),  # served, but without the key
        ]
        assert "sekrit" not in repr(log) and "wrong" not in repr(log)


def test_streaming_and_bad_requests_rejected(server: ScriptedServer) -> None:
    with pytest.raises(openai.BadRequestError, match="streaming not supported"):
        chat(server, stream=True)
    status, _, body = raw(server, "POST", "/v1/chat/completions", {"model": "m"})
    assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error"


# --- other endpoints, log, config ------------------------------------------


def test_endpoints_and_request_log(server: ScriptedServer) -> None:
    assert raw(server, "GET", "/health")[:1] == (200,)
    status, headers, body = raw(server, "GET", "/v1/models")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["data"][0]["id"] == "scripted"
    status, _, body = raw(server, "GET", "/v1/nothing?x=1")
    assert status == 404 and json.loads(body)["error"]["code"] == "unknown_url"
    chat(server, seed=7)
    log = server.requests
    assert [(r.path, r.status, r.outcome) for r in log] == [
        ("/health", 200, "ok"),
        ("/v1/models", 200, "ok"),
        ("/v1/nothing", 404, "not_found"),
        ("/v1/chat/completions", 200, "ok"),
    ]
    assert log[-1].body == {"model": "m", "messages": USER_HI, "seed": 7}
    assert log[0].body is None and all(r.authorized for r in log)
    assert [r.time for r in log] == sorted(r.time for r in log)
    server.clear_log()
    assert server.requests == []


def test_keep_alive_connection_is_reused(server: ScriptedServer) -> None:
    conn = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=5)
    body = json.dumps({"model": "m", "messages": USER_HI})
    replies = []
    for _ in range(3):
        conn.request("POST", "/v1/chat/completions", body)
        response = conn.getresponse()
        assert response.status == 200 and not response.will_close
        replies.append(json.loads(response.read())["choices"][0]["message"]["content"])
    sock = conn.sock
    conn.request("GET", "/health")
    conn.getresponse().read()
    assert conn.sock is sock and len(set(replies)) == 1
    conn.close()


def test_concurrent_requests_with_latency() -> None:
    with ScriptedServer(latency=0.2) as server:
        netloc = urlsplit(server.url).netloc

        def call(i: int) -> int:
            conn = http.client.HTTPConnection(netloc, timeout=10)
            conn.request("POST", "/v1/chat/completions", json.dumps({"messages": USER_HI}))
            status = conn.getresponse().status
            conn.close()
            return status

        with concurrent.futures.ThreadPoolExecutor(64) as pool:
            assert list(pool.map(call, range(64))) == [200] * 64
        assert len(server.requests) == 64


def test_config_json_round_trip_and_validation() -> None:
    config = ServerConfig(
        latency=0.1,
        rules=[Rule("a", "b", role="last")],
        faults=[Fault("429", times=2, match="x", retry_after=1.5, rate=0.5, seed=3)],
        context_window=100,
        model="mod",
        api_key="k",
    )
    assert ServerConfig.from_json(config.to_json()) == config
    assert ServerConfig.from_json("{}") == ServerConfig()
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault("418")  # type: ignore[arg-type]
    server = ScriptedServer(config, latency=0.0)
    assert server.config.latency == 0.0 and config.latency == 0.1
    server.add_rule(Rule("c", "d"))
    assert len(config.rules) == 1  # the caller's config is not mutated
    with pytest.raises(RuntimeError):
        _ = server.url


# --- separate process --------------------------------------------------------


def _read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        assert selector.select(timeout), "server did not print READY in time"
    return process.stdout.readline()


def test_subprocess_entry_point(tmp_path: Path) -> None:
    config = ServerConfig(rules=[Rule("^ping$", "pong {n}")], model="sub")
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    # runpy warns when `moot.testing` has imported the module it is asked to run
    python = [sys.executable, "-W", "error::RuntimeWarning"]
    command = [*python, "-m", "moot.testing.server", "--config", str(path)]
    process = subprocess.Popen(
        [*command, "--latency", "0", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "0"},
    )
    try:
        line = _read_line(process, timeout=20)
        match = re.fullmatch(r"READY (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert match, line
        remote = openai.OpenAI(base_url=match[1], api_key="k", max_retries=0, timeout=5)
        ping = [{"role": "user", "content": "ping"}]
        reply = remote.chat.completions.create(model="m", messages=ping)
        assert reply.choices[0].message.content == "pong 0"
        assert remote.models.list().data[0].id == "sub"
        # hash replies are identical across processes
        with ScriptedServer() as local:
            expected = text(local, seed=5)
        got = remote.chat.completions.create(model="m", messages=USER_HI, seed=5)
        assert got.choices[0].message.content == expected
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert process.stdout is not None and process.stdout.read() == ""  # exactly one line
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
