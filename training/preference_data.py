"""Preference pairs from moot's judgments: trl's ``{prompt, chosen, rejected}`` (issue 35).

Five sources, each read without trusting a verdict it does not hold:

- **Pairwise quality** (`moot eval quality`): a response and the baseline's to one instruction,
  judged in both orders. A pair is kept only where the two orders agree on a winner (the record
  is not ``inconsistent`` and its ``outcome`` is a win or a loss); a tie, orders that disagree
  (DEBATunE counts "one win and a tie" as a win, a preference must not) or an order the judge's
  reply could not be read are dropped, each counted by why. A judgment counts only if it is of
  the texts in the files now (its id is the one the evaluation gives that pair today):
  ``judgments.jsonl`` keeps earlier runs' records, and a file edited since holds other texts.
- **Controllability** (`moot eval controllability`, several runs on the same instructions): for
  one instruction, a response that holds its stance (judged exactly 100% on its side, as CC_P and
  CC_N count it: DEBATunE §4) is chosen against each one that does not. One text is one response,
  whatever runs judged it; a text judged holding in one run and not in another is dropped. As
  for quality, only judgments of the texts in the files now count.
- **Scores** (CompQA's 0-19 totals, a custom judge's mean verdicts, Debatrix's 1-10 scores):
  for one prompt, two answers whose scores differ by at least the margin, in the source's own
  points; the higher is chosen. An answer scored several times (repeats, several judge runs) is
  one answer with the mean of its scores, so its judgments never make pairs that contradict.
- **A custom judge** (`moot eval judge`): under ``mean`` its verdicts are scores, as above;
  under ``both_orders`` a pair is kept as a quality pair is (the verdict a win or a loss, no
  juror's two orders disagreeing). A ``majority`` verdict is a vote, not a score: no pair.
- **Debatrix** (`moot judge` of `moot debate` records): the preference is over DEBATunE's SFT
  target, the conclusion debater A writes after the debate (DEBATunE §3.1, Figure 1: "a more
  salient, detailed, and higher-quality statement" built on the debate). Debatrix scores each
  debater 1-10 from the analyses of its speeches (Debatrix §3.1, §5.1: "integers from 1 to 10");
  it never reads the conclusion, and compares scores within a debate (§5.3), where moot compares
  them across debates. So for one argument (topic, stance, argument) debated several
  times, the conclusion of the debate whose debater A (the side holding the argument) got the
  higher final score is chosen over the other's, at least the margin apart: the conclusion of
  the better-argued debate is taken as the better statement, which is DEBATunE's premise, not a
  judgment of the conclusion itself. A judgment of a debate changed since (its id is not the
  one `moot judge` gives the debate now) counts as one of a debate no longer there. The prompt
  is DEBATunE's inference instruction
  (paraphrase 0, `moot.training.debatune_data.instruction`).

The prompt is chat messages (``[{"role": "user", "content": instruction}]``), as trl's
conversational preference format has it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from statistics import fmean as mean
from typing import Any

from moot.core.data.debates import is_debatune_record
from moot.core.data.responses import Response, controllability_id, quality_id
from moot.core.metrics.debatune import holds_stance
from moot.training.debatune_data import instruction

Record = dict[str, Any]


@dataclass(frozen=True)
class Pair:
    """One preference: for `prompt`, `chosen` over `rejected`.

    Attributes:
        prompt: The chat messages both answers answer.
        chosen: The preferred answer.
        rejected: The other.
        source: ``quality``, ``controllability``, ``compqa``, ``judge`` or ``debatrix``.
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
        """Keep `pair`, unless an answer is blank or both are one text (nothing to prefer)."""
        if not (pair.chosen.strip() and pair.rejected.strip()):
            self.dropped["an empty answer"] += 1
        elif pair.chosen == pair.rejected:
            self.dropped["the same answer on both sides"] += 1
        else:
            self.pairs.append(pair)


