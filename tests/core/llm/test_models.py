"""ModelClient against the real scripted OpenAI-compatible server (no doubles inside moot)."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from moot.core.errors import ConfigError, ContextWindowExceeded, EndpointError, ModelCallError
from moot.core.llm.cache import RequestCache
from moot.core.llm.models import Completion, ModelClient, RetryPolicy, check_reachable
from moot.core.llm.spec import ModelSpec, Role, parse_spec, resolve_api_key
from moot.core.llm.structured import ParseFailure
from moot.core.llm.tokens import count_message_tokens
from moot.testing import Fault, Rule, ScriptedServer, refused_url

HELLO = [
    {"role": "system", "content": "You are a careful debater."},
    {"role": "user", "content": "Give one argument for school uniforms."},
]
FAST = RetryPolicy(initial_wait=0.01, max_wait=0.05)
SECRET = "sk-test-SECRET123"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def make_spec(server: ScriptedServer, *, timeout: float = 5.0, **options: Any) -> ModelSpec:
    return parse_spec("openai/scripted", api_base=server.url, timeout=timeout, **options)


def make_role(server: ScriptedServer, temperature: float = 0.0, **options: Any) -> Role:
    return Role("debater_a", make_spec(server, **options), temperature)


def complete(client: ModelClient, role: Role, messages: Any = HELLO, **kwargs: Any) -> Completion:
    return asyncio.run(client.complete(role, messages, stage="opening", **kwargs))


def chat_requests(server: ScriptedServer) -> list[Any]:
    return [r for r in server.requests if r.path == "/v1/chat/completions"]


def total(client: ModelClient) -> dict[str, Any]:
    return client.ledger.to_json()["total"]


# --- plain calls -------------------------------------------------------------


def test_plain_call_returns_text_usage_and_sends_parameters(server: ScriptedServer) -> None:
    server.add_rule(Rule("school uniforms", "Uniforms reduce peer pressure."))
    client = ModelClient(retry=FAST)

    reply = complete(client, make_role(server, temperature=0.7), max_tokens=64, seed=11)

    assert reply.text == "Uniforms reduce peer pressure."
    assert reply.finish_reason == "stop"
    assert reply.prompt_tokens == count_message_tokens(HELLO)
    assert reply.completion_tokens > 0
    assert not reply.cached and reply.retries == 0
    (logged,) = chat_requests(server)
    assert logged.body is not None
    assert logged.body["messages"] == HELLO
    assert logged.body["temperature"] == 0.7
    assert logged.body["seed"] == 11
    assert logged.body["max_tokens"] == 64
    assert logged.body["model"] == "scripted"
    row = client.ledger.to_json()["by_role"][0]
    assert (row["role"], row["stage"], row["model"]) == ("debater_a", "opening", "openai/scripted")
    assert row["calls"] == 1 and row["prompt_tokens"] == reply.prompt_tokens
    assert row["completion_tokens"] == reply.completion_tokens


def test_an_openai_compatible_server_is_reached_through_moots_http_client_alone(
    server: ScriptedServer,
) -> None:
    # one way to reach it: `transports.http`, neither the OpenAI SDK's client nor a LangChain
    # chat model (in a fresh interpreter: `moot.core.chat_model`'s own test imports both)
    script = (
        "import asyncio, sys\n"
        "from moot.core.llm.models import ModelClient\n"
        "from moot.core.llm.spec import Role, parse_spec\n"
        f"role = Role('a', parse_spec('openai/scripted', api_base={server.url!r}), 0.0)\n"
        "hi = [{'role': 'user', 'content': 'hi'}]\n"
        "reply = asyncio.run(ModelClient().complete(role, hi, stage='s'))\n"
        "assert reply.text\n"
        "print('langchain_openai' in sys.modules, 'openai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_requests_carry_the_sdks_headers_and_the_organisation_from_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-42")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-7")
    complete(ModelClient(retry=FAST), make_role(server))
    monkeypatch.delenv("OPENAI_ORG_ID")
    monkeypatch.delenv("OPENAI_PROJECT_ID")
    complete(ModelClient(retry=FAST), make_role(server), seed=2)
    first, second = (r.headers for r in chat_requests(server))
    assert first["openai-organization"] == "org-42" and first["openai-project"] == "proj-7"
    assert "openai-organization" not in second and "openai-project" not in second
    assert first["content-type"] == "application/json"
    assert first["user-agent"] == "moot"
    assert "authorization" not in first  # the scripted server never logs credentials


def test_without_an_api_base_openai_base_url_is_the_endpoint_as_for_the_sdk(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    reply = complete(ModelClient(retry=FAST), Role("judge", parse_spec("openai/scripted")))
    assert reply.text and len(chat_requests(server)) == 1


def test_an_error_status_gives_the_servers_own_message_once(server: ScriptedServer) -> None:
    server.add_fault(Fault("400", match="bad request"))
    bad_request = [{"role": "user", "content": "bad request"}]
    with pytest.raises(ModelCallError) as bad:
        complete(ModelClient(retry=FAST), make_role(server), bad_request)
    assert bad.value.status == 400 and str(bad.value).startswith("openai/scripted: HTTP 400 from")
    nowhere = parse_spec("openai/scripted", api_base=server.url.removesuffix("/v1") + "/nowhere")
    with pytest.raises(ModelCallError, match="HTTP 404"):  # not retried
        complete(ModelClient(retry=FAST), Role("judge", nowhere))
    assert [r.status for r in server.requests] == [400, 404]


def test_unset_options_are_not_sent(server: ScriptedServer) -> None:
    complete(ModelClient(retry=FAST), make_role(server))
    body = chat_requests(server)[0].body
    assert body is not None
    assert "seed" not in body and "max_tokens" not in body and "stop" not in body


# --- retries -----------------------------------------------------------------


def test_429_with_retry_after_is_retried_honoured_and_counted(server: ScriptedServer) -> None:
    server.add_fault(Fault("429", times=1, retry_after=0.3))
    client = ModelClient(retry=FAST)

    start = time.monotonic()
    reply = complete(client, make_role(server))
    elapsed = time.monotonic() - start

    assert reply.text and reply.retries == 1
    assert [r.outcome for r in chat_requests(server)] == ["429", "ok"]
    assert elapsed >= 0.3  # Retry-After is a floor on the wait (backoff alone is <= 0.05 s)
    first, second = chat_requests(server)
    assert second.time - first.time >= 0.3
    assert total(client)["retries"] == 1
    assert total(client)["failures"] == 0


@pytest.mark.parametrize("kind", ["500", "503", "malformed", "truncated", "no_choices"])
def test_transient_failures_are_retried(server: ScriptedServer, kind: str) -> None:
    server.add_fault(Fault(kind, times=2))  # type: ignore[arg-type]
    client = ModelClient(retry=FAST)

    reply = complete(client, make_role(server))

    assert reply.text and reply.retries == 2
    assert [r.outcome for r in chat_requests(server)] == [kind, kind, "ok"]
    assert total(client)["retries"] == 2 and total(client)["calls"] == 1


def test_hang_past_timeout_is_retried(server: ScriptedServer) -> None:
    server.add_fault(Fault("hang", times=1, hang_seconds=5.0))
    client = ModelClient(retry=FAST)

    start = time.monotonic()
    reply = complete(client, make_role(server, timeout=0.3))

    assert time.monotonic() - start >= 0.3  # the first attempt was abandoned at the timeout
    assert reply.text and reply.retries == 1
    # The hung request is logged only when it answers; the retry was answered normally.
    assert [r.outcome for r in chat_requests(server)] == ["ok"]
    assert total(client)["retries"] == 1 and total(client)["failures"] == 0


def test_generic_400_is_not_retried(server: ScriptedServer) -> None:
    server.add_fault(Fault("400", times=5))
    client = ModelClient(retry=FAST)

    with pytest.raises(ModelCallError) as info:
        complete(client, make_role(server))

    assert info.value.status == 400 and not info.value.retryable
    assert not isinstance(info.value, ContextWindowExceeded)
    assert len(chat_requests(server)) == 1
    assert total(client)["failures"] == 1 and total(client)["retries"] == 0


def test_401_is_not_retried() -> None:
    with ScriptedServer(api_key="sk-server-only") as server:
        client = ModelClient(retry=FAST)
        with pytest.raises(ConfigError) as info:  # a wrong key stops the run (exit 2)
            complete(client, make_role(server))
        assert "authentication failed" in str(info.value) and "HTTP 401" in str(info.value)
        assert client.ledger.to_json()["total"]["failures"] == 1
        logged = chat_requests(server)
        assert len(logged) == 1 and logged[0].outcome == "unauthorized"


def test_retries_exhausted_raise_retryable_error() -> None:
    with ScriptedServer() as server:
        server.add_fault(Fault("503", times=100))
        client = ModelClient(retry=RetryPolicy(attempts=3, initial_wait=0.01, max_wait=0.05))
        with pytest.raises(ModelCallError) as info:
            complete(client, make_role(server))
        assert info.value.retryable and info.value.status == 503
        assert "3 attempts" in str(info.value)
        assert len(chat_requests(server)) == 3
        assert total(client)["failures"] == 1
        assert total(client)["calls"] == 1
        assert total(client)["retries"] == 2


def test_an_empty_reply_is_retried_then_a_failed_call_and_its_tokens_are_counted() -> None:
    with ScriptedServer(rules=[Rule("uniforms", " \n")]) as server:
        client = ModelClient(retry=RetryPolicy(attempts=2, initial_wait=0.01, max_wait=0.05))
        with pytest.raises(ModelCallError, match="empty reply from .* after 2 attempts"):
            complete(client, make_role(server))
        assert len(chat_requests(server)) == 2
    usage = total(client)
    assert usage["failures"] == 1 and usage["retries"] == 1
    assert usage["prompt_tokens"] == 2 * count_message_tokens(HELLO)  # both were paid for


def test_our_own_type_error_surfaces_as_itself_and_is_not_retried(server: ScriptedServer) -> None:
    client = ModelClient(retry=FAST)
    with pytest.raises(TypeError, match="not JSON serializable"):  # a bug, not a model failure
        complete(client, make_role(server), [{"role": "user", "content": object()}])
    assert chat_requests(server) == [] and total(client)["retries"] == 0


def test_the_timeout_bounds_a_reply_that_drips() -> None:
    with ScriptedServer() as server:
        server.add_fault(Fault("drip", times=1, drip_seconds=0.05))  # ~15 s for the whole body
        client = ModelClient(retry=FAST)
        start = time.monotonic()
        reply = complete(client, make_role(server, timeout=0.5))
        assert time.monotonic() - start < 3 and reply.retries == 1
        assert [r.outcome for r in chat_requests(server)] == ["drip", "ok"]


def test_a_lone_surrogate_is_replaced_and_the_reply_cached(tmp_path: Path) -> None:
    with ScriptedServer(rules=[Rule("uniforms", "bad \udc80 char \U0001f600")]) as server:
        client = ModelClient(cache=RequestCache(tmp_path / "c.sqlite"), retry=FAST)
        first, again = complete(client, make_role(server)), complete(client, make_role(server))
    assert first.text == again.text == "bad \ufffd char \U0001f600" and again.cached


# --- context window ----------------------------------------------------------


def test_server_context_length_exceeded_is_not_retried() -> None:
    with ScriptedServer(context_window=20) as server:
        client = ModelClient(retry=FAST)
        with pytest.raises(ContextWindowExceeded) as info:
            complete(client, make_role(server), max_tokens=100)
        assert not info.value.retryable
        logged = chat_requests(server)
        assert [r.outcome for r in logged] == ["context_length_exceeded"]
        assert total(client)["failures"] == 1


def test_spec_context_window_refuses_long_prompt_before_sending(server: ScriptedServer) -> None:
    long_prompt = [{"role": "user", "content": "word " * 400}]
    client = ModelClient(retry=FAST)

    with pytest.raises(ContextWindowExceeded) as info:
        complete(client, make_role(server, context_window=100), long_prompt)

    assert "100" in str(info.value)
    assert server.requests == []
    assert total(client)["failures"] == 1


def test_spec_context_window_clamps_max_tokens(server: ScriptedServer) -> None:
    client = ModelClient(retry=FAST)
    role = make_role(server, context_window=200)

    async def both() -> None:
        await client.complete(role, HELLO, stage="opening", max_tokens=5000)
        await client.complete(role, HELLO, stage="opening", max_tokens=10)

    asyncio.run(both())

    room = 200 - count_message_tokens(HELLO)
    sent = [r.body["max_tokens"] for r in chat_requests(server) if r.body]
    assert sent == [room, 10]


# --- cache -------------------------------------------------------------------


def test_second_identical_call_is_served_from_cache(server: ScriptedServer, tmp_path: Path) -> None:
    client = ModelClient(cache=RequestCache(tmp_path / "c.sqlite"), retry=FAST)
    role = make_role(server, temperature=0.5)

    async def run() -> list[Completion]:
        first = await client.complete(role, HELLO, stage="opening", seed=1, max_tokens=50)
        second = await client.complete(role, HELLO, stage="opening", seed=1, max_tokens=50)
        other_seed = await client.complete(role, HELLO, stage="opening", seed=2, max_tokens=50)
        hotter = Role(role.name, role.spec, 0.9)
        other_temp = await client.complete(hotter, HELLO, stage="opening", seed=1, max_tokens=50)
        return [first, second, other_seed, other_temp]

    first, second, other_seed, other_temp = asyncio.run(run())

    assert not first.cached and second.cached
    assert second.text == first.text
    assert (second.prompt_tokens, second.completion_tokens) == (
        first.prompt_tokens,
        first.completion_tokens,
    )
    assert not other_seed.cached and not other_temp.cached
    logged = chat_requests(server)
    assert [(r.body["seed"], r.body["temperature"]) for r in logged if r.body] == [
        (1, 0.5),
        (2, 0.5),
        (1, 0.9),
    ]
    ledger = total(client)
    assert ledger["cache_hits"] == 1 and ledger["calls"] == 4


def test_cache_persists_across_clients(server: ScriptedServer, tmp_path: Path) -> None:
    path = tmp_path / "cache" / "requests.sqlite"
    role = make_role(server)
    first = complete(ModelClient(cache=RequestCache(path), retry=FAST), role, seed=3)

    again_client = ModelClient(cache=RequestCache(path), retry=FAST)
    again = complete(again_client, role, seed=3)

    assert again.cached and again.text == first.text
    assert len(chat_requests(server)) == 1
    assert total(again_client)["cache_hits"] == 1


def test_failed_call_is_not_cached(server: ScriptedServer, tmp_path: Path) -> None:
    server.add_fault(Fault("500", times=2))
    cache = RequestCache(tmp_path / "c.sqlite")
    client = ModelClient(cache=cache, retry=RetryPolicy(attempts=2, initial_wait=0.01))
    role = make_role(server)

    async def run() -> tuple[int, Completion]:
        with pytest.raises(ModelCallError):
            await client.complete(role, HELLO, stage="opening")
        entries_after_failure = len(cache)
        return entries_after_failure, await client.complete(role, HELLO, stage="opening")

    entries_after_failure, reply = asyncio.run(run())

    assert entries_after_failure == 0
    assert not reply.cached
    assert [r.outcome for r in chat_requests(server)] == ["500", "500", "ok"]
    assert len(cache) == 1


# --- event loops -------------------------------------------------------------


@pytest.mark.parametrize("same_client", [True, False], ids=["same-client", "new-client"])
def test_sequential_event_loops_send_each_request_once(same_client: bool) -> None:
    with ScriptedServer() as server:
        role = make_role(server)
        first = ModelClient(retry=FAST)
        complete(first, role, seed=1)
        second = first if same_client else ModelClient(retry=FAST)
        retries_before = total(second)["retries"]
        reply = complete(second, role, seed=2)
        logged = chat_requests(server)
    # The stale connection is reset by the client; socketserver prints that traceback from a
    # handler thread, and CPython 3.11's ast (used by traceback and by pytest's reporting) is
    # not thread-safe: let those threads finish before this test's failure is formatted.
    for thread in threading.enumerate():
        if "process_request_thread" in thread.name:
            thread.join(timeout=10)

    assert len(logged) == 2
    assert reply.retries == 0 and total(second)["retries"] == retries_before


def test_prepare_then_two_event_loops_answer_every_request_once() -> None:
    """The CLI's order: `prepare` outside any loop, then one `asyncio.run` per pipeline."""
    with ScriptedServer(latency=0.05) as server:
        client = ModelClient(retry=FAST)
        role = make_role(server)
        client.prepare(role.spec)

        async def run(loop: int) -> list[Completion]:
            asks = [[{"role": "user", "content": f"loop {loop} q{i}"}] for i in range(3)]
            return await asyncio.gather(*(client.complete(role, a, stage="x") for a in asks))

        replies = asyncio.run(run(1)) + asyncio.run(run(2))
        logged = chat_requests(server)
    for thread in threading.enumerate():  # see test_sequential_event_loops_...
        if "process_request_thread" in thread.name:
            thread.join(timeout=10)
    assert len(logged) == 6 and all(r.text and r.retries == 0 for r in replies)
    assert total(client)["retries"] == 0


