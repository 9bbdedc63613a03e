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


#: Records per batch of ``dataset/``'s Arrow file: what writing it holds at once.
BATCH = 100

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
    _save_dataset(jsonl, count, out_dir / "dataset")
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


def _save_dataset(jsonl: Path, records: int, target: Path) -> None:
    """``dataset.jsonl`` as a `datasets` folder (``save_to_disk``'s), replaced atomically.

    Written a batch of records at a time (`datasets`' `ArrowWriter`), never all held: the
    folder's state and info are those ``save_to_disk`` writes for these features.
    """
    import datasets
    from datasets.arrow_writer import ArrowWriter

    datasets.disable_progress_bars()
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
        empty = datasets.Dataset.from_dict({name: [] for name in features}, features=features)
        empty.save_to_disk(str(tmp))  # its state.json and dataset_info.json, and no shard
        if not records:
            return
        shard = "data-00000-of-00001.arrow"
        digest = hashlib.sha256()
        with ArrowWriter(
            features=features, path=str(tmp / shard), writer_batch_size=BATCH
        ) as writer:
            with jsonl.open(encoding="utf-8") as f:
                for line in f:
                    digest.update(line.encode("utf-8"))
                    writer.write(json.loads(line))
            writer.finalize()
        state = json.loads((tmp / "state.json").read_text(encoding="utf-8"))
        # the records' own fingerprint, not the empty table's (the same for every dataset):
        # `datasets` names the cache files of a loaded dataset's transforms by it
        state["_data_files"], state["_fingerprint"] = [{"filename": shard}], digest.hexdigest()[:16]
        (tmp / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))

    atomic_replace_dir(build, target)
