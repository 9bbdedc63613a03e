"""`moot data preferences` on real runs of the commands it reads (in process)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import moot
from moot.testing import Rule, ScriptedServer
from moot.training.debatune_data import instruction
from moot.training.dpo_data import read_preference_rows
from moot.training.preference_data import prompt_of
from tests.cli.helpers import read_jsonl, refused_in_one_line, run_moot
from tests.cli.test_eval import CONTROL_RULES, QUALITY_RULES, eval_options, responses_file
from tests.cli.test_eval_judge import EXAMPLES


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def test_preferences_from_quality_and_controllability_runs(tmp_path):
    kinds = ["GOOD", "BIASED", "BAD", "TIEWIN"]  # win, tie (orders disagree), loss, win + tie
    sides = ["affirmative", "negative"] * 2
    ours = responses_file(
        tmp_path / "ours.json", [(s, f"OURS-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    base = responses_file(
        tmp_path / "base.json", [(s, f"BASE-FOR-{k}") for s, k in zip(sides, kinds, strict=True)]
    )
    # two models' responses to the same two instructions: each holds its stance once
    first = responses_file(
        tmp_path / "a.json", [("affirmative", "AFF-FULL"), ("negative", "NEG-HALF")]
    )
    second = responses_file(
        tmp_path / "b.json", [("affirmative", "AFF-MOST"), ("negative", "NEG-FULL")]
    )
    runs = {name: tmp_path / name for name in ("quality", "control-a", "control-b")}
    with ScriptedServer(rules=[*QUALITY_RULES, *CONTROL_RULES]) as server:
        moot.eval.quality(**eval_options(server, runs["quality"], responses=ours, baseline=base))
        for name, responses in (("control-a", first), ("control-b", second)):
            moot.eval.controllability(**eval_options(server, runs[name], responses=responses))

    out = tmp_path / "prefs"
    result = moot.data.preferences(*runs.values(), out=out, eval_fraction=0)
    pairs = read_jsonl(out / "train.jsonl")
    assert [(p["source"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("quality", assistant("OURS-GOOD"), assistant("BASE-FOR-GOOD")),
        ("quality", assistant("BASE-FOR-BAD"), assistant("OURS-BAD")),
        ("controllability", assistant("AFF-FULL"), assistant("AFF-MOST")),
        ("controllability", assistant("NEG-FULL"), assistant("NEG-HALF")),
    ]
    assert pairs[0]["prompt"] == [{"role": "user", "content": "Argue affirmative for arg 0"}]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == [
        {"source": str(runs[name]), "kind": kind, "judge": {"model": "openai/judge"}}
        for name, kind in (
            ("quality", "quality"),
            ("control-a", "controllability"),
            ("control-b", "controllability"),
        )
    ]
    card = (out / "README.md").read_text()
    assert f"| `{runs['quality']}` | quality | model `openai/judge` |" in card
    assert manifest["counts"]["pairs"] == {"controllability": 2, "quality": 2}
    assert manifest["counts"]["dropped"] == {"quality: orders disagree": 2}  # BIASED, TIEWIN
    assert not (out / "eval.jsonl").exists() and (out / "README.md").is_file()
    import datasets

    table = datasets.load_from_disk(str(out / "dataset"))["train"]
    assert table["chosen"] == [p["chosen"] for p in pairs] and len(table) == 4
    assert "4 train and 0 eval pairs" in result.lines[-1]
    # what `moot train dpo` reads of the folder: the same pairs
    read = read_preference_rows(out)
    assert read == [{k: p[k] for k in ("prompt", "chosen", "rejected")} for p in pairs]

    # the same inputs give the same files; a split is seeded
    again = tmp_path / "again"
    moot.data.preferences(*runs.values(), out=again, eval_fraction=0)
    assert (again / "train.jsonl").read_bytes() == (out / "train.jsonl").read_bytes()
    split = tmp_path / "split"
    moot.data.preferences(*runs.values(), out=split, eval_fraction=0.5, seed=4)
    train, held = read_jsonl(split / "train.jsonl"), read_jsonl(split / "eval.jsonl")
    assert sorted(p["id"] for p in train + held) == sorted(p["id"] for p in pairs)
    # by prompt: arg 0's two pairs (quality's, controllability's) are in one split (seed 4
    # split them when the split was by pair)
    assert train and held
    assert not {str(p["prompt"]) for p in train} & {str(p["prompt"]) for p in held}

    # judgments of texts no longer in the files: a response edited since (same instruction)
    # is not paired with the verdict its earlier text got; a torn last line is counted
    edited = shutil.copytree(runs["quality"], tmp_path / "edited")
    summary = json.loads((edited / "summary.json").read_text())
    now = ["BAD", "BIASED", "GOOD", "TIEWIN"]
    texts = [(s, f"OURS-{k}") for s, k in zip(sides, now, strict=True)]
    summary["sources"]["responses"] = str(responses_file(tmp_path / "edited.json", texts))
    (edited / "summary.json").write_text(json.dumps(summary))
    with (edited / "judgments.jsonl").open("a") as log:
        log.write('{"id": "torn')
    with pytest.raises(moot.MootError) as caught:
        moot.data.preferences(edited, out=tmp_path / "stale")
    assert refused_in_one_line(caught.value) == (
        "no preference pair in the train split (quality: a torn last line (a stopped run: rerun "
        "it) 1; quality: judged texts differ from the files now 2; quality: orders disagree 2)"
    )  # GOOD's and BAD's verdicts are not of the texts there now

    # bad input: one line, nothing written
    (tmp_path / "ours.json").rename(tmp_path / "moved.json")
    unnamed = shutil.copytree(runs["control-a"], tmp_path / "unnamed")  # a judge not recorded
    written = json.loads((unnamed / "summary.json").read_text())
    (unnamed / "summary.json").write_text(json.dumps({**written, "judge": None}))
    # a baseline reordered since, a corrupt line in the middle of a log
    reordered = shutil.copytree(runs["quality"], tmp_path / "reordered")
    summary = json.loads((reordered / "summary.json").read_text())
    (tmp_path / "swapped.json").write_text(json.dumps(json.loads(base.read_text())[::-1]))
    summary["sources"]["baseline"] = str(tmp_path / "swapped.json")
    summary["sources"]["responses"] = str(tmp_path / "moved.json")
    (reordered / "summary.json").write_text(json.dumps(summary))
    corrupt = shutil.copytree(runs["control-b"], tmp_path / "corrupt")
    lines = (corrupt / "judgments.jsonl").read_bytes().splitlines(keepends=True)
    (corrupt / "judgments.jsonl").write_bytes(lines[0] + b"\xff not JSON\n" + b"".join(lines[1:]))
    refused = {
        "swapped.json, index 0: does not align with the responses": (reordered,),
        "corrupt/judgments.jsonl, line 2: not a readable record": (corrupt,),
        "is given twice": (runs["control-a"], tmp_path / "." / "control-a"),
        "summary.json: its responses file": (runs["quality"],),
        f"{unnamed / 'summary.json'}: records no judge (unfinished, or made by an earlier moot": (
            unnamed,
        ),
        "not a folder of moot eval quality, controllability, compqa or judge, or moot judge": (
            out,
        ),
    }
    for problem, given in refused.items():
        with pytest.raises(moot.MootError) as caught:
            moot.data.preferences(*given, out=tmp_path / "bad")
        assert problem in refused_in_one_line(caught.value)
    assert not (tmp_path / "bad").exists()


def score_dict(total: int) -> dict[str, int]:
    """CompQA points summing to `total`: C9-C12 take 0-2, the others 0-1 (19 at most)."""
    points = {}
    for criterion in range(1, 16):
        points[str(criterion)] = min(total, 2 if 9 <= criterion <= 12 else 1)
        total -= points[str(criterion)]
    return points


@pytest.mark.subprocess
def test_compqa_answers_to_one_question_pair_at_the_margin(tmp_path):
    # three generators' answers to one question, judged 12, 9 and 11 of 19
    answers = [("gen-a", "TWELVE", 12), ("gen-b", "NINE", 9), ("gen-c", "ELEVEN", 11)]
    given = tmp_path / "answers.json"
    given.write_text(
        json.dumps(
            [
                {"object1": "tea", "object2": "coffee", "comparison": f"ANSWER-{text}",
                 "generator": generator}
                for generator, text, _ in answers
            ]
        )
    )  # fmt: skip
    rules = [Rule(f"ANSWER-{text}", json.dumps(score_dict(total))) for _, text, total in answers]
    run = tmp_path / "compqa"
    with ScriptedServer(rules=rules) as server:
        options = {"judge": "openai/judge", "api_base": server.url, "max_retries": 0}
        moot.eval.compqa(answers=[given], out=run, **options)
    out = tmp_path / "prefs"
    moot.data.preferences(run, out=out, eval_fraction=0, min_margin=2)
    pairs = read_jsonl(out / "train.jsonl")
    assert [(p["chosen"], p["rejected"], p["meta"]) for p in pairs] == [
        (assistant("ANSWER-TWELVE"), assistant("ANSWER-NINE"),
         {"scores": [12, 9], "origins": ["gen-a", "gen-b"]}),
        (assistant("ANSWER-ELEVEN"), assistant("ANSWER-NINE"),
         {"scores": [11, 9], "origins": ["gen-c", "gen-b"]}),  # a margin of exactly 2
    ]  # fmt: skip
    assert pairs[0]["prompt"][0]["content"].startswith("What is better: tea or coffee?")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["dropped"] == {"compqa: closer than the margin": 1}  # 12 vs 11
    assert manifest["inputs"] == [
        {"source": str(run), "kind": "compqa", "judge": {"model": "openai/judge"}}
    ]
    assert f"| `{run}` | compqa | model `openai/judge` |" in (out / "README.md").read_text()

    # no pair in the train split: one line naming why each judgment made none, exit 2
    refused = run_moot("data", "preferences", run, "--out", tmp_path / "none", "--min-margin", 4)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == (
        "moot: error: no preference pair in the train split (compqa: closer than the margin 3)\n"
    )
    assert not (tmp_path / "none").exists()
    with pytest.raises(moot.MootError) as caught:  # every pair drawn into eval
        moot.data.preferences(run, out=tmp_path / "none", eval_fraction=0.9)
    assert refused_in_one_line(caught.value) == (
        "no preference pair in the train split "
        "(all 2 pair(s) in the eval split; compqa: closer than the margin 1)"
    )
    assert not (tmp_path / "none").exists()


def items_file(path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_custom_judges_verdicts_pair_answers_and_a_vote_or_an_unsaid_field_is_refused(tmp_path):
    # a mean judge (examples/judges/helpfulness.yaml): answers to Q1 scored 9, 7 and 8; to Q2 one
    # answer whose reply cannot be read and one scored 4
    answers = [("Q1", "ANS-NINE"), ("Q1", "ANS-SEVEN"), ("Q1", "ANS-EIGHT")]
    answers += [("Q2", "ANS-UNREAD"), ("Q2", "ANS-FOUR")]
    items = items_file(tmp_path / "items.jsonl", [{"question": q, "answer": a} for q, a in answers])
    scores = {"NINE": 9, "SEVEN": 7, "EIGHT": 8, "FOUR": 4}
    rules = [Rule(f"ANS-{k}", json.dumps({"score": v, "reason": "r"})) for k, v in scores.items()]
    # a judge of two input fields, and one whose verdict is a vote
    (tmp_path / "two.j2").write_text("{{ question }} {{ context }} {{ answer }} {{ fields }}")
    for name, aggregation in (("two", "mean"), ("vote", "majority")):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\ntemplate: two.j2\ninputs: [question, context]\njudged: [answer]\n"
            f"fields: {{score: {{type: int, min: 1, max: 10}}}}\naggregation: {aggregation}\n"
        )
    rows = [{"question": "Q3", "context": "C", "answer": f"ANS-{k}"} for k in ("NINE", "FOUR")]
    contexts = items_file(tmp_path / "ctx.jsonl", rows)
    runs = {name: tmp_path / name for name in ("mean", "two", "vote")}
    with ScriptedServer(rules=rules) as server:
        options = {"judge": "openai/judge", "api_base": server.url, "max_retries": 0}
        helpfulness = EXAMPLES / "helpfulness.yaml"
        moot.eval.judge(spec=helpfulness, items=items, out=runs["mean"], **options)
        for name in ("two", "vote"):
            moot.eval.judge(
                spec=tmp_path / f"{name}.yaml", items=contexts, out=runs[name], **options
            )
    # the spec is read from the run's summary, not from its file
    (tmp_path / "items.jsonl").rename(tmp_path / "moved.jsonl")

    out = tmp_path / "prefs"
    moot.data.preferences(runs["mean"], out=out, eval_fraction=0, min_margin=2)
    pairs = read_jsonl(out / "train.jsonl")
    assert [(p["prompt"], p["chosen"], p["rejected"], p["source"]) for p in pairs] == [
        (prompt_of("Q1"), assistant("ANS-NINE"), assistant("ANS-SEVEN"), "judge"),
    ]
    assert pairs[0]["meta"] == {"scores": [9, 7], "origins": ["line 1", "line 2"]}
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["pairs"] == {"judge": 1}
    assert counts["dropped"] == {
        "judge: closer than the margin": 2,  # 9 vs 8, 8 vs 7
        "judge: no verdict (no juror's reply read)": 1,
        "judge: no other answer to its prompt": 1,  # ANS-FOUR, once ANS-UNREAD is dropped
    }
    assert "a custom judge's verdicts" in (out / "README.md").read_text()
    (given,) = json.loads((out / "manifest.json").read_text())["inputs"]
    assert given["judge"] == {"spec": "helpfulness", "jurors": ["openai/judge"]}
    card = (out / "README.md").read_text()
    assert f"| `{runs['mean']}` | judge | spec `helpfulness`; jurors `openai/judge` |" in card

    # a judge of two inputs pairs once it is told which is the prompt
    moot.data.preferences(runs["two"], out=out, eval_fraction=0, prompt_field="question")
    (pair,) = read_jsonl(out / "train.jsonl")
    assert (pair["prompt"][0]["content"], pair["meta"]["scores"]) == ("Q3", [9, 4])

    refused = {
        "judge 'two' has no single prompt field (inputs: question, context; judged: answer): "
        "name it with --prompt-field": (runs["two"], {}),
        "--answer-field 'reply' is not a field of judge 'two'": (
            runs["two"], {"prompt_field": "context", "answer_field": "reply"}
        ),
        "judge 'vote' votes (aggregation majority): a vote is not a score": (runs["vote"], {}),
    }  # fmt: skip
    for problem, (given, flags) in refused.items():
        with pytest.raises(moot.MootError) as caught:
            moot.data.preferences(given, out=tmp_path / "bad", **flags)
        assert problem in refused_in_one_line(caught.value)
        assert str(given / "summary.json") in str(caught.value)
    assert not (tmp_path / "bad").exists()


def test_debatrix_scores_pair_the_conclusions_of_two_debate_runs(tmp_path):
    topic = {
        "topic": "Should zoos be banned?",
        "Affirmative": {"arguments": ["Cages cause stress."]},
        "Negative": {"arguments": ["Zoos save species."]},
    }
    topics = items_file(tmp_path / "topics.jsonl", [topic])
    # two debater models, each debating both stances; the judge reads whose speeches they are
    # and scores the sides: X's Affirmative 8 and Negative 3, Y's 5 and 4
    debaters = [Rule("", f"{name}-SPEECH {{n}}", model=f"deb-{name}") for name in "XY"]
    judged = [Rule(f"{name}-SPEECH", f"JUDGMENT-{name}", model="judge") for name in "XY"]
    scores = {("X", "Affirmative"): 8, ("X", "Negative"): 3, ("Y", "Affirmative"): 5}
    scores[("Y", "Negative")] = 4
    scored = [
        Rule(f"JUDGMENT-{name}.*score for {side}", json.dumps({"comment": "c", "score": score}))
        for (name, side), score in scores.items()
    ] + [Rule("score for", '{"comment": "c", "score": 6}')]
    # a judge run of debates that are not moot debate's: no conclusion to prefer
    speeches = [{"speaker": "Al", "content": "X-SPEECH"}, {"speaker": "Bo", "content": "no"}]
    panel = {"id": "p1", "motion": "Zoos", "pro": "Al", "con": "Bo", "speeches": speeches}
    items_file(tmp_path / "panel.jsonl", [panel])
    judge = {"judge": "openai/judge", "framework": "direct", "scoring": "released"}
    with ScriptedServer(rules=[*scored, *judged, *debaters]) as server:
        common = {"api_base": server.url, "max_retries": 0}
        for name in "XY":
            debates = tmp_path / f"debates-{name}"
            moot.debate(topics=topics, out=debates, model=f"openai/deb-{name}", **common)
            judged_by = tmp_path / f"judge-{name}"
            moot.judge(debates=debates / "debates.jsonl", out=judged_by, **judge, **common)
        moot.judge(
            debates=tmp_path / "panel.jsonl", out=tmp_path / "judge-panel", **judge, **common
        )
    conclusions = {
        (name, d["stance"]): d["conclusion"]
        for name in "XY"
        for d in read_jsonl(tmp_path / f"debates-{name}" / "debates.jsonl")
    }

    out = tmp_path / "prefs"
    runs = [tmp_path / "judge-X", tmp_path / "judge-Y"]
    moot.data.preferences(*runs, out=out, eval_fraction=0, min_margin=3)
    (pair,) = read_jsonl(out / "train.jsonl")
    # Affirmative: X's debater A scored 8, Y's 5, exactly the margin apart
    chosen, rejected = conclusions[("X", "Affirmative")], conclusions[("Y", "Affirmative")]
    assert (pair["chosen"], pair["rejected"]) == (assistant(chosen), assistant(rejected))
    assert pair["source"] == "debatrix" and pair["meta"]["scores"] == [8, 5]
    asked = instruction("Should zoos be banned?", "Affirmative", "Cages cause stress.")
    assert pair["prompt"] == [{"role": "user", "content": asked}]
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    # Negative: debater A is the Negative side, 3 against 4 (not the Affirmative's 8 and 5)
    assert counts["dropped"] == {"debatrix: closer than the margin": 1}
    assert counts["pairs"] == {"debatrix": 1}
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    assert [given["judge"] for given in inputs] == [
        {"model": "openai/judge", "framework": "direct"}
    ] * 2
    card = (out / "README.md").read_text()
    assert f"| `{runs[0]}` | debatrix | model `openai/judge`; framework `direct` |" in card

    # X's Affirmative debate edited since it was judged: its judgment is not of it any more
    log = tmp_path / "debates-X" / "debates.jsonl"
    debates = read_jsonl(log)
    for debate in debates:
        if debate["stance"] == "Affirmative":
            debate["transcript"][0]["text"] += " (edited)"
    log.write_text("".join(json.dumps(debate) + "\n" for debate in debates))
    with pytest.raises(moot.MootError) as caught:
        moot.data.preferences(*runs, out=tmp_path / "bad")
    assert refused_in_one_line(caught.value) == (
        "no preference pair in the train split (debatrix: closer than the margin 1; debatrix: "
        "its debate not in its debates file as judged 1; debatrix: no other answer to its "
        "prompt 1)"
    )
    with pytest.raises(moot.MootError) as caught:
        moot.data.preferences(*runs, tmp_path / "judge-panel", out=tmp_path / "bad")
    problem = refused_in_one_line(caught.value)
    assert "judge-panel/summary.json: its debates" in problem and "no moot debate record" in problem
    assert not (tmp_path / "bad").exists()