def test_a_local_model_is_loaded_once_across_prepare_and_event_loops(tmp_path: Path) -> None:
    import shutil

    from tests.tiny import tiny_llama

    folder = tiny_llama(tmp_path / "tiny", ["zoos", "are", "good", "bad"])
    role = Role("debater_a", parse_spec(f"hf/{folder}"), 1.0)  # at 0 it says nothing: a failure
    client = ModelClient()
    client.prepare(role.spec)  # loads the weights, as the CLI does before its event loop
    shutil.rmtree(folder)  # loading them again would now fail
    first = complete(client, role, max_tokens=3)
    second = complete(client, role, max_tokens=3, seed=1)
    assert first.completion_tokens == second.completion_tokens == 3
    assert first.prompt_tokens > 0 and total(client)["calls"] == 2


def test_a_local_models_empty_reply_fails_at_once(tmp_path: Path) -> None:
    from tests.tiny import tiny_llama

    folder = tiny_llama(tmp_path / "tiny", ["zoos", "are", "good", "bad"])
    client = ModelClient(retry=FAST)
    with pytest.raises(ModelCallError, match="empty reply from hf$"):  # greedy: only specials
        complete(client, Role("debater_a", parse_spec(f"hf/{folder}"), 0.0), max_tokens=3)
    assert total(client)["retries"] == 0  # seeded each call, it would say the same again