def unique(pairs: Iterable[Pair]) -> tuple[list[Pair], int, Counter[str]]:
    """One pair per prompt and two answers: the kept, the duplicates, the drops by source.

    The same pair twice is kept once (the first); two pairs preferring the same two answers in
    opposite directions are both dropped (``sources disagree``).
    """
    by_answers: dict[tuple[str, frozenset[str]], list[Pair]] = {}
    for pair in pairs:
        answers = frozenset((pair.chosen, pair.rejected))
        by_answers.setdefault((json.dumps(pair.prompt), answers), []).append(pair)
    kept, duplicates, dropped = [], 0, Counter[str]()
    for same in by_answers.values():
        if len({pair.chosen for pair in same}) > 1:
            dropped.update(f"{pair.source}: sources disagree" for pair in same)
        else:
            kept.append(same[0])
            duplicates += len(same) - 1
    return kept, duplicates, dropped


def prompt_of(instruction: str) -> list[dict[str, str]]:
    """The chat prompt of an instruction."""
    return [{"role": "user", "content": instruction}]


def quality_pairs(
    judgments: Iterable[Record],
    responses: Sequence[Response],
    baseline: Sequence[Response],
    identity: Mapping[str, Any],
    mask: Sequence[str],
) -> Built:
    """Pairs from `moot eval quality`'s records, where both orders agree (module docstring).

    Args:
        judgments: The run's ``judgments.jsonl`` records.
        responses: The responses it judged (its ``--responses``).
        baseline: The baseline's (its ``--baseline``), aligned with `responses`
            (`moot.core.data.responses.align`).
        identity: The run's judge identity, as its ids hold it.
        mask: The words it masked.
    """
    pairs = list(zip(responses, baseline, strict=True))
    texts = {quality_id(identity, mine, theirs, mask): (mine, theirs) for mine, theirs in pairs}
    built = Built("quality")
    for record in judgments:
        outcome, inconsistent = record.get("outcome"), record.get("inconsistent")
        if not (found := _current(record, texts, {mine.key for mine, _ in pairs}, built)):
            continue
        if record.get("status") != "ok" or outcome is None or inconsistent is None:
            built.dropped["not judged (an order unread, or the call failed)"] += 1
        elif why := no_winner(outcome, inconsistent):
            built.dropped[why] += 1
        else:
            mine, theirs = found
            chosen, rejected = (mine, theirs) if outcome == "win" else (theirs, mine)
            meta = {"judgment": record.get("id"), "outcome": outcome, "reasons": replies(record)}
            prompt = prompt_of(mine.instruction)
            built.add(Pair(prompt, chosen.response, rejected.response, "quality", meta))
    return built


def _current(record: Record, texts: Mapping[str, Any], keys: set[Any], built: Built) -> Any:
    """What `record` judged if it is of the texts in the files now (`texts` by id), else None.

    A record whose id no text now has is counted: its instruction is no longer in the files, or
    it judged texts the files no longer hold (an earlier run's, or a file edited since).
    """
    if record.get("id") in texts:
        return texts[record["id"]]
    key = (record.get("topic"), record.get("side"), record.get("argument"))
    built.dropped[
        "judged texts differ from the files now" if key in keys else "not in the responses"
    ] += 1
    return None


def replies(judged: Record) -> list[Any]:
    """A pairwise judgment's replies in each order: the forward's, then the reverse's."""
    return [(judged.get(order) or {}).get("replies") for order in ("forward", "reverse")]


def no_winner(outcome: str, inconsistent: bool) -> str | None:
    """Why a judgment read in both orders makes no pair; None where both orders name one winner.

    Orders that disagree come first: DEBATunE counts one win and a tie as a win, a preference
    must not.
    """
    if inconsistent:
        return "orders disagree"
    return "tie" if outcome == "tie" else None


