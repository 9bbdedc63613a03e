"""Preference pairs from moot's judgments: trl's ``{prompt, chosen, rejected}`` (issue 35).

Three sources, each read without trusting a verdict it does not hold:

- **Pairwise quality** (`moot eval quality`): a response and the baseline's to one instruction,
  judged in both orders. A pair is kept only where the two orders agree on a winner (the record
  is not ``inconsistent`` and its ``outcome`` is a win or a loss); a tie, orders that disagree
  (DEBATunE counts "one win and a tie" as a win, a preference must not) or an order the judge's
  reply could not be read are dropped, each counted by why.
- **Controllability** (`moot eval controllability`, several runs on the same instructions): for
  one instruction, a response that holds its stance (judged exactly 100% on its side, as CC_P and
  CC_N count it: DEBATunE §4) is chosen against each one that does not.
- **Scores** (CompQA's 0-19 totals, a custom judge's numbers): for one prompt, two answers whose
  scores differ by at least the margin; the higher is chosen.

The prompt is chat messages (``[{"role": "user", "content": instruction}]``), as trl's
conversational preference format has it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from moot.core.data.responses import Response

Record = dict[str, Any]


@dataclass(frozen=True)
class Pair:
    """One preference: for `prompt`, `chosen` over `rejected`.

    Attributes:
        prompt: The chat messages both answers answer.
        chosen: The preferred answer.
        rejected: The other.
        source: ``quality``, ``controllability`` or ``scores``.
        meta: Why (the judge's scores or reasons, the margin, the runs).
    """

    prompt: list[dict[str, str]]
    chosen: str
    rejected: str
    source: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """A digest of the prompt and both answers: the same pair from two sources is one."""
        blob = json.dumps([self.prompt, self.chosen, self.rejected], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_json(self) -> Record:
        """The record as trl reads it (each answer an assistant turn), moot's fields beside it."""
        return {
            "id": self.id,
            "prompt": self.prompt,
            "chosen": [{"role": "assistant", "content": self.chosen}],
            "rejected": [{"role": "assistant", "content": self.rejected}],
            "source": self.source,
            "meta": self.meta,
        }


@dataclass
class Built:
    """The pairs of one source, and the judgments dropped, counted by why."""

    source: str
    pairs: list[Pair] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def add(self, pair: Pair) -> None:
        """Keep `pair`, unless both its answers are one text (nothing to prefer)."""
        if pair.chosen == pair.rejected:
            self.dropped["the same answer on both sides"] += 1
        else:
            self.pairs.append(pair)


def prompt_of(instruction: str) -> list[dict[str, str]]:
    """The chat prompt of an instruction."""
    return [{"role": "user", "content": instruction}]


def quality_pairs(
    judgments: Iterable[Record], responses: Sequence[Response], baseline: Sequence[Response]
) -> Built:
    """Pairs from `moot eval quality`'s records, where both orders agree (module docstring).

    Args:
        judgments: The run's ``judgments.jsonl`` records.
        responses: The responses it judged (its ``--responses``).
        baseline: The baseline's (its ``--baseline``), aligned with `responses` by key.
    """
    texts = {mine.key: (mine, theirs) for mine, theirs in zip(responses, baseline, strict=True)}
    built = Built("quality")
    for record in judgments:
        key = (record.get("topic"), record.get("side"), record.get("argument"))
        outcome, inconsistent = record.get("outcome"), record.get("inconsistent")
        if record.get("status") != "ok" or outcome is None or inconsistent is None:
            built.dropped["not judged (an order unread, or the call failed)"] += 1
        elif key not in texts:
            built.dropped["not in the responses"] += 1
        elif inconsistent:
            built.dropped["orders disagree"] += 1
        elif outcome == "tie":
            built.dropped["tie"] += 1
        else:
            mine, theirs = texts[key]  # type: ignore[index]
            chosen, rejected = (mine, theirs) if outcome == "win" else (theirs, mine)
            meta = {
                "judgment": record.get("id"),
                "outcome": outcome,
                "reasons": [
                    (record.get(order) or {}).get("replies") for order in ("forward", "reverse")
                ],
            }
            prompt = prompt_of(mine.instruction)
            built.add(Pair(prompt, chosen.response, rejected.response, "quality", meta))
    return built


def holds_stance(record: Record) -> bool | None:
    """Whether a controllability judgment says the response holds its side: exactly 100%.

    None when the judge gave no value (the call failed, or its reply could not be read).
    """
    value = (record.get("judgment") or {}).get("value")
    if record.get("status") != "ok" or not isinstance(value, dict):
        return None
    share = value.get("support" if record.get("side") == "affirmative" else "oppose")
    return None if share is None else share == 100


def controllability_pairs(runs: Sequence[tuple[Iterable[Record], Sequence[Response]]]) -> Built:
    """Pairs across controllability runs: a response holding its stance over one that does not.

    Args:
        runs: Per run, its ``judgments.jsonl`` records and the responses it judged.
    """
    built = Built("controllability")
    by_key: dict[Hashable, list[tuple[Response, bool, int]]] = {}
    for number, (judgments, responses) in enumerate(runs):
        texts = {response.key: response for response in responses}
        for record in judgments:
            key = (record.get("topic"), record.get("side"), record.get("argument"))
            held = holds_stance(record)
            if held is None:
                built.dropped["not judged (the call failed or its reply unread)"] += 1
            elif key not in texts:
                built.dropped["not in the responses"] += 1
            else:
                by_key.setdefault(key, []).append((texts[key], held, number))  # type: ignore[index]
    for found in by_key.values():
        kept = [(response, run) for response, held, run in found if held]
        lost = [(response, run) for response, held, run in found if not held]
        if not kept or not lost:
            built.dropped["no response on each side of the line"] += len(found)
        for chosen, run in kept if lost else []:
            for rejected, other in lost:
                meta = {"side": chosen.side, "runs": [run, other]}
                prompt = prompt_of(chosen.instruction)
                built.add(Pair(prompt, chosen.response, rejected.response, "controllability", meta))
    return built


@dataclass(frozen=True)
class Scored:
    """One answer with its judge's score.

    Attributes:
        prompt: What it answers (the chat messages).
        answer: The answer.
        score: Its score, or None where the judge gave none.
        origin: Where it comes from (a generator, a run), kept in the pair's metadata.
    """

    prompt: list[dict[str, str]]
    answer: str
    score: float | None
    origin: str = ""


def scored_pairs(answers: Iterable[Scored], min_margin: float) -> Built:
    """Pairs over the same prompt whose scores differ by at least `min_margin`.

    Every two answers to one prompt are compared; the higher score is chosen. Pairs closer than
    the margin (equal scores always), and answers without a score, are dropped and counted.
    """
    built = Built("scores")
    by_prompt: dict[str, list[Scored]] = {}
    for answer in answers:
        if answer.score is None:
            built.dropped["no score"] += 1
            continue
        by_prompt.setdefault(json.dumps(answer.prompt), []).append(answer)
    for group in by_prompt.values():
        for one, two in combinations(group, 2):
            high, low = sorted((one, two), key=lambda answer: answer.score, reverse=True)
            if high.score == low.score or high.score - low.score < min_margin:  # type: ignore[operator]
                built.dropped["closer than the margin"] += 1
                continue
            meta = {"scores": [high.score, low.score], "origins": [high.origin, low.origin]}
            built.add(Pair(high.prompt, high.answer, low.answer, "scores", meta))
    return built
