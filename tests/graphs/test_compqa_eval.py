"""`evaluate_compqa` against the scripted server: judged files, summary, errors, resumption."""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

import pytest

from moot.core import ModelClient, Role, parse_spec
from moot.core.data.compqa import MAXIMA, load_judged
from moot.core.errors import ConfigError, InputError
from moot.core.llm.models import RetryPolicy
from moot.graphs.compqa_eval import evaluate_compqa, load_answer_files
from moot.graphs.judging import Judging
from moot.testing import Fault, Rule, ScriptedServer

FULL = {str(n): MAXIMA[n] for n in MAXIMA}  # 19
LOWER = {**FULL, "1": 0, "9": 1, "15": 0}  # 16
RULES = [
    Rule(pattern="REPAIRED text.*could not be used", reply=json.dumps(LOWER)),
    Rule(pattern="REPAIRED text", reply=json.dumps({**LOWER, "9": 3})),
    Rule(pattern="BROKEN text", reply="A fine comparison."),
    Rule(pattern="Comparative answer", reply=json.dumps(FULL)),
]


def answer(a: str, b: str, text: str, aspect: str = "") -> dict:
    return {"object1": a, "object2": b, "aspect": aspect, "comparison": text, "extra": 1}


def write_inputs(folder: Path) -> list[Path]:
    first = folder / "gen_scenario_1.json"
    first.write_text(
        json.dumps(
            [
                answer("Alpha", "Beta", "OK-ONE text"),
                answer("Gamma", "Delta", "REPAIRED text", aspect="speed"),
                answer("Eta", "Theta", "BROKEN text"),
            ]
        ),
        encoding="utf-8",
    )
    second = folder / "other.jsonl"
    rows = [answer("Alpha", "Beta", "OK-ONE text"), answer("Iota", "Kappa", "FAILS text")]
    second.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return [first, second]


def run(server: ScriptedServer, paths: list[Path], out: Path, shots: int = 0):
    role = Role("judge", parse_spec("openai/judge", api_base=server.url), temperature=0.0)
    client = ModelClient(retry=RetryPolicy(attempts=1))  # no cache: only the log saves calls
    files = load_answer_files(paths)
    return asyncio.run(evaluate_compqa(files, Judging(out, role, client, 4), shots=shots))


def test_judged_files_summary_errors_and_resumption(tmp_path):
    paths, out = write_inputs(tmp_path), tmp_path / "out"
    faults = [Fault("500", times=1, match="FAILS text")]
    with ScriptedServer(rules=RULES, faults=faults) as server:
        result = run(server, paths, out)
        # OK-ONE once (shared by both files), REPAIRED and BROKEN twice, FAILS once (failed)
        assert len(server.requests) == 6
        prompts = [r.body["messages"][1]["content"] for r in server.requests]
        assert any(
            "What is better when comparing regarding speed: Gamma or Delta?" in p for p in prompts
        )
        assert result.errors == 1
        first = load_judged(out / "judged" / "gen_scenario_1.json")
        second = load_judged(out / "judged" / "other.jsonl")
        assert [j.status for j in first] == ["ok", "ok", "invalid"]
        assert [j.status for j in second] == ["ok", "error"]
        assert [j.total for j in first + second] == [19.0, 16.0, None, 19.0, None]
        assert "HTTP 500" in second[1].problem

        raw = json.loads((out / "judged" / "gen_scenario_1.json").read_text())
        assert raw[1]["extra"] == 1 and raw[1]["repaired"] and len(raw[1]["replies"]) == 2
        assert raw[1]["categories"] == {"structure": 6, "relevance": 4, "quality": 6}
        assert raw[2]["score_dict"] is None and raw[2]["score"] is None
        assert raw[2]["problem"] == "no score dict or 'n: points' lines in the reply"
        assert raw[2]["replies"] == ["A fine comparison.", "A fine comparison."]

        summary = json.loads((out / "summary.json").read_text())
        overall = summary["overall"]
        counts = [overall[k] for k in ("n", "n_valid", "invalid", "errors", "repaired")]
        assert counts == [5, 3, 1, 1, 2]
        # two cells (gen 1: 19, 16; other: 19): the mean of their means ± the mean of their stds
        assert overall["mean"] == pytest.approx((17.5 + 19) / 2)
        assert overall["std"] == pytest.approx(statistics.stdev([19, 16]))
        assert overall["criteria"]["C9"] == pytest.approx(5 / 3)
        assert summary["files"]["gen_scenario_1.json"]["generator"] == "gen"
        assert summary["files"]["other.jsonl"]["errors"] == 1
        assert summary["ledger"]["total"]["calls"] == 6
        table = (out / "summary.md").read_text()
        assert "| gen_scenario_1.json | 3 | 2 | 1 | 0 | 0 | 2 | 17.500 ± 2.121 |" in table

        server.clear_log()
        retried = run(server, paths, out)  # only the failed call is made again
        assert len(server.requests) == 1 and retried.errors == 0
        assert [j.status for j in load_judged(out / "judged" / "other.jsonl")] == ["ok", "ok"]

        server.clear_log()
        again = run(server, paths, out)
        assert server.requests == [] and again.summary["overall"]["n_valid"] == 4
        with pytest.raises(ConfigError, match="use a new --out"):
            run(server, paths, out, shots=3)

        # one input at a time into the same folder: the other input's judgments are kept
        run(server, paths[1:], out)
        run(server, paths[:1], out)
        assert server.requests == []


def test_judged_files_feed_distillation(tmp_path):
    from moot.training.compqa_data import distill_compqa

    paths, out = write_inputs(tmp_path), tmp_path / "out"
    with ScriptedServer(rules=RULES) as server:
        run(server, paths, out)
    judged = [out / "judged" / p.name for p in paths]
    summary = distill_compqa(judged, tmp_path / "distilled", min_score=18)
    assert summary.kept == 2  # Alpha/Beta once (its copy dropped) and Iota/Kappa; not 16 or invalid


def test_bad_inputs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rows = json.dumps([answer("Alpha", "Beta", "text")])
    for folder in ("a", "b"):
        (tmp_path / folder / "same.json").write_text(rows, encoding="utf-8")
    with pytest.raises(ConfigError, match="share the file name 'same.json'"):
        load_answer_files([tmp_path / "a" / "same.json", tmp_path / "b" / "same.json"])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"object1": "Alpha", "comparison": "text"}]), encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.json.*index 0.*'object2'"):
        load_answer_files([bad])