# --- concurrency -------------------------------------------------------------


def test_per_model_concurrency_bound() -> None:
    with ScriptedServer(latency=0.2) as server:
        client = ModelClient(retry=FAST)
        role = make_role(server, max_concurrency=2)

        async def run() -> list[Completion]:
            calls = [
                client.complete(role, [{"role": "user", "content": f"q{i}"}], stage="opening")
                for i in range(6)
            ]
            return await asyncio.gather(*calls)

        replies = asyncio.run(run())

        assert len(replies) == 6 and all(r.text for r in replies)
        arrivals = sorted(r.time for r in chat_requests(server))
        assert len(arrivals) == 6
        # With at most 2 in flight, request i+2 can only start once request i finished (0.2 s).
        for i in range(len(arrivals) - 2):
            assert arrivals[i + 2] - arrivals[i] >= 0.15


# --- credentials -------------------------------------------------------------


def _cache_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


def test_api_key_never_leaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    cache_path = tmp_path / "c.sqlite"
    with ScriptedServer(api_key=SECRET) as server:
        server.add_fault(Fault("400", match="bad request"))
        client = ModelClient(cache=RequestCache(cache_path), retry=FAST)
        role = make_role(server, api_key_env="MY_KEY")

        async def run() -> tuple[Completion, ModelCallError]:
            reply = await client.complete(role, HELLO, stage="opening")
            with pytest.raises(ModelCallError) as bad:
                bad_request = [{"role": "user", "content": "bad request"}]
                await client.complete(role, bad_request, stage="opening")
            return reply, bad.value

        reply, error = asyncio.run(run())

        logged = server.requests
        assert [r.authorized for r in logged] == [True, True]  # the key was sent
        assert reply.text
        assert SECRET not in repr(logged)
        assert SECRET.encode() not in _cache_bytes(cache_path)
        assert SECRET not in json.dumps(client.ledger.to_json())
        assert error.status == 400
        assert SECRET not in str(error) and SECRET not in repr(error)
        assert SECRET not in repr(role) and SECRET not in json.dumps(role.describe())


