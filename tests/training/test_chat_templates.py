"""The shipped chat templates against DEBATunE's released prompt formats and model outputs.

Each released record's ``raw_output`` is its whole decoded generation (the reference's
``evaluation/generate_inference.py`` decodes prompt and answer with ``skip_special_tokens=True``),
so it starts with the prompt the model was given, less its special tokens.
"""

from __future__ import annotations

import json

import pytest

from moot.cli.debatune import GENERATE_TEMPLATES
from moot.prompts import template_source
from moot.training.chat_templates import chat_family, has_chat_template
from tests.conftest import shared_data

# The prompts of the released evaluation, word for word (tianyi-lab/DEBATunE@433444d,
# evaluation/generate_inference.py: PROMPT_DICT_*["prompt_no_input"], lines 14-18, 24-26, 32-34,
# 46-54, 65-71; "safe.  Your" has two spaces there), by `moot generate --template` name. The
# reference fills {instruction} (line 141) and tokenises the text with BOS added (line 143).
LLAMA2_SYSTEM = (
    "You are a helpful, respectful and honest assistant. Always answer as helpfully as possible, "
    "while being safe.  Your answers should not include any harmful, unethical, racist, sexist, "
    "toxic, dangerous, or illegal content. Please ensure that your responses are socially "
    "unbiased and positive in nature.\n\nIf a question does not make any sense, or is not "
    "factually coherent, explain why instead of answering something not correct. If you don't "
    "know the answer to a question, please don't share false information."
)
RELEASED_PROMPTS = {
    "alpaca": (
        "Below is an instruction that describes a task. "
        "Write a response that appropriately completes the request.\n\n"
        "### Instruction:\n{instruction}\n\n### Response:"
    ),
    "wizardlm": "{instruction}\n\n### Response:",
    "vicuna": (
        "A chat between a curious user and an artificial intelligence assistant. The assistant "
        "gives helpful, detailed, and polite answers to the user's questions. USER: {instruction} "
        "ASSISTANT:"
    ),
    "llama-2": f"<s>[INST] <<SYS>>\n{LLAMA2_SYSTEM}\n<</SYS>>\n\n{{instruction}} [/INST]\n",
    "zephyr": "<|system|>\n</s>\n<|user|>\n{instruction}</s>\n<|assistant|>\n",
}
INSTRUCTION = (
    'Suppose you are negative to the topic "Should zoos be banned?", please provide explanations '
    'and supporting evidence for this argument "Zoos save species." '
)


def prompt(template: str, messages: list[dict[str, str]]) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages],
        chat_template=template,
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
        sent = prompt(chat_family("vicuna").template, user(record["instruction"]))
        assert sent.startswith("<s>A chat between")
        assert record["raw_output"].startswith(sent.removeprefix("<s>"))


def user(instruction: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": instruction}]


def generate_format(name: str, instruction: str) -> str:
    """What `moot generate --template NAME` renders for one instruction (a Llama tokenizer's)."""
    return prompt(template_source(GENERATE_TEMPLATES[name]), user(instruction))


@pytest.mark.parametrize("name", RELEASED_PROMPTS)
def test_generate_renders_the_released_prompt_of_each_format(name):
    # the tokenizer's BOS, then the released text: the reference's tokens (it adds BOS)
    released = RELEASED_PROMPTS[name].format_map({"instruction": INSTRUCTION})
    assert generate_format(name, INSTRUCTION) == "<s>" + released


def test_the_released_formats_take_one_instruction_only():
    from jinja2.exceptions import TemplateError

    for name in ("alpaca", "llama-2", "wizardlm", "zephyr"):
        with pytest.raises(TemplateError, match="take one user instruction"):
            prompt(
                template_source(GENERATE_TEMPLATES[name]),
                [{"role": "system", "content": "s"}, *user(INSTRUCTION)],
            )


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("zephyr", "zephyr_7b_a"),
        ("zephyr", "zephyr_7b_b"),
        ("llama-2", "Llama_2_7b_chat"),
        ("llama-2", "Llama_2_13b_chat"),
    ],
)
def test_the_released_outputs_start_with_generates_prompt(name, model):
    # decoded without special tokens: no <s>, and each </s> a space
    for record in released(model):
        sent = generate_format(name, record["instruction"]).replace("<s>", "")
        assert record["raw_output"].startswith(sent.replace("</s>", " "))


def test_the_sft_templates_send_a_system_block_only_when_given_one():
    # the SFT formats (`model.chat_template`) train exactly the turns a record holds
    for family in ("llama-2", "zephyr"):
        sent = prompt(chat_family(family).template, user(INSTRUCTION))
        assert "<<SYS>>" not in sent and "<|system|>" not in sent
        assert sent != generate_format(family, INSTRUCTION)


def test_chatml_ends_each_turn_as_smollm2_and_qwen_do():
    """`<|im_end|>` and a line feed after every turn, as the family's own templates render: the
    line feed is an expression, since transformers' trim_blocks drops one after a tag."""
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say yes."},
        {"role": "assistant", "content": "Yes."},
    ]
    chatml = chat_family("chatml").template
    assert prompt(chatml, turns[:2]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSay yes.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert prompt(chatml, turns).endswith(
        "<|im_start|>assistant\nYes.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_has_chat_template_reads_the_tokenizer_files_of_a_model_or_an_adapters_base(tmp_path):
    def folder(name: str, files: dict[str, str]) -> str:
        (tmp_path / name).mkdir()
        for file, text in files.items():
            (tmp_path / name / file).write_text(text)
        return str(tmp_path / name)

    inline = '{"chat_template": "{{ messages }}"}'
    plain = folder("plain", {"tokenizer_config.json": '{"eos_token": "</s>"}'})
    models = [
        plain,
        folder("inline", {"tokenizer_config.json": inline}),
        folder("beside", {"tokenizer_config.json": "{}", "chat_template.jinja": "{{ messages }}"}),
        folder("adapter", {"adapter_config.json": json.dumps({"base_model_name_or_path": plain})}),
        folder("own", {"adapter_config.json": "{}", "tokenizer_config.json": inline}),
    ]
    assert [has_chat_template(model) for model in models] == [False, True, True, False, True]
    assert has_chat_template(folder("weights", {"config.json": "{}"})) is None  # no tokenizer
