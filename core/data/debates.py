"""Debates to judge: one schema, three ways in.

Accepted by ``moot judge --debates`` (and ``moot eval panelbench --gold``):

* JSONL, or a JSON list (or a single JSON object), of moot debate records — the PanelBench
  normalised shape (``../shared/data/panelbench/debateart.jsonl``) is one::

      {"id": "d1", "motion": "...", "info_slide": "...", "format": "1v1",
       "pro": ["Alice"], "con": ["Bob"], "speech_order": ["Alice", "Bob"],
       "speeches": [{"speaker": "Alice", "content": "..."}, {"speaker": "Bob", ...}],
       "gold": {"final": 0.0, "dimensions": {"argument": 0.0}}}

  ``info_slide``, ``speech_order``, ``format`` and ``gold`` are optional. ``format`` is ``1v1``
  or ``bp`` (British Parliamentary: teams OG and CG for the motion, OO and CO against); it
  defaults to ``bp`` when the teams are exactly those four. Gold labels are 0 (pro wins), 0.5
  (tie) and 1 (con wins); a BP debate's gold is ``{"winners": ["OG", "CG"]}`` (or ``"OG,CG"``):
  every winning team (two go through from a semifinal or quarterfinal).
* The ``debates.jsonl`` written by ``moot debate`` (DEBATunE records, see docs/schemas.md)::

      {"id": "32995daf93df4780", "topic": "...", "stance": "Negative", "argument": "...",
       "status": "ok", "transcript": [{"speaker": "A", "side": "Negative", "round": 0,
       "text": "..."}, ...], "conclusion": "...", ...}

  The topic is the motion. The two debaters are named by their side, ``Affirmative`` (pro) and
  ``Negative`` (con); debater A holds the record's stance, so a Negative record has A on the con
  side. The turns are the speeches, in order. The argument debated goes into the info slide (as
  ``<stance> argument: <argument>``), the background the judge is given. The conclusion is not a
  speech (it is A's statement after the debate), so it is not judged. A record whose ``status``
  is not ``ok`` is skipped and counted in `Debates.skipped`; if one id has several lines (a run
  that was interrupted before compacting its log), the last one wins, as for ``moot debate``.
* A PanelBench folder as released (github.com/ljcleo/debatrix, ``PanelBench/data``):
  ``motion/*.yml`` and ``speech/*.yml`` side by side. DebateArt: motions list
  ``pro_side``/``con_side`` as ``[{name}]``, speeches ``debater_name``, gold in
  ``gold/final.csv`` and ``gold/dimension.csv`` (``dart_id``). BP-Competition: motions list
  ``pro_speakers``/``con_speakers``, speeches ``speaker_name``, teams named like
  ``Opening_Government_(OG)``, the winning teams in ``gold/gold.csv`` as ``bp_id,label``
  with labels such as ``OG,CG``.

A debate whose four debaters are the BP teams, by code (``OG``) or by the released long name
(``Opening_Government_(OG)``), is a BP debate; its teams are named by their codes from then on
(the paper, Table 4: "Debater names are fixed to OG, OO, CG, and CO").

Every record is checked: speakers must be debaters, speeches non-empty, the speech order must
match the speeches, ids unique. Problems are `InputError`s naming the file and the record.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from moot.core.data.records import (
    csv_rows,
    read_input_text,
    read_records,
    refuse_surrogates,
    stable_id,
)
from moot.core.data.topics import STANCES
from moot.core.errors import InputError, json_type
from moot.core.loader import Unreadable, load_yaml

Format = Literal["1v1", "bp"]
BP_TEAMS = ("OG", "OO", "CG", "CO")  # speaking order of the first four speeches
_BP_NAME = re.compile(r"(?:.*\()?(OG|OO|CG|CO)\)?")  # "OG" or "Opening_Government_(OG)"
LABELS = {"pro": 0.0, "tie": 0.5, "con": 1.0}
# The paper calls source and language a tie within 3 points; elsewhere only equal scores tie.
TIE_MARGINS = {"source": 3.0, "language": 3.0}


@dataclass(frozen=True)
class Speech:
    """One speech: who gave it and what was said."""

    speaker: str
    content: str


@dataclass(frozen=True)
class Debate:
    """A finished debate to judge, with gold labels when known.

    Args:
        id: Unique id within its file.
        motion: What is debated.
        pro: Debaters (or BP teams) for the motion.
        con: Debaters (or BP teams) against it.
        speeches: In speaking order.
        info_slide: Background given to the debaters.
        format: ``1v1`` (pro against con) or ``bp`` (four teams).
        gold: Gold labels (see the module docstring), or empty.
    """

    id: str
    motion: str
    pro: tuple[str, ...]
    con: tuple[str, ...]
    speeches: tuple[Speech, ...]
    info_slide: str = ""
    format: Format = "1v1"
    gold: dict[str, Any] = field(default_factory=dict)

    @property
    def debaters(self) -> tuple[str, ...]:
        """Every debater (or team), pro side first."""
        return self.pro + self.con

    def side(self, debater: str) -> str:
        """``pro`` or ``con``."""
        return "pro" if debater in self.pro else "con"

    def label(self, winner: str) -> float:
        """The PanelBench label of a verdict: 0 pro wins, 0.5 tie, 1 con wins."""
        return LABELS["tie" if winner == "tie" else self.side(winner)]


def judgment_id(identity: Mapping[str, Any], debate: Debate, repeat: int) -> str:
    """The id `moot judge` gives its judgment `repeat` of `debate` (identity: its settings').

    It holds the debate as judged (motion, debaters, speeches), so a judgment of a debate that
    has changed since is told from one of the debate as it is.
    """
    content = {
        "id": debate.id,
        "motion": debate.motion,
        "info_slide": debate.info_slide,
        "pro": debate.pro,
        "con": debate.con,
        "speeches": [[s.speaker, s.content] for s in debate.speeches],
    }
    return stable_id("judge", identity, content, repeat)


class Debates(list[Debate]):
    """Debates to judge, in input order, and how many records were skipped.

    Args:
        debates: The debates.
        skipped: ``moot debate`` records left out because their status is not ``ok``.
    """

    def __init__(self, debates: Iterable[Debate] = (), skipped: int = 0) -> None:
        super().__init__(debates)
        self.skipped = skipped


def load_debates(source: str | Path) -> Debates:
    """Load and validate debates from a JSON/JSONL file or a DebateArt folder.

    Returns:
        The debates; ``skipped`` counts ``moot debate`` records whose status is not ``ok``.

    Raises:
        InputError: Missing or malformed input, a debate that fails validation, or no debate
            left to judge.
    """
    path = Path(source)
    skipped = 0
    if path.is_dir():
        debates = _debateart_folder(path)
    else:
        debates, records = [], list(read_records(path))
        # `moot debate` appends to its log: until a run compacts it, an id's last line wins
        latest = {
            r["id"]: where for where, r in records if is_debatune_record(r) and _has_text_id(r)
        }
        for where, record in records:
            if not is_debatune_record(record):
                debates.append(_debate(path, where, record))
            elif _has_text_id(record) and latest[record["id"]] != where:
                continue
            elif record.get("status") != "ok":
                skipped += 1
            else:
                debates.append(_debatune(path, where, record))
    if not debates:
        if skipped:
            problem = (
                f"no debate to judge: all {skipped} debate records have a status other than 'ok'"
            )
            raise InputError(path, problem)
        raise InputError(path, "no debates found")
    seen: set[str] = set()
    for debate in debates:
        if debate.id in seen:
            raise InputError(path, "duplicate id", f"debate {debate.id!r}")
        seen.add(debate.id)
    return Debates(debates, skipped)


def _debate(path: Path, where: str, record: Any) -> Debate:
    """Validate one record of the moot schema."""
    fail = _failer(path, where, record)
    if not isinstance(record, dict):
        raise fail("expected a JSON object")
    for key in ("id", "motion", "pro", "con", "speeches"):
        if key not in record:
            raise fail(f"missing {key!r}")
    debate_id = record["id"]
    if isinstance(debate_id, bool) or not isinstance(debate_id, str | int):
        raise fail(f"'id' must be text or an integer, got {json_type(debate_id)}")
    if not str(debate_id).strip():
        raise fail("empty 'id'")
    if not isinstance(record["motion"], str):
        raise fail(f"'motion' must be text, got {json_type(record['motion'])}")
    if not record["motion"].strip():
        raise fail("empty motion")
    info_slide = record.get("info_slide")
    if info_slide is not None and not isinstance(info_slide, str):
        raise fail(f"'info_slide' must be text, got {json_type(info_slide)}")
    pro, con = (_names(record[side], side, fail) for side in ("pro", "con"))
    teams = _bp_codes(pro + con)
    if teams:  # BP teams under any of their names: from now on, by their codes
        record = _renamed(record, teams)
        pro, con = tuple(teams[n] for n in pro), tuple(teams[n] for n in con)
    if set(pro) & set(con):
        raise fail(f"{sorted(set(pro) & set(con))[0]!r} is on both sides")
    if not isinstance(record["speeches"], list) or not record["speeches"]:
        raise fail("no speeches")
    speeches = []
    for number, speech in enumerate(record["speeches"], start=1):
        if not isinstance(speech, dict) or not {"speaker", "content"} <= speech.keys():
            raise fail(f"speech {number}: expected {{'speaker', 'content'}}")
        speaker, content = speech["speaker"], speech["content"]
        if speaker not in pro + con:
            raise fail(f"speech {number}: unknown speaker {speaker!r} (debaters: {pro + con})")
        if not isinstance(content, str):
            raise fail(f"speech {number}: 'content' must be text, got {json_type(content)}")
        if not content.strip():
            raise fail(f"speech {number} by {speaker!r} is empty")
        speeches.append(Speech(speaker, content))
    order = record.get("speech_order")
    if order is not None and not isinstance(order, list):
        raise fail(f"'speech_order' must be a list, got {json_type(order)}")
    if order is not None:
        spoken = [s.speaker for s in speeches]
        if list(order) != spoken:
            raise fail(f"speech_order {list(order)} does not match the speeches' speakers {spoken}")
    debate_format = record.get("format", "bp" if teams else "1v1")
    if debate_format not in ("1v1", "bp"):
        raise fail(f"unknown format {debate_format!r} (expected '1v1' or 'bp')")
    if debate_format == "bp" and (set(pro) != {"OG", "CG"} or set(con) != {"OO", "CO"}):
        raise fail("a BP debate has pro ['OG', 'CG'] and con ['OO', 'CO']")
    gold = record.get("gold") or {}
    if not isinstance(gold, dict):
        raise fail("gold must be an object")
    _check_gold(gold, debate_format, pro + con, fail)
    return Debate(
        id=str(debate_id),
        motion=record["motion"].strip(),
        pro=pro,
        con=con,
        speeches=tuple(speeches),
        info_slide=(info_slide or "").strip(),
        format=debate_format,
        gold=gold,
    )


def _bp_codes(names: tuple[str, ...]) -> dict[str, str] | None:
    """Each name's team code when the names are the four BP teams, else None."""
    matches = [_BP_NAME.fullmatch(name.strip()) for name in names]
    codes = [m.group(1) for m in matches if m]
    if len(codes) != len(names) or sorted(codes) != sorted(BP_TEAMS):
        return None
    return dict(zip(names, codes, strict=True))


def _renamed(record: dict[str, Any], teams: dict[str, str]) -> dict[str, Any]:
    """The record with its speakers, speech order and gold winners named by team code."""
    speeches = (
        [
            {**s, "speaker": teams.get(s["speaker"], s["speaker"])}
            if isinstance(s, dict) and isinstance(s.get("speaker"), str)
            else s
            for s in record["speeches"]
        ]
        if isinstance(record["speeches"], list)
        else record["speeches"]
    )
    order = record.get("speech_order")
    if isinstance(order, list):
        order = [teams.get(name, name) if isinstance(name, str) else name for name in order]
    gold = record.get("gold")
    if isinstance(gold, dict) and "winners" in gold:
        winners = gold["winners"]
        if isinstance(winners, str):  # the released gold.csv form, "OG,CG"
            winners = [w.strip() for w in winners.split(",")]
        if isinstance(winners, list):
            long = {name.strip(): code for name, code in teams.items()}
            winners = [long.get(w, w) if isinstance(w, str) else w for w in winners]
        gold = {**gold, "winners": winners}
    return {**record, "speeches": speeches, "speech_order": order, "gold": gold}


def is_debatune_record(record: Any) -> bool:
    """A ``moot debate`` record: a transcript instead of a motion and speeches."""
    return isinstance(record, dict) and "transcript" in record and "motion" not in record


def _has_text_id(record: dict[str, Any]) -> bool:
    return isinstance(record.get("id"), str)


def _debatune(path: Path, where: str, record: dict[str, Any]) -> Debate:
    """A finished ``moot debate`` record as a 1v1 debate (see the module docstring)."""
    fail = _failer(path, where, record)
    for key in ("topic", "stance", "transcript"):
        if key not in record:
            raise fail(f"missing {key!r}")
    topic, stance, argument = record["topic"], record["stance"], record.get("argument")
    if not isinstance(topic, str):
        raise fail(f"'topic' must be text, got {json_type(topic)}")
    if stance not in STANCES:
        raise fail(f"'stance' must be 'Affirmative' or 'Negative', got {stance!r}")
    if argument is not None and not isinstance(argument, str):
        raise fail(f"'argument' must be text, got {json_type(argument)}")
    if not isinstance(record["transcript"], list):
        raise fail(f"'transcript' must be a list, got {json_type(record['transcript'])}")
    sides = {"A": stance, "B": STANCES[1 - STANCES.index(stance)]}
    speeches = []
    for number, turn in enumerate(record["transcript"], start=1):
        if not isinstance(turn, dict) or turn.get("speaker") not in sides:
            raise fail(f"turn {number}: expected {{'speaker': 'A' or 'B', 'text'}}")
        side = sides[turn["speaker"]]
        if turn.get("side", side) != side:
            raise fail(f"turn {number}: debater {turn['speaker']} is {side}, not {turn['side']!r}")
        speeches.append({"speaker": side, "content": turn.get("text")})
    info_slide = f"{stance} argument: {argument}" if argument and argument.strip() else None
    motion = {"motion": topic, "info_slide": info_slide, "pro": [STANCES[0]], "con": [STANCES[1]]}
    return _debate(path, where, {"id": record.get("id"), **motion, "speeches": speeches})


def _failer(path: Path, where: str, record: Any) -> Callable[[str], InputError]:
    """An `InputError` maker naming the file, the place and the debate's id if it has one."""

    def fail(problem: str) -> InputError:
        name = record.get("id") if isinstance(record, dict) else None
        return InputError(path, problem, f"{where} (debate {name!r})" if name else where)

    return fail


def _names(value: Any, side: str, fail: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise fail(f"{side!r} must list at least one debater")
    if not all(isinstance(name, str) and name.strip() for name in value):
        raise fail(f"{side!r} holds an empty or non-text name")
    return tuple(value)


def _check_gold(gold: dict[str, Any], debate_format: str, debaters: tuple, fail: Any) -> None:
    if debate_format == "bp":
        winners = gold.get("winners")
        if winners is not None and (
            not isinstance(winners, list) or not winners or any(w not in BP_TEAMS for w in winners)
        ):
            raise fail(f"gold winners must be teams among {list(BP_TEAMS)}, got {winners}")
        return
    dimensions = gold.get("dimensions") or {}
    if not isinstance(dimensions, dict):
        raise fail(f"gold 'dimensions' must be an object, got {json_type(dimensions)}")
    labels = {"final": gold.get("final"), **dimensions}
    for name, label in labels.items():
        if label is not None and label not in LABELS.values():
            raise fail(f"gold label {name!r} must be 0, 0.5 or 1, got {label!r}")


def _debateart_folder(folder: Path) -> list[Debate]:
    """A PanelBench folder as released: motion/, speech/ and gold/ beside each other."""
    motions = sorted((folder / "motion").glob("*.yml"))
    if not motions:
        raise InputError(folder, "no motion/*.yml files (expected a PanelBench folder)")
    gold = {**_debateart_gold(folder / "gold"), **_bp_gold(folder / "gold" / "gold.csv")}
    debates = []
    for motion_path in motions:
        speech_path = folder / "speech" / motion_path.name
        motion, speeches = _yaml(motion_path), _yaml(speech_path)
        if not isinstance(motion, dict):
            raise InputError(motion_path, "expected a motion mapping")
        if not isinstance(speeches, list):
            raise InputError(speech_path, "expected a list of speeches")
        record = {
            "id": motion_path.stem,
            "motion": motion.get("motion"),
            "info_slide": motion.get("info_slide"),
            **{side: _side(motion, side) for side in ("pro", "con")},
            "speech_order": motion.get("speech_order"),
            "speeches": [
                {
                    "speaker": s.get("debater_name", s.get("speaker_name")),
                    "content": s.get("content"),
                }
                if isinstance(s, dict)
                else s
                for s in speeches
            ],
            "gold": _debateart_gold_for(motion_path, gold),
        }
        debates.append(_debate(speech_path, "file", record))
    return debates


def _side(motion: dict[str, Any], side: str) -> Any:
    """A side's debaters: DebateArt's ``<side>_side: [{name}]`` or BP's ``<side>_speakers``."""
    listed = motion.get(f"{side}_side", motion.get(f"{side}_speakers"))
    if not isinstance(listed, list):
        return listed
    return [d.get("name") if isinstance(d, dict) else d for d in listed]


def _yaml(path: Path) -> Any:
    try:
        value = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "file not found (every motion needs its speeches)") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, f"cannot read YAML: {str(exc).splitlines()[0]}") from None
    except Unreadable as exc:
        raise InputError(path, f"cannot read YAML: {exc.problem}", exc.place) from None
    refuse_surrogates(path, None, value)
    return value


