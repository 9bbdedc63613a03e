"""The batch queue and its journal (`moot.core.llm.batch`) against the scripted Batch API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai

from moot.core.llm.batch import BatchBook, BatchQueue
from moot.core.llm.spec import parse_spec
from moot.core.llm.transports.replies import json_objects
from moot.testing import ScriptedServer

HELLO = [{"role": "user", "content": "Say hello."}]


def batch_api(server: ScriptedServer):
    spec = parse_spec("openai/scripted", api_base=server.url)
    return spec.transport_class.connect(spec).batches()


def test_the_journal_reads_back_what_it_wrote_and_skips_a_torn_last_line(tmp_path):
    path = tmp_path / ".moot" / "batches.jsonl"
    book = BatchBook(path, {"argv": ["debate"], "cwd": "/here"})
    first = book.intend("openai", "m", ["k1", "k2"])
    book.made(first, "batch_1")
    second = book.intend("openai", "m", ["k2", "k3"])
    book.drop(second)
    with path.open("a") as out:
        out.write('{"intent": "torn", "keys": ["k')  # a kill mid-write
    again = BatchBook(path)
    assert again.command == {"argv": ["debate"], "cwd": "/here"}
    assert again.holding("k1").batch == "batch_1"
    assert again.holding("k2") is None and again.holding("k3") is None  # dropped: asked anew
    BatchBook(path, {"argv": ["debate", "--no-wait"], "cwd": "/here"}).intend("openai", "m", [])
    assert BatchBook(path).command["argv"] == ["debate", "--no-wait"]  # the last run's


def test_a_batch_recorded_without_its_id_is_found_by_its_intent_not_submitted_again(tmp_path):
    with ScriptedServer(batch_polls=0) as server:
        api = batch_api(server)
        body = api.body(HELLO, {"max_tokens": 8})
        journal = tmp_path / "batches.jsonl"
        entry = BatchBook(journal).intend("openai", "scripted", ["k1"])  # killed before its id
        sdk = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0)
        line = {"custom_id": "k1", "method": "POST", "url": "/v1/chat/completions", "body": body}
        upload = sdk.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch")
        made = sdk.batches.create(
            input_file_id=upload.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"moot_intent": entry.intent},
        )
        queue = BatchQueue(BatchBook(journal), poll=0.01)
        reply = asyncio.run(queue.answer(api, "k1", body))
        live = sdk.chat.completions.create(**body).choices[0].message.content
        assert len(server.batch_lines) == 1 and queue.submitted == 0
    assert reply.text == live
    assert BatchBook(journal).holding("k1").batch == made.id


def test_a_batch_the_provider_never_made_is_dropped_and_its_requests_submitted(tmp_path):
    with ScriptedServer(batch_polls=0) as server:
        api = batch_api(server)
        body = api.body(HELLO, {"max_tokens": 8})
        journal = tmp_path / "batches.jsonl"
        lost = BatchBook(journal).intend("openai", "scripted", ["k1"])
        queue = BatchQueue(BatchBook(journal), poll=0.01)
        reply = asyncio.run(queue.answer(api, "k1", body))
        assert [line.custom_id for line in server.batch_lines] == ["k1"]
    assert reply.text.strip() and queue.submitted == 1
    records = [json.loads(line) for line in Path(journal).read_text().splitlines()]
    assert {"intent": lost.intent, "dropped": True} in records
    assert BatchBook(journal).holding("k1").intent != lost.intent


def test_a_results_line_that_is_not_a_json_object_is_skipped_not_trusted():
    text = '{"custom_id": "k1"}\n<html>proxy error\n[1, 2]\n\n{"custom_id": "k2"}'
    assert [line["custom_id"] for line in json_objects(text)] == ["k1", "k2"]