def controllability_pairs(
    runs: Sequence[tuple[Iterable[Record], Sequence[Response], Mapping[str, Any]]],
) -> Built:
    """Pairs across controllability runs: a response holding its stance over one that does not.

    One text judged in several runs is one response: verdicts that disagree on it (held in
    one, not in another) drop it, so no text is both chosen and rejected.

    Args:
        runs: Per run, its ``judgments.jsonl`` records, the responses it judged and its judge
            identity, as its ids hold it.
    """
    built = Built("controllability")
    # per instruction, per text: its response, and the verdicts (held or not) and runs
    by_key: dict[Hashable, dict[str, tuple[Response, list[bool], list[int]]]] = {}
    for number, (judgments, responses, identity) in enumerate(runs):
        texts = {controllability_id(identity, response): response for response in responses}
        keys = {response.key for response in responses}
        for record in judgments:
            if not (response := _current(record, texts, keys, built)):
                continue
            value = (record.get("judgment") or {}).get("value")
            if record.get("status") != "ok" or not isinstance(value, dict):
                built.dropped["not judged (the call failed or its reply unread)"] += 1
                continue
            same = by_key.setdefault(response.key, {})
            _, verdicts, numbers = same.setdefault(response.response, (response, [], []))
            verdicts.append(holds_stance(response.side, value))
            numbers.append(number)
    for found in by_key.values():
        kept, lost = [], []
        for response, verdicts, numbers in found.values():
            if len(set(verdicts)) > 1:
                built.dropped["judges disagree"] += len(verdicts)
            else:
                (kept if verdicts[0] else lost).append((response, sorted(set(numbers))))
        if not kept or not lost:
            built.dropped["no response on each side of the line"] += len(kept) + len(lost)
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


def scored_pairs(answers: Iterable[Scored], min_margin: float, source: str) -> Built:
    """Pairs over the same prompt whose scores differ by at least `min_margin`.

    Every two answers to one prompt are compared; the higher score is chosen. Pairs closer than
    the margin (equal scores always), answers without a score and answers alone on their prompt
    are dropped and counted. One
    text scored several times is one answer, with the mean of its scores (its origins joined).

    Args:
        answers: The scored answers.
        min_margin: The least difference, in the scores' own points.
        source: The pairs' source (``compqa``, ``judge``, ``debatrix``).
    """
    built = Built(source)
    scores: dict[tuple[str, str], list[Scored]] = {}
    for answer in answers:
        if answer.score is None:
            built.dropped["no score"] += 1
        else:
            scores.setdefault((json.dumps(answer.prompt), answer.answer), []).append(answer)
    by_prompt: dict[str, list[Scored]] = {}
    for (prompt, _), same in scores.items():
        origins = ", ".join(dict.fromkeys(answer.origin for answer in same))
        score = same[0].score if len(same) == 1 else mean(a.score for a in same)  # type: ignore[misc]
        merged = Scored(same[0].prompt, same[0].answer, score, origins)
        by_prompt.setdefault(prompt, []).append(merged)
    for group in by_prompt.values():
        if len(group) == 1:
            built.dropped["no other answer to its prompt"] += 1
        for one, two in combinations(group, 2):
            high, low = sorted((one, two), key=lambda answer: answer.score, reverse=True)
            # a margin met up to rounding: 8.667 - 6.667 (means of three) is 2
            apart = high.score - low.score  # type: ignore[operator]
            if high.score == low.score or apart < min_margin - 1e-9:
                built.dropped["closer than the margin"] += 1
                continue
            meta = {"scores": [high.score, low.score], "origins": [high.origin, low.origin]}
            built.add(Pair(high.prompt, high.answer, low.answer, source, meta))
    return built


