"""The shipped chat templates against the prompts in DEBATunE's released model outputs.

Each released record's ``raw_output`` is its whole decoded generation (the reference's
``evaluation/generate_inference.py`` decodes prompt and answer with ``skip_special_tokens=True``),
so it starts with the prompt the model was given, less its special tokens.
"""

from __future__ import annotations

import json

import pytest

from moot.training.chat_templates import chat_family
from tests.conftest import shared_data

# Meta's default Llama-2-chat system prompt, which the reference's llama2 format always sends
# (generate_inference.py, PROMPT_DICT_LLAMA2; "safe.  Your" has two spaces there).
LLAMA2_SYSTEM = (
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
    "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, "
    "toxic, dangerous, or illegal content. Please ensure that your responses are socially "
    "unbiased and positive in nature.\n\nIf a question does not make any sense, or is not "
    "factually coherent, explain why instead of answering something not correct. If you don't "
    "know the answer to a question, please don't share false information."
)


def prompt(family: str, messages: list[dict[str, str]]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages],
        chat_template=chat_family(family).template,
        add_generation_prompt=True,
        bos_token="<s>",  # a Llama tokenizer's
    )
    return rendered[0]


def released(model: str) -> list[dict[str, str]]:
    path = shared_data("debatune", "model_outputs", model, "debate_test_arg_2048.json")
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "model", ["DEBATunE_7b", "DEBATunE_13b", "vicuna_7b_15", "vicuna_13b_15", "wizardlm_13b_12"]
)
def test_the_vicuna_template_is_the_prompt_of_debatune_vicuna_and_wizardlm(model):
    # the DEBATunE models (the debatune-* presets) answered in the Vicuna v1.1 format, exactly:
    # BOS (the reference's tokenizer adds it; decoding skips it), then the prompt
    for record in released(model):
        sent = prompt("vicuna", [{"role": "user", "content": record["instruction"]}])
        assert sent.startswith("<s>A chat between")
        assert record["raw_output"].startswith(sent.removeprefix("<s>"))


@pytest.mark.parametrize("model", ["zephyr_7b_a", "zephyr_7b_b"])
def test_the_zephyr_template_with_an_empty_system_turn_is_the_zephyr_prompt(model):
    for record in released(model):
        messages = [
            {"role": "system", "content": ""},  # the reference always sends this empty turn
            {"role": "user", "content": record["instruction"]},
        ]
        sent = prompt("zephyr", messages)
        assert record["raw_output"].startswith(sent.replace("</s>", " "))  # as decoded


@pytest.mark.parametrize("model", ["Llama_2_7b_chat", "Llama_2_13b_chat"])
def test_the_llama2_prompt_is_the_template_with_metas_system_prompt_and_a_newline(model):
    for record in released(model):
        messages = [
            {"role": "system", "content": LLAMA2_SYSTEM},
            {"role": "user", "content": record["instruction"]},
        ]
        sent = prompt("llama-2", messages).removeprefix("<s>")
        # the reference's format ends "[/INST]\n"; the template (Meta's) ends "[/INST]"
        assert record["raw_output"].startswith(sent + "\n")
