import hashlib

from moot.training.debatune_data import instruction, instruction_templates, sft_record

PAPER = (
    'Suppose you are affirmative to the topic "Zoos", please provide explanations and '
    'supporting evidence for this argument "They protect species" '
)


def test_variant_zero_is_the_papers_instruction():
    assert instruction("Zoos", "Affirmative", "They protect species") == PAPER


# The reference's INSTRUCTION_1_LIST (code_debate/make_dataset_train.py, lines 6-18), in order:
# its last string in full, and a digest of all eleven joined by newlines.
LAST = (
    'In case your perspective is {side} regarding "{topic}", please deliver comprehensive '
    'justifications and evidence supporting this proposition "{argument}" '
)
RELEASED_DIGEST = "ba26a1282fefbb58fa33d7c0a5f0278b5d0aab486cf834470f1bc12a19869739"


def test_the_paraphrases_are_the_references_eleven():
    templates = instruction_templates()
    assert len(templates) == 11 and len(set(templates)) == 11
    assert templates[-1] == LAST
    assert hashlib.sha256("\n".join(templates).encode()).hexdigest() == RELEASED_DIGEST
    for variant in range(11):
        text = instruction("Zoos", "Negative", "They confine animals", variant)
        assert "negative" in text and '"Zoos"' in text and '"They confine animals"' in text
        assert "{" not in text and "Negative" not in text  # the side lower-cased, as released
        assert text.endswith('"They confine animals" ')  # the released trailing space


def test_sft_records_use_the_eleven_paraphrases():
    templates = instruction_templates()
    used = set()
    for i in range(200):
        debate = {"id": str(i), "topic": "Zoos", "stance": "Affirmative", "argument": "Care"}
        record = sft_record({**debate, "conclusion": "Yes.", "status": "ok"}, seed=3)
        variant = record["instruction_variant"]
        expected = templates[variant].format(side="affirmative", topic="Zoos", argument="Care")
        assert record["prompt"] == record["messages"][0]["content"] == expected
        used.add(variant)
    assert used == set(range(11))


def test_sft_record_is_seeded_and_carries_both_formats():
    debate = {
        "id": "abc",
        "topic": "Zoos",
        "stance": "Negative",
        "argument": "Cages",
        "conclusion": "Zoos confine animals.",
        "status": "ok",
    }
    record = sft_record(debate, seed=0)
    assert record == sft_record(debate, seed=0)
    variants = {
        sft_record({**debate, "id": str(i)}, seed=0)["instruction_variant"] for i in range(60)
    }
    assert len(variants) > 5  # the choice spreads over the paraphrases
    user, assistant = record["messages"]
    assert (user["content"], assistant["content"]) == (record["prompt"], record["completion"])
    assert assistant["content"] == "Zoos confine animals."


def test_variant_zero_matches_the_papers_released_instructions():
    import json

    from tests.conftest import shared_data

    path = shared_data("debatune", "model_outputs", "DEBATunE_7b", "debate_test_arg_2048.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    for r in records:
        assert instruction(r["topic"], r["side"], r["argument"]) == r["instruction"]
