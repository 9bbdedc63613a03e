"""DEBATunE SFT records from finished debates.

Each successful debate becomes one record: the user turn is one of the eleven instruction
paraphrases the reference builds its SFT records with (``prompts/debatune/instructions.yaml``, from
its ``code_debate/make_dataset_train.py``), the side lower-cased as there; the reference draws one
with an unseeded ``random.choice``, moot by a seeded hash of the debate id, so reruns and shards
agree. The assistant turn is the supporting agent's conclusion. Records carry both a ``messages``
column (chat SFT with assistant-only loss) and ``prompt``/``completion`` columns (completion-only
loss).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from moot.core.data.records import atomic_replace_dir, write_jsonl
from moot.prompts import load_yaml

INSTRUCTIONS_FILE = "debatune/instructions.yaml"


def instruction_templates() -> list[str]:
    """The reference's eleven SFT paraphrases; the first is also its inference instruction."""
    return list(load_yaml(INSTRUCTIONS_FILE))


def instruction(topic: str, stance: str, argument: str, variant: int = 0) -> str:
    """The DEBATunE instruction for a topic, stance and argument (variant 0: inference's)."""
    template = instruction_templates()[variant]
    return template.format(side=stance.lower(), topic=topic, argument=argument)


def sft_record(debate: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The SFT record for one successful debate record (see docs/schemas.md)."""
    variants = len(instruction_templates())
    digest = hashlib.sha256(f"{seed}:{debate['id']}".encode()).digest()
    variant = int.from_bytes(digest[:4], "big") % variants
    prompt = instruction(debate["topic"], debate["stance"], debate["argument"], variant)
    completion = debate["conclusion"]
    return {
        "id": debate["id"],
        "topic": debate["topic"],
        "stance": debate["stance"],
        "argument": debate["argument"],
        "instruction_variant": variant,
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": completion},
        ],
        "prompt": prompt,
        "completion": completion,
    }


def sft_records(debates: Iterable[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """The SFT records of the successful debates, in order (what ``dataset.jsonl`` holds)."""
    return [sft_record(d, seed) for d in debates if d.get("status") == "ok"]


def write_sft_dataset(debates: Iterable[dict[str, Any]], out_dir: Path, seed: int = 0) -> int:
    """Write ``dataset.jsonl`` and a `datasets` copy (``dataset/``) of the successful debates.

    Both are replaced atomically. Returns the number of records.
    """
    import datasets

    datasets.disable_progress_bars()
    records = sft_records(debates, seed)
    write_jsonl(out_dir / "dataset.jsonl", records)
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "topic": datasets.Value("string"),
            "stance": datasets.Value("string"),
            "argument": datasets.Value("string"),
            "instruction_variant": datasets.Value("int32"),
            "messages": datasets.List(
                {"role": datasets.Value("string"), "content": datasets.Value("string")}
            ),
            "prompt": datasets.Value("string"),
            "completion": datasets.Value("string"),
        }
    )
    columns = {name: [record[name] for record in records] for name in features}
    table = datasets.Dataset.from_dict(columns, features=features)  # also right when empty
    atomic_replace_dir(lambda tmp: table.save_to_disk(str(tmp)), out_dir / "dataset")
    return len(records)
