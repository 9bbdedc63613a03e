from moot.training.debatune_data import instruction, instruction_templates, sft_record

PAPER = (
    'Suppose you are affirmative to the topic "Zoos", please provide explanations and '
    'supporting evidence for this argument "They protect species" '
)


def test_variant_zero_is_the_papers_instruction():
    assert instruction("Zoos", "Affirmative", "They protect species") == PAPER


def test_every_paraphrase_names_side_topic_and_argument():
    templates = instruction_templates()
    assert len(templates) == 11 and len(set(templates)) == 11
    for variant in range(11):
        text = instruction("Zoos", "Negative", "They confine animals", variant)
        assert "negative" in text and '"Zoos"' in text and '"They confine animals"' in text
        assert "{" not in text


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
