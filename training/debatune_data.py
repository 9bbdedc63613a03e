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
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from moot.core.data.records import atomic_replace_dir, atomic_write, write_json
from moot.prompts import load_yaml
from moot.training.dataset_folder import save_table

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


#: Which ``dataset.jsonl`` the ``dataset/`` copy was last made from (its SHA-256), in ``.moot/``.
DATASET_MARK = "dataset.json"


def write_sft_dataset(
    debates: Iterable[dict[str, Any]], out_dir: Path, seed: int = 0, *, reuse: bool = False
) -> int:
    """Write ``dataset.jsonl`` and a `datasets` copy (``dataset/``) of the successful debates.

    Both are replaced atomically, and streamed: a record is written as it is made, nothing is
    held per debate (a run of 100,000 debates would otherwise hold them all, several times, at
    its end). With `reuse`, a folder whose two files already hold exactly these records is left
    alone: a rerun that found every debate done neither imports `datasets` nor rewrites them.
    The proof is a mark in ``.moot/`` (`DATASET_MARK`) written after ``dataset/``: the SHA-256
    of the ``dataset.jsonl`` it was made from, which must match both the file on disk and the
    records now.

    Returns:
        The number of records.
    """
    out_dir = Path(out_dir)
    jsonl, mark = out_dir / "dataset.jsonl", out_dir / ".moot" / DATASET_MARK
    made = _made_from(mark, jsonl) if reuse else None
    digest, count = hashlib.sha256(), 0

    def write(f: Any) -> None:
        nonlocal count
        for debate in debates:
            if debate.get("status") == "ok":
                line = (json.dumps(sft_record(debate, seed), ensure_ascii=False) + "\n").encode()
                digest.update(line)
                f.write(line)
                count += 1
        if digest.hexdigest() == made:
            raise _Unchanged  # atomic_write drops its temporary file: nothing is rewritten

    try:
        atomic_write(jsonl, write, binary=True)
    except _Unchanged:
        return count
    _save_dataset(jsonl, out_dir / "dataset")
    if reuse:
        write_json(mark, {"dataset.jsonl": digest.hexdigest()})
    return count


class _Unchanged(Exception):
    """``dataset.jsonl`` would be written as it is."""


def _made_from(mark: Path, jsonl: Path) -> str | None:
    """The digest `mark` holds if ``dataset.jsonl`` and ``dataset/`` are still what it says."""
    try:
        made = json.loads(mark.read_text(encoding="utf-8"))["dataset.jsonl"]
        with jsonl.open("rb") as f:
            now = hashlib.file_digest(f, "sha256").hexdigest()
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return made if made == now and (jsonl.parent / "dataset" / "state.json").is_file() else None


def _save_dataset(jsonl: Path, target: Path) -> None:
    """``dataset.jsonl`` as a `datasets` folder (``save_to_disk``'s), replaced atomically.

    Written a batch of records at a time (`moot.training.dataset_folder`), never all held.
    """
    import datasets

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

    def build(tmp: Path) -> None:
        with jsonl.open(encoding="utf-8") as f:
            save_table((json.loads(line) for line in f), tmp, features)

    atomic_replace_dir(build, target)
