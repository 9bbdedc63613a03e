"""DEBATunE's released files against the paper's figures, and moot's evaluations on them.

The 9 stored model-output files all load and align; both evaluations run on three (scripted
judge; judging all nine repeats the same path at 7,200 calls). The sizes the paper prints follow
from the released topic files, and every win score and controllability score of Tables 1, 2 and
4 follows from its printed counts through moot's own metrics. The GPT-4 judgments behind those
counts are not released, so the counts themselves cannot be reproduced offline.
"""

from __future__ import annotations

import asyncio
import json
from decimal import ROUND_HALF_UP, Decimal

import pytest

from moot.core import ModelClient, RequestCache, RetryPolicy, Role, parse_spec
from moot.core.data.responses import align, load_responses
from moot.core.data.topics import load_topics
from moot.core.metrics.debatune import controllability, pairwise
from moot.graphs.debatune_eval import evaluate_controllability, evaluate_quality
from moot.graphs.debatune_generate import debate_test_instructions
from moot.graphs.judging import Judging
from moot.testing import Rule, ScriptedServer
from tests.conftest import shared_data

MODELS = [
    "DEBATunE_13b",
    "DEBATunE_7b",
    "Llama_2_13b_chat",
    "Llama_2_7b_chat",
    "vicuna_13b_15",
    "vicuna_7b_15",
    "wizardlm_13b_12",
    "zephyr_7b_a",
    "zephyr_7b_b",
]
JUDGED = ["DEBATunE_7b", "vicuna_13b_15", "zephyr_7b_b"]  # tuned, Vicuna, Zephyr formats
RULES = [
    Rule(pattern="how many percent", reply="100 0\nSupportive."),
    Rule(pattern="Assistant 1's Answer", reply="7 6\nFirst is better."),
]


@pytest.mark.slow  # 2,400 judge calls
def test_all_nine_model_output_files(tmp_path):
    root = shared_data("debatune", "model_outputs")
    baseline = load_responses(root / "Llama_2_7b_chat" / "debate_test_arg_2048.json")
    with ScriptedServer(rules=RULES) as server:
        role = Role("judge", parse_spec("openai/judge", api_base=server.url), 0.0)
        cache = RequestCache(tmp_path / "cache.sqlite")
        for model in MODELS:
            path = root / model / "debate_test_arg_2048.json"
            responses = load_responses(path)
            assert len(responses) == 480
            align(responses, baseline, path)
        for model in JUDGED:
            responses = load_responses(root / model / "debate_test_arg_2048.json")
            client = ModelClient(cache=cache, retry=RetryPolicy(attempts=1))
            control = asyncio.run(
                evaluate_controllability(
                    responses, Judging(tmp_path / model / "c", role, client, concurrency=32)
                )
            )
            assert control.summary["items"] == 480 and control.summary["parse_failures"] == 0
            # the scripted judge says 100% support for everything
            assert control.summary["cc_p"] == 1.0 and control.summary["cc_n"] == 0.0
            quality = asyncio.run(
                evaluate_quality(
                    responses,
                    baseline,
                    Judging(tmp_path / model / "q", role, client, concurrency=32),
                    stride=3,
                )
            )
            # a judge that always prefers position 1: every pair is an order-inconsistent tie
            assert quality.summary["items"] == 160 and quality.summary["ties"] == 160
            assert quality.summary["order_inconsistency"] == 1.0
        calls = len(server.requests)
        for model in JUDGED[:2]:  # a rerun costs no judge call
            responses = load_responses(root / model / "debate_test_arg_2048.json")
            client = ModelClient(cache=cache)
            judging = Judging(tmp_path / model / "c", role, client)
            asyncio.run(evaluate_controllability(responses, judging))
            judging = Judging(tmp_path / model / "q", role, client)
            asyncio.run(evaluate_quality(responses, baseline, judging, stride=3))
        assert len(server.requests) == calls


# Table 1 and Table 2 rows: (win, tie, loss) against the row's baseline, printed win score,
# printed controllability (positive, negative, overall). Baseline rows have no counts.
TABLE_1 = {
    "DEBATunE-7B": (None, "1.00", ("0.958", "0.979", "0.969")),
    "DEBATunE-13B": ((43, 101, 16), "1.17", ("0.950", "0.946", "0.948")),
    "Alpaca 7B": ((2, 1, 157), "0.03", ("0.938", "0.883", "0.910")),
    "WizardLM 7B": ((3, 12, 145), "0.11", ("0.833", "0.704", "0.768")),
    "WizardLM 13B V1.2": ((14, 99, 47), "0.79", ("0.800", "0.708", "0.754")),
    "Vicuna 7B v1.5": ((6, 19, 135), "0.19", ("0.900", "0.796", "0.848")),
    "Vicuna 13B v1.5": ((5, 36, 119), "0.29", ("0.867", "0.858", "0.863")),
    "LLaMA2 Chat 7B": ((1, 17, 142), "0.12", ("0.196", "0.429", "0.313")),
    "LLaMA2 Chat 13B": ((3, 26, 131), "0.20", ("0.338", "0.317", "0.327")),
    "Zephyr 7B Alpha": ((7, 29, 124), "0.27", ("0.879", "0.713", "0.796")),
    "Zephyr 7B Beta": ((12, 84, 64), "0.67", ("0.942", "0.733", "0.838")),
}
TABLE_2 = {
    "ShareGPT (Vicuna 7B v1.5)": (None, "1.00", ("0.900", "0.796", "0.848")),
    "Topic Data without Debate": ((118, 27, 15), "1.64", ("0.946", "0.813", "0.879")),
    "1-round Debate": ((134, 19, 7), "1.79", ("0.954", "0.950", "0.952")),
    "2-round Debate": ((135, 19, 6), "1.81", ("0.958", "0.979", "0.969")),
    "3-round Debate": ((135, 17, 8), "1.79", ("0.967", "0.963", "0.965")),
    "1 Argument": ((135, 21, 4), "1.82", ("0.946", "0.921", "0.933")),
    "3 Arguments": ((135, 19, 6), "1.81", ("0.958", "0.979", "0.969")),
    "5 Arguments": ((135, 18, 7), "1.80", ("0.933", "0.933", "0.933")),
}
# Table 4: pairwise against the base model on the WizardLM test set (218 instructions).
TABLE_4 = {
    "Vicuna 7B v1.5 + 1 Arg": ((98, 70, 50), "1.220"),
    "Vicuna 7B v1.5 + 3 Arg": ((99, 76, 43), "1.257"),
    "WizardLM 7B + 1 Arg": ((119, 61, 38), "1.372"),
    "WizardLM 7B + 3 Arg": ((111, 70, 37), "1.339"),
}
# The two figures printed rounded down from an exact half: (12 - 64) / 160 + 1 = 0.675 and
# (200 + 169) / 480 = 0.76875; every other figure is its exact value rounded half up.
HALVES_ROUNDED_DOWN = {("Zephyr 7B Beta", "win score"), ("WizardLM 7B", "overall")}


