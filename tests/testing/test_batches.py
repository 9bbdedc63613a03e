"""The scripted server's Files and Batches API, through the real `openai` SDK."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from moot.testing import BatchLine, Fault, Rule, ScriptedServer, ServerConfig

ENDPOINT = "/v1/chat/completions"
ENDED = ("completed", "expired", "failed", "cancelled")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(api_key="sk-batch") as running:
        yield running


def client(server: ScriptedServer, key: str = "sk-batch") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=5)


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def line(custom_id: str, request: dict[str, Any], url: str = ENDPOINT) -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": request}


def submit(api: openai.OpenAI, lines: list[dict[str, Any]], **metadata: str) -> Any:
    data = "".join(json.dumps(item) + "\n" for item in lines).encode()
    uploaded = api.files.create(file=("requests.jsonl", io.BytesIO(data)), purpose="batch")
    return api.batches.create(
        input_file_id=uploaded.id,
        endpoint=ENDPOINT,
        completion_window="24h",
        metadata=metadata or None,
    )


def wait(api: openai.OpenAI, batch_id: str) -> tuple[Any, list[Any]]:
    """Retrieve until the batch ends; returns it and the batches every retrieve saw."""
    seen = [api.batches.retrieve(batch_id)]
    while seen[-1].status not in ENDED:
        seen.append(api.batches.retrieve(batch_id))
    return seen[-1], seen


def results(api: openai.OpenAI, file_id: str | None) -> dict[str, Any]:
    if file_id is None:
        return {}
    rows = [json.loads(row) for row in api.files.content(file_id).text.splitlines()]
    return {row["custom_id"]: row for row in rows}


def test_a_completed_batch_answers_as_live_requests_after_its_polls() -> None:
    rule = Rule(r"^ruled", "scripted {n}")
    requests = [body("ruled"), body("free", seed=3), body("short", max_tokens=4), body("ruled")]
    with ScriptedServer(rules=[rule], batch_polls=3) as live, ScriptedServer(rules=[rule]) as batch:
        expected = [
            client(live, "any")
            .chat.completions.with_raw_response.create(**request)
            .http_response.json()
            for request in requests
        ]
        api = client(batch, "any")
        lines = [line(f"r{index}", request) for index, request in enumerate(requests)]
        created = submit(api, lines)
        done, seen = wait(api, created.id)
        output = results(api, done.output_file_id)

    assert created.status == "validating" and created.request_counts.total == 0
    assert [b.status for b in seen] == ["in_progress"] * 2 + ["completed"]
    assert [b.request_counts.completed for b in seen] == [0, 2, 4]
    assert done.request_counts.model_dump() == {"total": 4, "completed": 4, "failed": 0}
    assert done.error_file_id is None and done.errors is None
    assert done.in_progress_at and done.completed_at and done.expires_at
    assert list(output) == ["r0", "r1", "r2", "r3"]
    for custom_id, reply in zip(output, expected, strict=True):
        row = output[custom_id]
        assert row["id"].startswith("batch_req_") and row["error"] is None
        assert row["response"]["status_code"] == 200 and row["response"]["request_id"]
        answer = row["response"]["body"]
        assert answer["choices"] == reply["choices"] and answer["usage"] == reply["usage"]
    assert output["r3"]["response"]["body"]["choices"][0]["message"]["content"] == "scripted 1"
    assert [(x.batch_id, x.custom_id, x.body) for x in batch.batch_lines] == [
        (created.id, item["custom_id"], item["body"]) for item in lines
    ]
    assert not live.batch_lines


def test_faulted_and_expired_lines_go_to_the_error_file_and_the_batch_expires() -> None:
    faults = [
        Fault("500", match="^boom"),
        Fault("batch_expired", match="^late", times=1),
        Fault(
            "hang", match="^late", hang_seconds=0.01
        ),  # transport faults never touch a batch line
    ]
    with ScriptedServer(faults=faults, batch_polls=0) as server:
        api = client(server)
        lines = [line(name, body(name)) for name in ("ok", "boom", "late", "late-again")]
        created = submit(api, lines)
        done = api.batches.retrieve(created.id)
        errors = results(api, done.error_file_id)
        output = results(api, done.output_file_id)
        chat = api.chat.completions.create(**body("late"))  # the hang still waits for live ones

    assert done.status == "expired" and done.expired_at and done.completed_at is None
    assert done.request_counts.model_dump() == {"total": 4, "completed": 2, "failed": 2}
    assert list(output) == ["ok", "late-again"]
    boom = errors["boom"]
    assert boom["error"] is None and boom["response"]["status_code"] == 500
    assert boom["response"]["body"]["error"]["type"] == "server_error"
    assert errors["late"]["response"] is None
    assert errors["late"]["error"]["code"] == "batch_expired"
    assert chat.choices[0].message.content
    assert [r.outcome for r in server.requests if r.path == ENDPOINT] == ["hang"]


def test_a_live_request_never_takes_a_batch_expired_fault() -> None:
    with ScriptedServer(faults=[Fault("batch_expired")], batch_polls=0) as server:
        api = client(server)
        assert api.chat.completions.create(**body("x")).choices[0].message.content
        done = api.batches.retrieve(submit(api, [line("a", body("x"))]).id)
    assert done.status == "expired" and done.output_file_id is None


@pytest.mark.parametrize(
    ("lines", "code", "number"),
    [
        ([line("a", body("x")), line("a", body("y"))], "duplicate_custom_id", 2),
        ([line("a", body("x")), line("b", body("y"), url="/v1/embeddings")], "url_mismatch", 2),
        ([line("a", body("x")), "not json"], "invalid_json_line", 2),
    ],
)
def test_an_invalid_file_fails_the_batch_at_its_first_retrieve(
    server: ScriptedServer, lines: list[Any], code: str, number: int
) -> None:
    api = client(server)
    data = "".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in lines)
    uploaded = api.files.create(file=("bad.jsonl", data.encode()), purpose="batch")
    created = api.batches.create(
        input_file_id=uploaded.id, endpoint=ENDPOINT, completion_window="24h"
    )
    failed = api.batches.retrieve(created.id)

    assert created.status == "validating"
    assert failed.status == "failed" and failed.failed_at
    assert [(e.code, e.line) for e in failed.errors.data] == [(code, number)]
    assert failed.output_file_id is None and failed.error_file_id is None
    assert api.batches.retrieve(created.id).status == "failed"
    assert not any(r.path == ENDPOINT for r in server.requests)


def test_an_unknown_input_file_fails_the_batch(server: ScriptedServer) -> None:
    api = client(server)
    created = api.batches.create(
        input_file_id="file-missing", endpoint=ENDPOINT, completion_window="24h"
    )
    failed = api.batches.retrieve(created.id)
    assert failed.status == "failed" and failed.errors.data[0].code == "file_not_found"
    with pytest.raises(openai.NotFoundError):
        api.files.content("file-missing")
    with pytest.raises(openai.NotFoundError):
        api.batches.retrieve("batch_missing")
    with pytest.raises(openai.BadRequestError):
        api.batches.create(
            input_file_id=created.id, endpoint="/v1/embeddings", completion_window="24h"
        )


def test_batches_list_newest_first_with_their_metadata_a_page_at_a_time(
    server: ScriptedServer,
) -> None:
    api = client(server)
    ids = [submit(api, [line("a", body(str(n)))], run=str(n)).id for n in range(5)]

    first = api.batches.list(limit=2)
    everything = list(api.batches.list(limit=2))  # the paginator follows `after`

    assert [b.id for b in first.data] == ids[::-1][:2] and first.has_more
    assert [b.id for b in everything] == ids[::-1]
    assert [b.metadata for b in everything] == [{"run": str(n)} for n in reversed(range(5))]
    last = api.batches.list(after=ids[1])
    assert [b.id for b in last.data] == [ids[0]] and not last.has_more
    lists = [r for r in server.requests if r.path == "/v1/batches" and r.body is None]
    assert len(lists) == 5  # 1 + 3 pages + 1


def test_a_cancelled_batch_keeps_its_answered_lines_and_cancels_the_rest() -> None:
    with ScriptedServer(batch_polls=2) as server:
        api = client(server)
        created = submit(api, [line(f"r{n}", body(str(n))) for n in range(4)])
        api.batches.retrieve(created.id)  # in_progress, none answered
        api.batches.retrieve(created.id)  # in_progress, half answered
        cancelling = api.batches.cancel(created.id)
        cancelled = api.batches.retrieve(created.id)
        with pytest.raises(openai.APIStatusError) as refused:
            api.batches.cancel(created.id)
        output = results(api, cancelled.output_file_id)
        errors = results(api, cancelled.error_file_id)

    assert cancelling.status == "cancelling" and cancelling.cancelling_at
    assert cancelled.status == "cancelled" and cancelled.cancelled_at
    assert cancelled.request_counts.model_dump() == {"total": 4, "completed": 2, "failed": 2}
    assert list(output) == ["r0", "r1"]
    assert {row["error"]["code"] for row in errors.values()} == {"batch_cancelled"}
    assert list(errors) == ["r2", "r3"]
    assert refused.value.status_code == 409


def test_the_files_and_batches_api_needs_the_key(server: ScriptedServer) -> None:
    api = client(server)
    uploaded = api.files.create(file=("in.jsonl", b"a\r\nb\n\x00"), purpose="batch")
    assert uploaded.purpose == "batch" and uploaded.bytes == 6 and uploaded.status == "processed"
    assert api.files.retrieve(uploaded.id).filename == "in.jsonl"
    assert api.files.content(uploaded.id).content == b"a\r\nb\n\x00"
    stranger = client(server, key="sk-wrong")
    for call in (
        lambda: stranger.files.create(file=("in.jsonl", b"{}"), purpose="batch"),
        lambda: stranger.files.content(uploaded.id),
        lambda: stranger.batches.list(),
        lambda: stranger.batches.create(
            input_file_id=uploaded.id, endpoint=ENDPOINT, completion_window="24h"
        ),
    ):
        with pytest.raises(openai.AuthenticationError):
            call()
    assert not server.batch_lines
    assert [r.outcome for r in server.requests[-4:]] == ["unauthorized"] * 4


def test_batch_settings_travel_in_the_config() -> None:
    config = ServerConfig(batch_polls=5, faults=[Fault("batch_expired", match="x")])
    assert ServerConfig.from_json(config.to_json()) == config
    assert BatchLine("batch_1", "a", None).custom_id == "a"