def test_credentials_in_the_api_base_never_reach_a_message() -> None:
    with ScriptedServer() as server:
        server.add_fault(Fault("400", match="bad request"))
        server.add_fault(Fault("500", times=9, match="server error"))
        url = server.url
        api_base = url.replace("http://", "http://user:sk-URL-SECRET@")
        spec = parse_spec("openai/scripted", api_base=api_base, timeout=5)
        client, role = ModelClient(retry=FAST), Role("judge", spec)
        messages = []
        for text in ("bad request", "server error"):
            with pytest.raises(ModelCallError) as failed:
                complete(client, role, [{"role": "user", "content": text}])
            messages.append(str(failed.value))
    with pytest.raises(EndpointError) as unreachable:  # the server is gone now
        check_reachable(api_base)
    messages.append(str(unreachable.value))
    assert all(url in m and "sk-URL-SECRET" not in m for m in messages), messages
    assert "sk-URL-SECRET" not in json.dumps(role.describe())


NO_DESCRIPTOR_LEFT = """
import os
from moot.core.llm.models import check_reachable
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    check_reachable("http://127.0.0.1:9/v1")
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "errno", None))
"""


def test_no_file_descriptor_left_is_the_machine_s_failure_not_the_endpoint_s() -> None:
    # an EndpointError is exit 2, "your --api-base is wrong"; EMFILE is the machine's (exit 1)
    done = subprocess.run(
        [sys.executable, "-c", NO_DESCRIPTOR_LEFT], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["OSError", "24"], done.stdout + done.stderr


def test_wrong_key_error_does_not_echo_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    with ScriptedServer(api_key="sk-other") as server:
        client = ModelClient(retry=FAST)
        with pytest.raises(ConfigError) as info:
            complete(client, make_role(server, api_key_env="MY_KEY"))
        assert "HTTP 401" in str(info.value)
        assert SECRET not in str(info.value)
        assert SECRET not in json.dumps(client.ledger.to_json())


def test_custom_api_base_never_gets_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("MOOT_API_KEY", raising=False)
    with ScriptedServer(api_key=SECRET) as server:
        spec = make_spec(server)
        assert resolve_api_key(spec) is None
        with pytest.raises(ConfigError, match="HTTP 401"):
            complete(ModelClient(retry=FAST), Role("judge", spec))
        logged = chat_requests(server)
        assert len(logged) == 1 and not logged[0].authorized
        assert logged[0].outcome == "unauthorized"


def test_moot_api_key_is_sent_to_custom_api_base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOOT_API_KEY", SECRET)
    with ScriptedServer(api_key=SECRET) as server:
        reply = complete(ModelClient(retry=FAST), make_role(server))
        assert reply.text
        assert [r.authorized for r in chat_requests(server)] == [True]


def test_missing_openai_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    spec = parse_spec("openai/gpt-4o-mini")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve_api_key(spec)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        ModelClient().prepare(spec)


def test_missing_custom_key_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    spec = parse_spec("openai/x", api_base="http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    with pytest.raises(ConfigError, match="MY_KEY"):
        resolve_api_key(spec)


# --- reachability ------------------------------------------------------------


def test_prepare_unreachable_api_base_raises_endpoint_error() -> None:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    url = f"http://127.0.0.1:{port}/v1"

    with pytest.raises(EndpointError) as info:
        ModelClient().prepare(parse_spec("openai/scripted", api_base=url))

    assert url in str(info.value)


def test_prepare_reachable_api_base_passes(server: ScriptedServer) -> None:
    ModelClient().prepare(make_spec(server))  # raises on failure
    assert chat_requests(server) == []  # a TCP probe, not a billed request


# --- structured output -------------------------------------------------------


class Verdict(BaseModel):
    winner: str
    score: int


ASK = [{"role": "user", "content": "Who won the debate? Answer as JSON."}]


def structured(client: ModelClient, role: Role) -> Any:
    return asyncio.run(client.complete_structured(role, ASK, Verdict, stage="judge"))


def test_structured_valid_json(server: ScriptedServer) -> None:
    server.add_rule(Rule("Who won", '{"winner": "A", "score": 8}'))
    result = structured(ModelClient(retry=FAST), make_role(server))
    assert result.ok and result.failure is None
    assert result.value == Verdict(winner="A", score=8)
    (logged,) = chat_requests(server)
    assert logged.body is not None
    assert logged.body["response_format"]["type"] == "json_schema"


def test_structured_prose_wrapped_and_fenced(server: ScriptedServer) -> None:
    server.add_rule(
        Rule("Who won", 'My verdict:\n```json\n{"winner": "B", "score": 6}\n```\nDone.')
    )
    result = structured(ModelClient(retry=FAST), make_role(server))
    assert result.ok and result.value == Verdict(winner="B", score=6)
    assert len(chat_requests(server)) == 1


@pytest.mark.parametrize(
    "reply",
    [
        '{"winner": "B", "score": 6, "close": false,}',  # trailing comma beside a JSON literal
        "{'winner': 'B', 'score': 6, 'notes': null}",  # single quotes beside a JSON literal
        '{"winner": "B", "score": 6\n\nB answered every point.',  # unclosed brace
    ],
)
def test_structured_json_slips_cost_no_repair_round(server: ScriptedServer, reply: str) -> None:
    server.add_rule(Rule("could not be read", '{"winner": "A", "score": 1}', role="last"))
    server.add_rule(Rule("Who won", reply, role="last"))
    client = ModelClient(retry=FAST)
    result = structured(client, make_role(server))
    assert result.ok and result.value == Verdict(winner="B", score=6)
    assert len(chat_requests(server)) == 1
    assert {row["stage"] for row in client.ledger.to_json()["by_role"]} == {"judge"}


def test_structured_repair_round(server: ScriptedServer) -> None:
    server.add_rule(Rule("could not be read", '{"winner": "B", "score": 4}', role="last"))
    server.add_rule(Rule("Who won", "Debater B clearly won.", role="last"))
    client = ModelClient(retry=FAST)

    result = structured(client, make_role(server))

    assert result.ok and result.value == Verdict(winner="B", score=4)
    first, second = chat_requests(server)
    assert first.body is not None and second.body is not None
    assert second.body["messages"][: len(ASK)] == ASK
    assert second.body["messages"][-2] == {"role": "assistant", "content": "Debater B clearly won."}
    assert "could not be read" in second.body["messages"][-1]["content"]
    stages = {row["stage"] for row in client.ledger.to_json()["by_role"]}
    assert stages == {"judge", "judge:repair"}


def test_structured_failure_is_explicit(server: ScriptedServer) -> None:
    server.add_rule(Rule("could not be read", "Still no JSON, sorry.", role="last"))
    server.add_rule(Rule("Who won", '{"winner": "B", "score": "high"}', role="last"))

    result = structured(ModelClient(retry=FAST), make_role(server))

    assert not result.ok and result.value is None
    assert isinstance(result.failure, ParseFailure)
    assert result.failure.raw == "Still no JSON, sorry." == result.raw
    assert result.failure.repaired
    assert len(chat_requests(server)) == 2
    repair_prompt = chat_requests(server)[1].body["messages"][-1]["content"]  # type: ignore[index]
    assert "score" in repair_prompt  # the first parse error is shown to the model


def test_max_length_is_refused_for_a_server_model_before_any_request(server):
    role = Role("generator", parse_spec("openai/m", api_base=server.url), 0.0)
    client = ModelClient()
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ConfigError, match="max_length is for local models"):
        asyncio.run(client.complete(role, messages, stage="generate", max_length=64))
    assert not server.requests


def test_a_key_in_a_cached_reply_of_an_earlier_version_is_redacted_on_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", SECRET)  # its name is not a secret's: sending() marks it
    path = tmp_path / "c.sqlite"
    with ScriptedServer(api_key=SECRET) as server:
        role = make_role(server, api_key_env="MY_SERVER_KEY")
        first = complete(ModelClient(cache=RequestCache(path), retry=FAST), role)
    with sqlite3.connect(path) as db:  # as a version that did not redact replies cached it
        db.execute("UPDATE responses SET value = json_set(value, '$.text', ?)", (f"k={SECRET}",))
    again = complete(ModelClient(cache=RequestCache(path), retry=FAST), role)
    assert again.cached and first.text != again.text == "k=[redacted]"


# --- the HTTP under the SDK (core/llm/transports/http.py) ---------------------


def test_each_event_loop_closes_its_connections_as_it_ends(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    # aiohttp warns of a session left open ("Unclosed client session") when it is collected
    import gc

    client, role = ModelClient(retry=FAST), make_role(server)
    with caplog.at_level("ERROR", logger="asyncio"):
        for seed in (1, 2):
            complete(client, role, seed=seed)
        gc.collect()
    assert len(chat_requests(server)) == 2
    assert not [r.getMessage() for r in caplog.records], caplog.text


def test_the_environments_proxy_carries_the_requests_unless_no_proxy_names_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the scripted server as the proxy: an endpoint that refuses connections is reached through it
    with refused_url() as nowhere, ScriptedServer() as proxy:
        role = Role("debater_a", parse_spec("openai/scripted", api_base=nowhere, timeout=5), 0.0)
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/v1"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert complete(ModelClient(retry=FAST), role).text
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        with pytest.raises(ModelCallError, match="cannot connect to"):
            complete(ModelClient(retry=RetryPolicy(attempts=1)), role)
        assert len(chat_requests(proxy)) == 1