def printed(value: float, like: str) -> str:
    """`value` rounded half up to as many decimals as `like` (float noise cut at 12 first)."""
    step = Decimal(like).as_tuple().exponent
    exact = Decimal(f"{value:.12f}")  # 0.8374999999999999 is 0.8375 = 402 / 480
    return str(exact.quantize(Decimal(1).scaleb(step), rounding=ROUND_HALF_UP))


def test_the_released_files_have_the_papers_sizes():
    root = shared_data("debatune")
    train = json.loads((root / "Debate_topic_only" / "debate_train_v1.json").read_text())
    test = json.loads((root / "Debate_topic_only" / "debate_test_v1.json").read_text())
    assert (len(train), len(test), len(set(train) | set(test))) == (630, 80, 710)  # Section 2
    path = root / "Debate_topic_arguments" / "debate_test_v1_arg.jsonl"
    items = debate_test_instructions(load_topics(path), str(path))
    assert len(items) == 480  # Section 4.2: 80 topics x 6 arguments
    assert [i["side"] for i in items].count("affirmative") == 240  # the CC_P denominator
    judged = items[::3]  # moot eval quality --stride 3, the reference's wrap.py stride
    assert len(judged) == 160  # win + tie + loss of every Table 1 and Table 2 row
    assert all(
        sum(counts) == 160 for counts, _, _ in [*TABLE_1.values(), *TABLE_2.values()] if counts
    )
    assert {(i["topic"], i["side"]) for i in judged} == {(i["topic"], i["side"]) for i in items}
    # moot generate asks exactly what the released models were asked, in the same order
    released = json.loads(
        (root / "model_outputs" / "vicuna_7b_15" / "debate_test_arg_2048.json").read_text()
    )
    keys = ("topic", "side", "argument", "instruction")
    assert [tuple(i[k] for k in keys) for i in items] == [
        tuple(r[k] for k in keys) for r in released
    ]


def outcomes(win: int, tie: int, loss: int) -> list[str]:
    return ["win"] * win + ["tie"] * tie + ["loss"] * loss


def test_tables_1_2_and_4_win_scores_follow_from_their_counts():
    rows = {
        **TABLE_1,
        **TABLE_2,
        **{name: (counts, score, None) for name, (counts, score) in TABLE_4.items()},
    }
    reproduced = 0
    for name, (counts, score, _) in rows.items():
        if counts is None:  # the baseline row: 1 by definition
            assert pairwise(outcomes(0, 160, 0), [False] * 160)["win_score"] == float(score)
            continue
        result = pairwise(outcomes(*counts), [False] * sum(counts))
        assert (result["wins"], result["ties"], result["losses"]) == counts
        if (name, "win score") in HALVES_ROUNDED_DOWN:
            assert result["win_score"] == 0.675 and score == "0.67"
            continue
        assert printed(result["win_score"], score) == score, name
        reproduced += 1
    assert reproduced == 20


def test_tables_1_and_2_controllability_is_counts_over_240_per_side():
    reproduced = 0
    for name, (_, _, (positive, negative, overall)) in {**TABLE_1, **TABLE_2}.items():
        # each printed share is k / 240 for exactly one k: the released test set's 240 per side
        good = {}
        for side, share in (("affirmative", positive), ("negative", negative)):
            ks = [k for k in range(241) if printed(k / 240, share) == share]
            assert len(ks) == 1, (name, side)
            good[side] = ks[0]
        items = [
            {"side": side, "judgment": {"ok": True, "value": value}}
            for side, k in good.items()
            for value in [
                {"support": 100, "oppose": 0}
                if side == "affirmative"
                else {"support": 0, "oppose": 100}
            ]
            * k
            + [{"support": 60, "oppose": 40}] * (240 - k)  # mixed: good for neither side
        ]
        scores = controllability(items)
        assert printed(scores["cc_p"], positive) == positive
        assert printed(scores["cc_n"], negative) == negative
        if (name, "overall") in HALVES_ROUNDED_DOWN:
            assert scores["overall"] == 0.76875 and overall == "0.768"
            continue
        assert printed(scores["overall"], overall) == overall, name
        reproduced += 1
    assert reproduced == 18
