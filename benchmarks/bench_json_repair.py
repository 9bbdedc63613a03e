"""Paid repair rounds that json_repair saves, and the prose it must not turn into values.

No model and no server: a reply needs the paid repair round exactly when its parser raises
`OutputParseError` (`ModelClient.complete_parsed`), so the parsers are run directly. Run the same
script with the old tree's venv (its parsers have no json_repair) and with this one, and compare:

    OLD/.venv/bin/python benchmarks/bench_json_repair.py   # from outside OLD's folder
    .venv/bin/python benchmarks/bench_json_repair.py

Three corpora:

1. ``fixtures``: the DEBATunE judge replies the test suite scripts
   (``tests/agents/test_debatune_judges.py``, read with ``ast``; the json_repair tests themselves
   left out), read with `parse_scores` as controllability and as pairwise-quality judgments.
2. ``slips``: well-formed judgments in each judge schema (DEBATunE controllability and quality,
   BERDS perspectives), each written with one JSON slip a model makes (kinds listed in `SLIPS`),
   read as the agents read them. Synthetic: no recorded judge reply with a slip is available
   (../shared/data holds the judged texts and final scores, not the judges' raw replies).
3. ``prose``: real model and human texts with no JSON asked of them (DEBATunE debater responses,
   DebateQA answers, PanelBench speeches, CompQA answers): how many `extract_value` reads a value
   from and how many `parse_scores` reads a judgment from. These counts must not grow.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import _common

SHARED = _common.ROOT.parent / "shared" / "data"
NEW_TESTS = ("test_json_slips_are_read_without_a_paid_repair", "test_prose_with_brackets")

# (kind, template): ``{k}``/``{v}`` pairs are the schema's fields; each renders one judgment.
SLIPS: dict[str, Callable[[list[tuple[str, str]]], str]] = {
    "valid JSON": lambda kv: json.dumps({k: json.loads(v) for k, v in kv}),
    "trailing comma, JSON literal": lambda kv: _obj(kv, '"{k}": {v}', extra='"final": true,'),
    "single quotes, JSON literal": lambda kv: _obj(kv, "'{k}': {v}", extra="'note': null"),
    "unquoted keys": lambda kv: _obj(kv, "{k}: {v}"),
    "missing comma": lambda kv: "{" + " ".join(f'"{k}": {v}' for k, v in kv) + "}",
    "comment in the object": lambda kv: "{ // my scores\n" + _body(kv, '"{k}": {v}') + "\n}",
    "unclosed brace, prose after": lambda kv: (
        "{" + _body(kv, '"{k}": {v}') + ", 'of': 3\n\nThe 3 arguments mostly agree."
    ),
    "reply cut off at its last character": lambda kv: "{" + _body(kv, '"{k}": {v}')[:-1],
}


def _body(kv: list[tuple[str, str]], pair: str) -> str:
    return ", ".join(pair.format(k=k, v=v) for k, v in kv)


def _obj(kv: list[tuple[str, str]], pair: str, extra: str = "") -> str:
    return "{" + _body(kv, pair) + (", " + extra if extra else "") + "}"


def fixture_replies() -> list[str]:
    """The string replies scripted in the DEBATunE judge tests (parametrize lists and Rules)."""
    tree = ast.parse((_common.ROOT / "tests/agents/test_debatune_judges.py").read_text("utf-8"))
    replies: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith(NEW_TESTS):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.keyword) and sub.arg == "reply":
                replies += [c.value for c in ast.walk(sub.value) if _is_str(c)]
        for deco in node.decorator_list:  # @pytest.mark.parametrize("reply", [...])
            if isinstance(deco, ast.Call) and deco.args and _is_str(deco.args[0]):
                names = deco.args[0].value
                if names.split(",")[0].strip("() ") == "reply":
                    for item in deco.args[1].elts:  # type: ignore[attr-defined]
                        first = item.elts[0] if isinstance(item, ast.Tuple) else item
                        replies += [first.value] if _is_str(first) else []
    return replies


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def prose_texts() -> Iterator[tuple[str, str]]:
    """(corpus, text) of the real texts in ../shared/data."""
    for path in sorted((SHARED / "debatune" / "model_outputs").glob("*/*.json")):
        for record in json.loads(path.read_text("utf-8")):
            yield "DEBATunE debater responses", record["response"]
    for line in (SHARED / "debateqa" / "demo_answers.jsonl").read_text("utf-8").splitlines():
        yield "DebateQA answers", json.loads(line)["generation"]
    for line in (SHARED / "panelbench" / "debateart.jsonl").read_text("utf-8").splitlines():
        for speech in json.loads(line)["speeches"]:
            yield "PanelBench speeches", speech["content"]
    for path in sorted((SHARED / "compqa" / "raw_summaries").glob("*.json")):
        for record in json.loads(path.read_text("utf-8")):
            yield "CompQA answers", str(record.get("comparison") or "")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    _common.offline_env()
    import moot
    from moot.agents.berds_query_expansion import Perspectives
    from moot.agents.debatune_judges import PairScores, Percentages, parse_scores
    from moot.core.llm.structured import OutputParseError, extract_value, parse_structured

    def reads(parse: Callable[[str], object], text: str) -> bool:
        try:
            parse(text)
        except OutputParseError:
            return False
        return True

    print(f"moot from {Path(moot.__file__).parent.parent}")
    judges = {"controllability": Percentages, "quality": PairScores}

    replies = fixture_replies()
    unread = [
        r
        for r in replies
        if not any(reads(functools.partial(parse_scores, schema=s), r) for s in judges.values())
    ]
    print(f"\n1. fixtures: {len(replies)} DEBATunE judge replies scripted in the tests")
    print(f"   read by neither judge (need the repair round): {len(unread)}: {unread}")

    print("\n2. slips: replies needing the paid repair round, per slip kind")
    cases = {
        "DEBATunE controllability": (
            [("support", "80"), ("oppose", "20")],
            lambda t: parse_scores(t, Percentages),
        ),
        "DEBATunE quality": (
            [("score_1", "8"), ("score_2", "6")],
            lambda t: parse_scores(t, PairScores),
        ),
        "BERDS perspectives": (
            [("perspectives", '["Bans protect children.", "Bans push work underground."]')],
            lambda t: parse_structured(t, Perspectives),
        ),
    }
    total = Counter()
    for kind, render in SLIPS.items():
        cells = []
        for label, (kv, parse) in cases.items():
            ok = reads(parse, render(kv))
            total[kind] += not ok
            cells.append(f"{label}: {'read' if ok else 'REPAIR'}")
        print(f"   {kind:<38} " + "; ".join(cells))
    print(f"   repair rounds needed: {sum(total.values())} of {len(SLIPS) * len(cases)} replies")

    print("\n3. prose: texts a value or judgment is read from (must not grow)")
    found: Counter[tuple[str, str]] = Counter()
    sizes: Counter[str] = Counter()
    for corpus, text in prose_texts():
        sizes[corpus] += 1
        found[corpus, "extract_value"] += reads(extract_value, text)
        for name, schema in judges.items():
            found[corpus, name] += reads(functools.partial(parse_scores, schema=schema), text)
    for corpus, size in sizes.items():
        counts = ", ".join(f"{what} {found[corpus, what]}" for what in ("extract_value", *judges))
        print(f"   {corpus} ({size}): {counts}")


if __name__ == "__main__":
    main()