def _debateart_gold(folder: Path) -> dict[int, dict[str, Any]]:
    gold: dict[int, dict[str, Any]] = {}
    for row in _csv_rows(folder / "final.csv", "dart_id", numeric=True):
        entry = gold.setdefault(int(row["dart_id"]), {})
        entry.update(
            final=float(row["label"]),
            vote_count=int(row.get("vote_count") or 0),
            is_many_round=row.get("is_many_round") == "True",
            is_long=row.get("is_long") == "True",
        )
    for row in _csv_rows(folder / "dimension.csv", "dart_id", numeric=True):
        entry = gold.setdefault(int(row["dart_id"]), {})
        entry.setdefault("dimensions", {})[row["dimension"]] = float(row["label"])
    return gold


def _bp_gold(path: Path) -> dict[int, dict[str, Any]]:
    """BP-Competition's ``gold.csv``: ``bp_id,label``, the label the winning teams ("OG,CG")."""
    rows = _csv_rows(path, "bp_id")
    return {int(row["bp_id"]): {"winners": row["label"]} for row in rows}


def _debateart_gold_for(motion_path: Path, gold: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The gold labels of one motion, matched by the number its file name ends in."""
    number = motion_path.stem.rsplit("_", 1)[-1]
    if number.isdigit():
        return gold.get(int(number), {})
    if gold:
        raise InputError(motion_path, "name must end in _<dart_id> to match the gold labels")
    return {}


def _csv_rows(path: Path, key: str, numeric: bool = False) -> Iterable[dict[str, str]]:
    """The rows of a gold CSV, each with an integer `key` and a label (numeric if asked)."""
    if not path.exists():
        return []
    rows = csv_rows(path, csv.DictReader(io.StringIO(read_input_text(path), newline="")))
    for number, row in enumerate(rows, start=2):
        try:
            int(row[key])
            label = float(row["label"]) if numeric else row["label"].strip()
        except (KeyError, TypeError, ValueError, AttributeError):
            label = None
        if label is None or label == "":
            problem = f"expected a numeric {key} and a{' numeric' if numeric else ''} label"
            raise InputError(path, problem, f"line {number}")
    return rows


def score_label(debate: Debate, debaters: Mapping[str, Any], margin: float) -> float | None:
    """The label implied by the debaters' scores, or None when a score could not be read.

    Each side's score is the mean of its debaters'; a difference within `margin` is a tie.
    """
    means = []
    for side in (debate.pro, debate.con):
        scores = [(debaters.get(name) or {}).get("score") for name in side]
        if not all(isinstance(score, int | float) for score in scores):
            return None  # a parse failure, or a debater left unscored
        means.append(sum(scores) / len(scores))
    difference = means[0] - means[1]
    if abs(difference) <= margin:
        return LABELS["tie"]
    return LABELS["pro" if difference > 0 else "con"]
