"""Reading DEBATunE responses: both shapes, and one precise error for each bad record."""

from __future__ import annotations

import json

import pytest

from moot.core.data.responses import load_responses
from moot.core.errors import InputError


def record(**fields: object) -> dict[str, object]:
    base = {"topic": "t", "side": "affirmative", "argument": "a", "instruction": "i"}
    return {**base, "response": "r", **fields}


def sft(messages: object) -> dict[str, object]:
    return {"topic": "t", "stance": "Affirmative", "argument": "a", "messages": messages}


def test_sft_records_load_from_messages_or_prompt_and_completion(tmp_path):
    chat = [{"role": "user", "content": "Argue"}, {"role": "assistant", "content": "Because"}]
    path = tmp_path / "dataset.jsonl"
    rows = [sft(chat), {**sft(chat), "argument": "b", "stance": "Negative"}]
    rows[1].pop("messages")
    rows[1].update(prompt="Argue no", completion="Because not")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = load_responses(path)
    assert [(r.side, r.instruction, r.response) for r in loaded] == [
        ("affirmative", "Argue", "Because"),
        ("negative", "Argue no", "Because not"),
    ]


@pytest.mark.parametrize(
    ("records", "where", "problem"),
    [
        (["just a topic"], "index 0", "expected an object, got text"),
        ([record(side="pro")], "index 0", "side must be affirmative or negative, got 'pro'"),
        ([record(response=" ")], "index 0", "empty response"),
        ([{"topic": "t", "argument": "a"}], "index 0", "missing field 'side'"),
        (
            [record(), record(argument="b", response=5)],
            "index 1",
            "'response' must be text, got a number",
        ),
        ([record(response=["a", "b"])], "index 0", "'response' must be text, got a list"),
        ([record(argument=None)], "index 0", "'argument' must be text, got null"),
        ([record(topic=True)], "index 0", "'topic' must be text, got a boolean"),
        ([record(side={"x": 1})], "index 0", "'side' must be text, got an object"),
        ([sft(["hi", "there"])], "index 0", "messages[0] must be an object, got text"),
        ([sft("hello")], "index 0", "'messages' must be a list, got text"),
        ([sft([{"role": "user"}])], "index 0", "missing messages[0].content"),
        ([sft([{"role": "user", "content": 3}])], "index 0", "messages[0].content must be text"),
        ([sft([{"role": "user", "content": "x"}])], "index 0", "'messages' has no assistant"),
        (
            [record(), record(side="Affirmative")],
            "index 1",
            "same topic, side and argument as index 0",
        ),
    ],
)
def test_a_bad_record_is_named_with_its_problem(records, where, problem, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(records))
    with pytest.raises(InputError) as error:
        load_responses(path)
    assert str(error.value).startswith(f"{path}, {where}: {problem}")


def test_a_bad_jsonl_line_is_named_by_its_line_in_the_file(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record()) + "\n\n" + '{"topic": }\n')
    with pytest.raises(InputError) as error:
        load_responses(path)
    assert str(error.value) == f"{path}, line 3: invalid JSON: Expecting value (column 11)"
