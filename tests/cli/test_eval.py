"""`moot eval controllability|quality` end to end against the scripted server, known verdicts.

In process (`moot.eval.controllability(...)`, `moot.eval.quality(...)`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import moot
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import png_size, read_jsonl, refused_in_one_line, stderr, stdout


def responses_file(path: Path, texts: list[tuple[str, str]]) -> Path:
    records = [
        {
            "topic": f"Topic {i // 2}",
            "side": side,
            "argument": f"arg {i}",
            "instruction": f"Argue {side} for arg {i}",
            "raw_output": "",
            "response": text,
        }
        for i, (side, text) in enumerate(texts)
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def eval_args(kind: str, server: ScriptedServer, out: Path, *extra: object) -> list[object]:
    return [
        "eval",
        kind,
        "--out",
        out,
        "--judge",
        "openai/judge",
        "--api-base",
        server.url,
        "--max-retries",
        0,
        *extra,
    ]


def eval_options(server: ScriptedServer, out: Path, **extra: object) -> dict[str, object]:
    """`eval_args` as the keyword arguments of `moot.eval.<kind>`."""
    return {"out": out, "judge": "openai/judge", "api_base": server.url, "max_retries": 0} | extra


CONTROL_RULES = [
    Rule(pattern="could not be read", reply="still no numbers"),
    Rule(pattern="AFF-FULL", reply="100 0\nFully supportive."),
    Rule(pattern="AFF-MOST", reply="Support: 80%, Oppose: 20%"),
    Rule(pattern="AFF-BAD", reply="I cannot tell."),
    Rule(pattern="NEG-FULL", reply="0 100"),
    Rule(pattern="NEG-HALF", reply="50 50"),
]


def test_controllability_summary_equals_hand_computed_values(tmp_path):
    responses = responses_file(
        tmp_path / "r.json",
        [
            ("affirmative", "AFF-FULL a"),
            ("negative", "NEG-FULL a"),
            ("affirmative", "AFF-MOST"),
            ("negative", "NEG-FULL b"),
            ("affirmative", "AFF-BAD"),
            ("negative", "NEG-HALF"),
        ],
    )
    out = tmp_path / "out"
    with ScriptedServer(rules=CONTROL_RULES) as server:
        result = moot.eval.controllability(**eval_options(server, out, responses=responses))
        calls = len(server.requests)
        moot.eval.controllability(**eval_options(server, out, responses=responses))
        assert len(server.requests) == calls  # a rerun costs nothing
    assert calls == 6 + 1  # one repair round for the unreadable reply
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parse_failures"] == 1 and summary["judged"] == {"affirmative": 2, "negative": 3}
    assert summary["cc_p"] == pytest.approx(1 / 2)
    assert summary["cc_n"] == pytest.approx(2 / 3)
    assert summary["overall"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert summary["mean_support_affirmative"] == pytest.approx(90)
    records = read_jsonl(out / "judgments.jsonl")
    failed = [r for r in records if not r["judgment"]["ok"]]
    assert len(records) == 6 and len(failed) == 1
    assert failed[0]["judgment"]["value"] is None  # never a substituted score
    assert failed[0]["judgment"]["replies"] == ["I cannot tell.", "still no numbers"]
    assert (out / "chart.png").stat().st_size > 1000
    assert png_size(out / "chart.png") == (600, 384)  # 5 x 3.2 in at 120 dpi
    assert "cc_p" in stdout(result) and "0.500" in stdout(result)


QUALITY_RULES = [
    # the judge sees (1, 2) = (ours, baseline) forward, then (baseline, ours)
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nOURS-GOOD", reply="9 5"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE-FOR-GOOD", reply="5 9"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nOURS-BIASED", reply="8 6"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE-FOR-BIASED", reply="8 6"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nOURS-BAD", reply="3 8"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE-FOR-BAD", reply="8 3"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nOURS-TIEWIN", reply="7 7"),
    Rule(pattern=r"Assistant 1's Answer\]\n<<<answer \w+>>>\nBASE-FOR-TIEWIN", reply="6 7"),
]


def test_quality_win_tie_loss_score_and_inconsistency(tmp_path):
    kinds = ["GOOD", "BIASED", "BAD", "TIEWIN"]
    sides = ["affirmative", "negative"] * 2
    ours = responses_file(
        tmp_path / "ours.json", [(s, f"OURS-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    base = responses_file(
        tmp_path / "base.json", [(s, f"BASE-FOR-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    out = tmp_path / "out"
    with ScriptedServer(rules=QUALITY_RULES) as server:
        moot.eval.quality(**eval_options(server, out, responses=ours, baseline=base))
        assert len(server.requests) == 8
    summary = json.loads((out / "summary.json").read_text())
    # GOOD win, BIASED tie (inconsistent), BAD loss, TIEWIN win (tie + win: inconsistent)
    assert (summary["wins"], summary["ties"], summary["losses"]) == (2, 1, 1)
    assert summary["win_score"] == pytest.approx((2 - 1) / 4 + 1)
    assert summary["order_inconsistency"] == pytest.approx(2 / 4)
    low, high = summary["win_score_ci95"]
    assert 0 <= low <= summary["win_score"] <= high <= 2

    strided = tmp_path / "strided"
    with ScriptedServer(rules=QUALITY_RULES) as server:
        moot.eval.quality(**eval_options(server, strided, responses=ours, baseline=base, stride=2))
    assert [r["argument"] for r in read_jsonl(strided / "judgments.jsonl")] == ["arg 0", "arg 2"]


def test_a_bad_record_exits_2_before_any_claim(tmp_path, scripted_server):
    # each record problem is covered in tests/core/data/test_responses.py; here the CLI contract
    ours = responses_file(tmp_path / "ours.json", [("affirmative", "x"), ("negative", "y")])
    baseline = responses_file(tmp_path / "base.json", [("affirmative", "x"), ("negative", "y")])
    records = json.loads(baseline.read_text())
    records[1]["response"] = 5
    baseline.write_text(json.dumps(records))
    out = tmp_path / "out"
    with pytest.raises(moot.InputError) as refused:
        moot.eval.quality(**eval_options(scripted_server, out, responses=ours, baseline=baseline))
    assert refused_in_one_line(refused.value) == (
        f"{baseline}, index 1: 'response' must be text, got a number"
    )
    assert not out.exists() and scripted_server.requests == []


def test_a_baseline_that_does_not_align_is_refused(tmp_path, scripted_server):
    ours = responses_file(tmp_path / "ours.json", [("affirmative", "x"), ("negative", "y")])
    other = responses_file(tmp_path / "other.json", [("negative", "x"), ("affirmative", "y")])
    short = responses_file(tmp_path / "short.json", [("affirmative", "x")])
    for baseline, needle in ((other, "does not align"), (short, "1 records")):
        options = eval_options(scripted_server, tmp_path / "out", responses=ours, baseline=baseline)
        with pytest.raises(moot.MootError) as refused:
            moot.eval.quality(**options)
        assert needle in refused_in_one_line(refused.value)
    assert scripted_server.requests == []


def test_moot_debate_sft_records_are_judged_too(tmp_path):
    records = [
        {
            "id": str(i),
            "topic": "Zoos",
            "stance": stance,
            "argument": f"arg {i}",
            "messages": [
                {"role": "user", "content": f"Argue {stance}"},
                {"role": "assistant", "content": text},
            ],
            "prompt": f"Argue {stance}",
            "completion": text,
        }
        for i, (stance, text) in enumerate([("Affirmative", "AFF-FULL"), ("Negative", "NEG-HALF")])
    ]
    path = tmp_path / "dataset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with ScriptedServer(rules=CONTROL_RULES) as server:
        moot.eval.controllability(**eval_options(server, tmp_path / "out", responses=path))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["cc_p"], summary["cc_n"]) == (1.0, 0.0)


def test_a_judge_none_of_whose_replies_can_be_read_exits_1(tmp_path):
    responses = responses_file(tmp_path / "r.json", [("affirmative", "AFF-BAD")] * 2)
    with ScriptedServer(rules=CONTROL_RULES) as server, pytest.raises(moot.RunFailed) as failed:
        options = eval_options(server, tmp_path / "out", responses=responses)
        moot.eval.controllability(**options, quiet=True)
    assert type(failed.value) is moot.RunFailed and failed.value.result.exit_code == 1
    assert "not one judge reply could be read" in stderr(failed.value.result)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["items"], summary["parse_failures"], summary["cc_p"]) == (2, 2, None)


def test_an_output_folder_holds_one_judge(tmp_path):
    responses = responses_file(tmp_path / "r.json", [("affirmative", "AFF-FULL")])
    with ScriptedServer(rules=CONTROL_RULES) as server:
        options = eval_options(server, tmp_path / "out", responses=responses)
        moot.eval.controllability(**options)
        with pytest.raises(moot.MootError) as other:
            moot.eval.controllability(**options, temperature=0.5)
    assert "another model, judge or settings" in refused_in_one_line(other.value)
    assert len(read_jsonl(tmp_path / "out" / "judgments.jsonl")) == 1