def judge_score_pairs(
    records: Iterable[Record], prompt: str, answer: str, min_margin: float
) -> Built:
    """Scored pairs from a ``mean`` custom judge's records: its verdicts are the scores.

    Args:
        records: The run's ``judgments.jsonl`` records.
        prompt: The item field that is the prompt.
        answer: The item field that is the answer judged.
        min_margin: The least verdict difference, in the judge's own points.
    """
    answers, dropped = [], Counter[str]()
    for record in records:
        item = record.get("input") or {}
        if record.get("status") != "ok":
            dropped["the call failed"] += 1
        elif record.get("verdict") is None:
            dropped["no verdict (no juror's reply read)"] += 1
        else:
            asked = prompt_of(str(item[prompt]))
            answers.append(Scored(asked, str(item[answer]), record["verdict"], record["place"]))
    built = scored_pairs(answers, min_margin, "judge")
    built.dropped.update(dropped)
    return built


def judge_order_pairs(records: Iterable[Record], prompt: str, a: str, b: str) -> Built:
    """Pairs from a ``both_orders`` custom judge's records, kept as quality pairs are.

    The jury's verdict must be A's win or loss and no juror's two orders may disagree; a tie, a
    split jury, an item no juror's verdict was read for, and a failed call are dropped.

    Args:
        records: The run's ``judgments.jsonl`` records.
        prompt: The item field that is the prompt.
        a: The field shown first in the forward order (the spec's ``aggregation.a``).
        b: The other (``aggregation.b``).
    """
    built = Built("judge")
    for record in records:
        item, outcome = record.get("input") or {}, record.get("verdict")
        jurors = (record.get("jurors") or {}).values()
        inconsistent = any(juror.get("inconsistent") for juror in jurors)
        if record.get("status") != "ok":
            built.dropped["the call failed"] += 1
        elif outcome is None:
            read = any(v is not None for v in (record.get("verdicts") or {}).values())
            built.dropped["the jury split" if read else "no verdict (an order unread)"] += 1
        elif why := no_winner(outcome, inconsistent):
            built.dropped[why] += 1
        else:
            chosen, rejected = (a, b) if outcome == "win" else (b, a)
            meta = {
                "judgment": record.get("id"),
                "outcome": outcome,
                "reasons": {
                    name: replies(juror) for name, juror in (record.get("jurors") or {}).items()
                },
            }
            asked = prompt_of(str(item[prompt]))
            built.add(Pair(asked, str(item[chosen]), str(item[rejected]), "judge", meta))
    return built


#: Why a `moot judge` judgment that is not complete makes no pair, by its status.
UNFINISHED = {
    "incomplete": "judgment incomplete (a prompt over the context window)",
    "error": "judgment failed (a judge call)",
}


def debatrix_pairs(judged: Iterable[tuple[Record, Record | None]], min_margin: float) -> Built:
    """Scored pairs of `moot debate` conclusions by debater A's Debatrix score (module docstring).

    Debater A holds the record's stance, and a judged `moot debate` names each debater by its
    side: A's score is ``final.debaters[stance].score``.

    Args:
        judged: Each `moot judge` judgment with the debates-file record it judged (None: the
            file no longer holds it as judged).
        min_margin: The least difference of A's final scores, in points of 1-10.
    """
    answers, dropped = [], Counter[str]()
    for judgment, debate in judged:
        status = judgment.get("status")
        if status != "complete":
            dropped[UNFINISHED.get(status, f"judgment {status}")] += 1
        elif debate is None:
            dropped["its debate not in its debates file as judged"] += 1
        elif not is_debatune_record(debate):
            dropped["not a moot debate record (no conclusion)"] += 1
        elif not isinstance(debate.get("conclusion"), str):
            dropped["its debate has no conclusion"] += 1
        else:
            mine = ((judgment.get("final") or {}).get("debaters") or {}).get(debate["stance"])
            if not isinstance(mine, dict) or mine.get("score") is None:
                dropped["debater A's score unread"] += 1
                continue
            asked = prompt_of(instruction(debate["topic"], debate["stance"], debate["argument"]))
            answers.append(Scored(asked, debate["conclusion"], mine["score"], debate["id"]))
    built = scored_pairs(answers, min_margin, "debatrix")
    built.dropped.update(dropped)
    return built
