"""`moot train dpo`'s config and preference records, checked before torch loads."""

from __future__ import annotations

import json

import pytest

from moot.core.errors import ConfigError, InputError
from moot.training.dpo_config import load_dpo_config
from moot.training.dpo_data import read_preference_rows

BASE = ["model.base=runs/sft/adapter", "data.train=p.jsonl", "training.output_dir=runs/dpo"]


def test_the_dpo_section_and_what_only_sft_means_are_checked():
    config = load_dpo_config(None, [*BASE, "dpo.loss_type=ipo", "dpo.beta=0.3"])
    assert config.dpo.loss_type == ["ipo"] and config.dpo.beta == 0.3
    assert config.dpo.trainer_arguments() == {
        "beta": 0.3,
        "loss_type": ["ipo"],
        "label_smoothing": 0.0,
    }
    refused = {
        "dpo.loss_type=dpo": "dpo.loss_type: unknown loss 'dpo' (known: sigmoid, hinge",
        "dpo.loss_weights=[1, 2]": "2 weight(s) for 1 loss(es)",
        "dpo.beta=0": "dpo.beta",
        "dpo.betta=1": "dpo.betta",
        "training.packing=true": "training.packing is SFT's",
        "data.overlong=drop": "data.overlong drop is SFT's",
        # what trl's DPOTrainer refuses (or ignores) once the model is loaded
        "dpo.loss_type=[sigmoid, exo_pair]": "dpo.label_smoothing: the exo_pair loss needs a "
        "value above 0 (EXO's paper suggests 1e-3)",
        "training.padding_free=true": "training.padding_free is SFT's",
        "lora.target_modules=[q_proj, lm_head]": "DPO cannot train an adapter on lm_head",
        "training.liger_kernel_config={fused_linear_cross_entropy: true}": "fused_linear_cross",
    }
    for override, problem in refused.items():
        with pytest.raises(ConfigError) as caught:
            load_dpo_config(None, [*BASE, "training.use_liger_kernel=true", override])
        assert problem in str(caught.value), override
    exo = load_dpo_config(None, [*BASE, "dpo.loss_type=exo_pair", "dpo.label_smoothing=1e-3"])
    assert exo.dpo.label_smoothing == 1e-3
    full = load_dpo_config(None, [*BASE, "training.method=full", "lora.target_modules=[lm_head]"])
    assert full.lora.target_modules == ["lm_head"]  # no adapter: lm_head trains as any weight
    with pytest.raises(ConfigError, match="DPO starts from a trained model"):
        load_dpo_config(None, [*BASE[1:], "model.init={model_type: llama}"])


def test_one_record_in_messages_puts_every_record_in_messages(tmp_path):
    data = tmp_path / "p.jsonl"
    records = [
        {"prompt": "Ban zoos?", "chosen": "Yes.", "rejected": "Cats.", "reasons": ["on topic"]},
        {
            "prompt": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Ban?"},
            ],
            "chosen": [{"role": "assistant", "content": "No."}],
            "rejected": "Dogs.",
        },
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    first, second = read_preference_rows(data)
    assert first == {
        "prompt": [{"role": "user", "content": "Ban zoos?"}],
        "chosen": [{"role": "assistant", "content": "Yes."}],
        "rejected": [{"role": "assistant", "content": "Cats."}],
    }  # metadata is not trained on
    assert second["rejected"] == [{"role": "assistant", "content": "Dogs."}]
    data.write_text(json.dumps(records[0]) + "\n")
    assert read_preference_rows(data) == [
        {"prompt": "Ban zoos?", "chosen": "Yes.", "rejected": "Cats."}
    ]


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        (
            "chosen",
            [{"role": "user", "content": "Yes."}],
            "chosen turn 0: bad role 'user' (expected assistant)",
        ),
        (
            "prompt",
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " "}],
            "prompt turn 1 (user): empty content",
        ),
    ],
)
def test_a_bad_turn_is_named_by_its_field_and_place(tmp_path, field, value, problem):
    data = tmp_path / "p.jsonl"
    record = {"prompt": "Ban zoos?", "chosen": "Yes.", "rejected": "No.", field: value}
    data.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError) as caught:
        read_preference_rows(data)
    assert str(caught.value) == f"{data}, line 1: {problem}"
