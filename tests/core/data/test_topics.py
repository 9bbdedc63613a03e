"""Loading debate topics from JSON, JSONL, CSV and `datasets` folders."""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moot.core.data.topics import Topic, load_topics
from moot.core.errors import InputError
from tests.conftest import shared_data

AFF = ["Uniforms reduce bullying.", "Uniforms save parents money.", "Uniforms build identity."]
NEG = ["Uniforms limit expression.", "Uniforms cost schools money.", "Uniforms do not help grades."]
RECORDS = [
    {
        "topic": "Should schools require uniforms?",
        "Affirmative": {"arguments": AFF},
        "Negative": {"arguments": NEG},
    },
    {
        "topic": "Is  remote work\tbetter than office work?",
        "Affirmative": {"arguments": ["No commute.", "Flexible hours.", "Fewer meetings."]},
        "Negative": {"arguments": ["Isolation.", "Weaker mentoring.", "Blurred boundaries."]},
    },
]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(path: Path, records: list[Any]) -> str:
    return write(path, "".join(json.dumps(r) + "\n" for r in records))


def load_error(source: str) -> str:
    with pytest.raises(InputError) as info:
        load_topics(source)
    return str(info.value)


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep `datasets`' own cache inside the test's folder."""
    import datasets.config

    folder = tmp_path / "hf-datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", folder)
    return folder


# --- accepted formats --------------------------------------------------------


def test_json_list_of_strings(tmp_path: Path) -> None:
    source = write(tmp_path / "topics.json", json.dumps(["Tax sugar?", "  Ban   cars? "]))
    assert load_topics(source) == [Topic("Tax sugar?"), Topic("Ban cars?")]


def test_json_list_of_records(tmp_path: Path) -> None:
    source = write(tmp_path / "topics.json", json.dumps([{"topic": "Tax sugar?"}, "Ban cars?"]))
    assert [t.topic for t in load_topics(source)] == ["Tax sugar?", "Ban cars?"]


def test_debatune_arg_jsonl(tmp_path: Path) -> None:
    topics = load_topics(jsonl(tmp_path / "debate_test_v1_arg.jsonl", RECORDS))

    assert len(topics) == 2
    first, second = topics
    assert first.topic == "Should schools require uniforms?"
    assert first.arguments == {"Affirmative": tuple(AFF), "Negative": tuple(NEG)}
    assert second.topic == "Is remote work better than office work?"  # whitespace normalised
    assert second.arguments is not None and len(second.arguments["Negative"]) == 3


def test_jsonl_with_blank_lines_and_bom(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"topic": "One?"}\n\n   \n{"topic": "Two?"}\n')
    assert [t.topic for t in load_topics(str(path))] == ["One?", "Two?"]


def test_csv_with_topic_column(tmp_path: Path) -> None:
    source = write(tmp_path / "topics.csv", 'topic\nTax sugar?\n"Ban cars, trucks?"\n')
    assert load_topics(source) == [Topic("Tax sugar?"), Topic("Ban cars, trucks?")]


def test_csv_with_empty_argument_columns(tmp_path: Path) -> None:
    source = write(tmp_path / "topics.csv", "topic,Affirmative,Negative\nTax sugar?,,\n")
    assert load_topics(source) == [Topic("Tax sugar?")]


def test_dataset_saved_to_disk(tmp_path: Path, hf_cache: Path) -> None:
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"topic": ["Tax sugar?", "Ban cars?", "Tax sugar?"]}).save_to_disk(
        str(folder)
    )
    assert load_topics(str(folder)) == [Topic("Tax sugar?"), Topic("Ban cars?")]


def test_dataset_dict_saved_to_disk_prefers_train(tmp_path: Path, hf_cache: Path) -> None:
    import datasets

    folder = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "test": datasets.Dataset.from_dict({"topic": ["Held out?"]}),
            "train": datasets.Dataset.from_dict({"topic": ["Tax sugar?"]}),
        }
    ).save_to_disk(str(folder))
    assert load_topics(str(folder)) == [Topic("Tax sugar?")]


def test_folder_with_csv_through_load_dataset(tmp_path: Path, hf_cache: Path) -> None:
    folder = tmp_path / "csv-folder"
    folder.mkdir()
    write(folder / "data.csv", "topic,source\nTax sugar?,web\nBan cars?,web\n")
    assert load_topics(str(folder)) == [Topic("Tax sugar?"), Topic("Ban cars?")]


def test_real_debatune_test_file() -> None:
    path = shared_data("debatune", "Debate_topic_arguments", "debate_test_v1_arg.jsonl")
    topics = load_topics(str(path))

    assert len(topics) == 80
    assert topics[0].topic == "Does Iran Remain a Threat?"
    for topic in topics:
        assert topic.arguments is not None
        assert set(topic.arguments) == {"Affirmative", "Negative"}
        assert all(len(args) == 3 for args in topic.arguments.values())
        assert all(arg and arg == arg.strip() for args in topic.arguments.values() for arg in args)


def test_duplicates_are_dropped_keeping_the_first(tmp_path: Path) -> None:
    first = {**RECORDS[0]}
    again = {"topic": "Should  schools require uniforms?"}  # same after normalising whitespace
    topics = load_topics(jsonl(tmp_path / "t.jsonl", [first, RECORDS[1], again]))
    assert [t.topic for t in topics] == [
        RECORDS[0]["topic"],
        "Is remote work better than office work?",
    ]
    assert topics[0].arguments is not None


# --- rejected inputs ---------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    source = str(tmp_path / "nope.jsonl")
    message = load_error(source)
    assert source in message and "not found" in message


@pytest.mark.parametrize("content", ["", "   \n\t\n  "])
def test_empty_or_whitespace_file(tmp_path: Path, content: str) -> None:
    source = write(tmp_path / "topics.jsonl", content)
    message = load_error(source)
    assert source in message and "empty" in message


def test_malformed_json_line_names_the_line(tmp_path: Path) -> None:
    source = write(tmp_path / "t.jsonl", '{"topic": "One?"}\n\n{"topic": "Two?",\n')
    message = load_error(source)
    assert source in message and "line 3" in message and "invalid JSON" in message


def test_malformed_json_list(tmp_path: Path) -> None:
    source = write(tmp_path / "t.json", '["One?", "Two?"')
    message = load_error(source)
    assert source in message and "invalid JSON" in message


def test_unknown_column_names_record(tmp_path: Path) -> None:
    source = jsonl(tmp_path / "t.jsonl", [{"topic": "One?"}, {"topic": "Two?", "motion": "x"}])
    message = load_error(source)
    assert source in message and "'motion'" in message and "line 2" in message


def test_unknown_csv_column(tmp_path: Path) -> None:
    source = write(tmp_path / "t.csv", "topic,motion\nOne?,x\n")
    message = load_error(source)
    assert source in message and "'motion'" in message and "line 2" in message


def test_missing_topic_column(tmp_path: Path) -> None:
    record = {"Affirmative": {"arguments": AFF}, "Negative": {"arguments": NEG}}
    source = jsonl(tmp_path / "t.jsonl", [{"topic": "One?"}, record])
    message = load_error(source)
    assert source in message and "missing 'topic'" in message and "line 2" in message


def test_dataset_without_topic_column(tmp_path: Path, hf_cache: Path) -> None:
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"question": ["Tax sugar?"]}).save_to_disk(str(folder))
    message = load_error(str(folder))
    assert str(folder) in message and "no 'topic' column" in message and "question" in message


@pytest.mark.parametrize("blank", ["", "   "])
def test_empty_topic_names_record(tmp_path: Path, blank: str) -> None:
    source = write(tmp_path / "t.json", json.dumps(["One?", blank]))
    message = load_error(source)
    assert source in message and "empty topic" in message and "index 1" in message


def test_empty_topic_in_csv_names_line(tmp_path: Path) -> None:
    source = write(tmp_path / "t.csv", 'topic\nOne?\n""\nThree?\n')
    message = load_error(source)
    assert source in message and "empty topic" in message and "line 3" in message


def test_non_utf8_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"topic": "Caf\xe9 culture?"}\n')
    message = load_error(str(path))
    assert str(path) in message and "UTF-8" in message and "0xe9" in message


@pytest.mark.parametrize(
    "stance_value",
    [{"args": AFF}, {"arguments": []}, {"arguments": "one string"}, "not an object"],
)
def test_stance_without_arguments_list(tmp_path: Path, stance_value: Any) -> None:
    record = {"topic": "One?", "Affirmative": stance_value, "Negative": {"arguments": NEG}}
    source = jsonl(tmp_path / "t.jsonl", [record])
    message = load_error(source)
    assert source in message and "'Affirmative'" in message and "line 1" in message


def test_one_stance_missing_its_arguments(tmp_path: Path) -> None:
    source = jsonl(tmp_path / "t.jsonl", [{"topic": "One?", "Affirmative": {"arguments": AFF}}])
    message = load_error(source)
    assert "'Negative'" in message and "arguments" in message


def test_empty_argument_string(tmp_path: Path) -> None:
    record = {
        "topic": "One?",
        "Affirmative": {"arguments": ["ok", " "]},
        "Negative": {"arguments": NEG},
    }
    message = load_error(jsonl(tmp_path / "t.jsonl", [record]))
    assert "'Affirmative'" in message and "empty" in message


def test_non_topic_item(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "t.json", json.dumps(["One?", 42])))
    assert "index 1" in message and "got a number" in message


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"topic": 5}, "'topic' must be text, got a number"),
        ({"topic": ["A", "B"]}, "'topic' must be text, got a list"),
        ({"topic": None}, "'topic' must be text, got null"),
        (
            {"topic": "A", "Affirmative": {"arguments": "one"}, "Negative": {"arguments": NEG}},
            "'Affirmative': 'arguments' must be a list, got text",
        ),
        (
            {"topic": "A", "Affirmative": ["x"], "Negative": {"arguments": NEG}},
            "'Affirmative' must be an object with an 'arguments' list, got a list",
        ),
        (
            {"topic": "A", "Affirmative": {"arguments": AFF}, "Negative": {"arguments": ["x", 7]}},
            "'Negative' argument 2 must be text, got a number",
        ),
    ],
)
def test_wrong_types_are_named_not_called_missing(
    tmp_path: Path, record: dict[str, Any], problem: str
) -> None:
    source = jsonl(tmp_path / "t.jsonl", [{"topic": "One?"}, record])
    assert load_error(source) == f"{source}, line 2: {problem}"


def test_dataset_topic_column_of_numbers(tmp_path: Path, hf_cache: Path) -> None:
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"topic": [5, 6]}).save_to_disk(str(folder))
    assert load_error(str(folder)) == f"{folder}, row 0: 'topic' must be text, got a number"


# --- hub names ---------------------------------------------------------------

_NETWORK_EVENTS: list[tuple[str, Any]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _NETWORK_EVENTS is not None and event in ("socket.connect", "socket.getaddrinfo"):
        _NETWORK_EVENTS.append((event, args))


sys.addaudithook(_audit)


@pytest.fixture
def network_events() -> Iterator[list[tuple[str, Any]]]:
    """Records socket connects and DNS lookups (an audit hook; nothing is patched)."""
    global _NETWORK_EVENTS
    _NETWORK_EVENTS = []
    try:
        yield _NETWORK_EVENTS
    finally:
        _NETWORK_EVENTS = None


def _is_loopback(event: tuple[str, Any]) -> bool:
    name, args = event
    if name == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else None  # None: a Unix socket
    else:
        host = args[0].decode() if isinstance(args[0], bytes) else args[0]
    if not isinstance(host, str):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def test_unknown_hub_dataset_offline(hf_cache: Path, network_events: list[tuple[str, Any]]) -> None:
    message = load_error("nobody/no-such-dataset")
    assert "nobody/no-such-dataset" in message
    assert [event for event in network_events if not _is_loopback(event)] == []
