"""Reading `moot compare` inputs: comparative questions and per-object argument files."""

from __future__ import annotations

import hashlib
import json

import pytest

from moot.core.data.compqa_inputs import ArgumentFile, load_compqa_questions
from moot.core.errors import InputError
from tests.conftest import shared_data


def jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_reads_compqas_derived_questions():
    path = shared_data("compqa", "derived_questions.jsonl")
    questions = load_compqa_questions(path)
    assert len(questions) == 50 and [q.id for q in questions] == [str(i) for i in range(50)]
    assert not any(q.free for q in questions)
    assert sum(1 for q in questions if q.aspect) == 20  # aspect "" means none
    first = questions[0]
    assert (first.object1, first.object2, first.aspect) == (
        "baseball",
        "softball",
        "most played sport",
    )
    assert first.text.startswith("What is better when comparing regarding most played sport")
    assert questions[2].aspect is None and questions[2].where == "line 3"


def test_free_text_questions_in_every_form(tmp_path):
    txt = tmp_path / "q.txt"
    txt.write_text("What is better: Nike or Adidas?\n\n  Which is faster,   Python or C++?  \n")
    questions = load_compqa_questions(txt)
    assert [q.text for q in questions] == [
        "What is better: Nike or Adidas?",
        "Which is faster, Python or C++?",
    ]
    assert all(q.free for q in questions) and [q.where for q in questions] == ["line 1", "line 3"]
    listed = tmp_path / "q.json"
    listed.write_text(json.dumps(["Tea or coffee?", {"id": 7, "question": "Cats or dogs?"}]))
    tea, cats = load_compqa_questions(listed)
    assert tea.free and len(tea.id) == 16 and cats.id == "7" and cats.object1 is None
    # a question's text rides along with its objects, which are then not extracted
    given = jsonl(tmp_path / "given.jsonl", [{"object1": "A", "object2": "B", "question": "A?"}])
    assert not load_compqa_questions(given)[0].free


@pytest.mark.parametrize(
    ("records", "problem"),
    [
        ([{"aspect": "price"}], "line 1: no objects ('object1', 'object2') and no question text"),
        ([{"object1": "a", "question": "a or b?"}], "line 1: 'object2' missing"),
        ([{"object1": "Tea", "object2": " tea "}], "line 1: object1 and object2 are the same"),
        ([{"object1": "a", "object2": "b", "aspect": 3}], "line 1: 'aspect' must be text"),
        ([{"object1": "a", "object2": ""}], "line 1: 'object2' must be a non-empty string"),
        ([{"question": ["x"]}], "line 1: 'question' must be text"),
        ([42], "line 1: expected a question string or an object, got a number"),
        ([{"question": ""}], "line 1: no objects ('object1', 'object2') and no question text"),
        (
            [{"object1": "a", "object2": "b"}, {"object1": "A", "object2": "B", "aspect": ""}],
            "line 2: repeated question (first at line 1)",
        ),
        (["Tea or coffee?", "tea  or COFFEE?"], "line 2: repeated question (first at line 1)"),
        (
            [{"id": 1, "question": "x or y?"}, {"id": "1", "question": "y or z?"}],
            "line 2: repeated id (first at line 1)",
        ),
        ([{"id": True, "question": "x or y?"}], "line 1: 'id' must be a non-empty string"),
    ],
)
def test_bad_question_records_name_file_and_record(tmp_path, records, problem):
    path = jsonl(tmp_path / "questions.jsonl", records)
    with pytest.raises(InputError) as raised:
        load_compqa_questions(path)
    assert str(raised.value).startswith(f"{path}, {problem}")


def test_empty_question_files(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(InputError, match="file is empty"):
        load_compqa_questions(tmp_path / "empty.txt")
    (tmp_path / "none.json").write_text("[]")
    with pytest.raises(InputError, match="no questions"):
        load_compqa_questions(tmp_path / "none.json")


ARGUMENTS = [
    {
        "object1": "Baseball",
        "object2": "softball",
        "aspect": "Most played sport",
        "arguments": {"baseball": ["B1.", " B2. "], "Softball": ["S1."]},
    },
    {"object1": "tea", "object2": "coffee", "arguments": {"tea": [], "coffee": ["C1."]}},
]


def test_argument_file_matches_questions_case_insensitively(tmp_path):
    path = jsonl(tmp_path / "arguments.jsonl", ARGUMENTS)
    found = ArgumentFile(path)
    assert found.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    baseball = found.find("baseball", "Softball", "most  played sport")
    assert baseball.object1 == ("B1.", "B2.") and baseball.object2 == ("S1.",)
    assert baseball.numbered() == ["B1.", "B2.", "S1."]  # 1..N: object1's, then object2's
    assert baseball.to_json() == {
        "source": "file",
        "path": str(path),
        "where": "line 1",
        "object1": ["B1.", "B2."],
        "object2": ["S1."],
    }
    assert found.find("tea", "coffee", "") is not None  # no aspect: absent, "" or None alike
    assert found.find("tea", "coffee", None).object1 == ()
    assert found.find("baseball", "softball", None) is None  # another aspect
    assert found.find("softball", "baseball", "most played sport") is None  # order matters


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"object1": "a", "arguments": {}}, "missing 'object1' or 'object2'"),
        ({"object1": "a", "object2": "b", "arguments": ["x"]}, "'arguments' must map"),
        (
            {"object1": "a", "object2": "b", "arguments": {"a": ["x"], "c": ["y"]}},
            "'arguments' needs the keys 'a' and 'b', got 'a', 'c'",
        ),
        (
            {"object1": "a", "object2": "b", "arguments": {"a": ["x"], "A": [], "b": []}},
            "'arguments' needs the keys",
        ),
        (
            {"object1": "a", "object2": "b", "arguments": {"a": "x", "b": []}},
            "arguments for 'a' must be a list of non-empty strings",
        ),
        (
            {"object1": "a", "object2": "b", "arguments": {"a": [" "], "b": []}},
            "arguments for 'a' must be a list of non-empty strings",
        ),
        (
            {"object1": "a", "object2": "b", "arguments": {"a": [], "b": []}},
            "no arguments for either object",
        ),
        (
            {"object1": "a", "object2": "b", "aspect": 1, "arguments": {"a": ["x"], "b": []}},
            "'aspect' must be text",
        ),
        ("text", "expected an object, got text"),
    ],
)
def test_bad_argument_records_name_file_and_record(tmp_path, record, problem):
    path = jsonl(tmp_path / "arguments.jsonl", [ARGUMENTS[1], record])
    with pytest.raises(InputError) as raised:
        ArgumentFile(path)
    assert str(raised.value).startswith(f"{path}, line 2: {problem}")


def test_repeated_argument_records(tmp_path):
    path = jsonl(tmp_path / "arguments.jsonl", [ARGUMENTS[1], {**ARGUMENTS[1], "aspect": ""}])
    with pytest.raises(InputError, match="line 2: repeated objects and aspect"):
        ArgumentFile(path)
