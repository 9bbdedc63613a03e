"""The 9 stored DEBATunE model-output files: all load and align; both evaluations run on three
(scripted judge; judging all nine repeats the same path at 7,200 calls).
"""

from __future__ import annotations

import asyncio

from moot.core import ModelClient, RequestCache, RetryPolicy, Role, parse_spec
from moot.core.data.responses import load_responses
from moot.core.testing.scripted_server import Rule, ScriptedServer
from moot.graphs.debatune_eval import align, evaluate_controllability, evaluate_quality
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
                    responses, tmp_path / model / "c", role, client, concurrency=32
                )
            )
            assert control.summary["items"] == 480 and control.summary["parse_failures"] == 0
            # the scripted judge says 100% support for everything
            assert control.summary["cc_p"] == 1.0 and control.summary["cc_n"] == 0.0
            quality = asyncio.run(
                evaluate_quality(
                    responses,
                    baseline,
                    tmp_path / model / "q",
                    role,
                    client,
                    stride=3,
                    concurrency=32,
                )
            )
            # a judge that always prefers position 1: every pair is an order-inconsistent tie
            assert quality.summary["items"] == 160 and quality.summary["ties"] == 160
            assert quality.summary["order_inconsistency"] == 1.0
        calls = len(server.requests)
        for model in JUDGED[:2]:  # a rerun costs no judge call
            responses = load_responses(root / model / "debate_test_arg_2048.json")
            client = ModelClient(cache=cache)
            asyncio.run(evaluate_controllability(responses, tmp_path / model / "c", role, client))
            asyncio.run(
                evaluate_quality(
                    responses, baseline, tmp_path / model / "q", role, client, stride=3
                )
            )
        assert len(server.requests) == calls
