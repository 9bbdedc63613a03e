"""`moot report agreement` on real runs and hand-made labels: every figure against its formula."""

from __future__ import annotations

import json
import math
from itertools import permutations
from pathlib import Path

import pytest

import moot
from moot.core.errors import MootError
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import png_size, read_jsonl, refused_in_one_line

SCORE = Rule(r'"score": <an integer from 1 to 10>', '{"comment": "solid", "score": 6}', role="last")
WINNERS = {"d1": "C1", "d2": "P2", "d3": "C3"}  # on PanelBench's scale: 1, 0, 1
SUPPORT = {"FULL": 100, "HALF": 50, "MOST": 80, "NONE": 0}
DOCUMENTS = {"p1": "Yes", "p2": "No", "p3": "Yes", "p4": "No"}  # the detector: 1, 0, 1, 0


def make_runs(tmp: Path) -> dict[str, Path]:
    """A Debatrix judge of three debates, DEBATunE controllability of four responses, the
    BERDS detector on four pairs: each against the scripted server, through moot's commands."""
    debates = [
        {"id": f"d{i}", "motion": f"Motion {i}", "pro": [f"P{i}"], "con": [f"C{i}"],
         "speeches": [{"speaker": f"P{i}", "content": "Yes."},
                      {"speaker": f"C{i}", "content": "No."}]}
        for i in (1, 2, 3)
    ]  # fmt: skip
    (tmp / "debates.jsonl").write_text("".join(json.dumps(d) + "\n" for d in debates))
    winners = [
        Rule(f'Con side debaters are: C{i}\n.*"winner"', json.dumps({"winner": WINNERS[f"d{i}"]}))
        for i in (1, 2, 3)
    ]
    responses = [
        {"topic": "Topic", "side": "affirmative", "argument": f"arg {text}", "instruction": "Argue",
         "raw_output": "", "response": text}
        for text in SUPPORT
    ]  # fmt: skip
    (tmp / "responses.json").write_text(json.dumps(responses))
    support = [Rule(text, f"{n} {100 - n}") for text, n in SUPPORT.items()]
    rows = [f"Q?\t{pair}\tDocument {pair}.\tA view.\t1" for pair in DOCUMENTS]
    (tmp / "pairs.tsv").write_text("question\tid\tdocument\tperspective\tlabel\n" + "\n".join(rows))
    detector = [Rule(f"Document {pair}\\.", reply) for pair, reply in DOCUMENTS.items()]
    judge = {"api_base": None, "max_retries": 0, "quiet": True}
    with ScriptedServer(rules=[SCORE, *winners, *support, *detector]) as server:
        judge["api_base"] = server.url
        moot.judge(debates=tmp / "debates.jsonl", out=tmp / "judge", judge="openai/scripted",
                   framework="dimensional", **judge)  # fmt: skip
        moot.eval.controllability(responses=tmp / "responses.json", out=tmp / "control",
                                  judge="openai/judge", **judge)  # fmt: skip
        moot.eval.detector(pairs=tmp / "pairs.tsv", out=tmp / "detector",
                           detector="openai/judge", **judge)  # fmt: skip
    return {"judge": tmp / "judge", "control": tmp / "control", "detector": tmp / "detector"}


def label(run: Path, labeller: str, by_key: dict, field: str, values: dict) -> None:
    """Hand-made labels, as the page writes them: `values` by the items' `key`."""
    lines = [
        {"item": by_key[k], "field": field, "value": v, "time": "2026-11-29T10:00:00Z",
         "labeller": labeller}
        for k, v in values.items()
    ]  # fmt: skip
    with (run / "labels" / f"{labeller}.jsonl").open("a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)


def ids(run: Path, key) -> dict:
    return {key(r): r["id"] for r in read_jsonl(run / "judgments.jsonl")}


def alpha_nominal(units: list[list[int]]) -> float:
    """Krippendorff's alpha, nominal, by its coincidence-matrix formula (Krippendorff 2011)."""
    units = [u for u in units if len(u) > 1]
    n = sum(len(u) for u in units)
    disagree = sum(  # o_ck summed over c != k
        sum(a != b for a, b in permutations(u, 2)) / (len(u) - 1) for u in units
    )
    values = [v for u in units for v in u]
    expected = sum(values.count(c) * values.count(k) for c in set(values) for k in set(values)
                   if c != k)  # fmt: skip
    return 1 - (n - 1) * disagree / expected


def kappa(a: list, b: list) -> float:
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    expected = sum(a.count(v) * b.count(v) for v in set(a) | set(b)) / n**2
    return (observed - expected) / (1 - expected)


def pearson_with_p(x: list[float], y: list[float]) -> tuple[float, float]:
    """r by its sums, and its two-sided p from t = r sqrt(n-2) / sqrt(1-r²) (n = 4: df 2,
    where the t distribution's tail is 1/2 - t / (2 sqrt(t² + 2)))."""
    n, mx, my = len(x), sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    r = sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
    assert n == 4
    t = abs(r) * math.sqrt(n - 2) / math.sqrt(1 - r * r)
    return r, 1 - t / math.sqrt(t * t + 2)


def ranks(values: list[float]) -> list[float]:
    return [sorted(values).index(v) + 1.0 for v in values]  # no ties here


def test_agreement_of_judges_and_labellers_equals_the_formulas(tmp_path):
    runs = make_runs(tmp_path)
    for run in runs.values():
        (run / "labels").mkdir()
    judged = ids(runs["judge"], lambda r: r["debate"])
    label(runs["judge"], "ann", judged, "winner", {"d1": "C1", "d2": "tie", "d3": "P3"})
    label(runs["judge"], "ann", judged, "score:argument", {"d1": 1.0, "d2": 0.5, "d3": 0})
    label(runs["judge"], "bob", judged, "winner", {"d1": "C1"})
    control = ids(runs["control"], lambda r: r["argument"].removeprefix("arg "))
    ann_support = {"FULL": 90, "HALF": 75, "MOST": 70, "NONE": 10}
    label(runs["control"], "ann", control, "support", ann_support)
    pairs = ids(runs["detector"], lambda r: r["pair_id"])
    ann, bob = [1, 0, 0, 0], [1, 1, 0, 0]
    label(runs["detector"], "ann", pairs, "label", dict(zip(DOCUMENTS, ann, strict=True)))
    label(runs["detector"], "bob", pairs, "label", dict(zip(DOCUMENTS, bob, strict=True)))

    out = tmp_path / "report"
    result = moot.report.agreement(*runs.values(), out=out, resamples=100, seed=3)
    report = json.loads((out / "report.json").read_text())
    groups = {Path(g["run"]).name: {f["field"]: f for f in g["fields"]} for g in report["groups"]}

    # the detector: judge 1 0 1 0; pairs pooled over both labellers
    detector = groups["detector"]["label"]["judge"]
    assert detector["pairs"] == 8 and detector["accuracy"]["value"] == 5 / 8
    assert detector["kappa"]["value"] == pytest.approx(kappa([1, 0, 1, 0] * 2, ann + bob))
    units = [[j, a, b] for j, a, b in zip([1, 0, 1, 0], ann, bob, strict=True)]
    assert detector["alpha"]["value"] == pytest.approx(alpha_nominal(units))  # 1 - 44/70
    assert detector["confusion"] == {"values": [0, 1], "matrix": [[3, 1], [2, 2]]}
    assert detector["by_labeller"]["ann"]["kappa"] == pytest.approx(kappa([1, 0, 1, 0], ann))
    humans = groups["detector"]["label"]["humans"]
    assert humans["pairs"]["ann vs bob"]["agreement"] == 3 / 4
    assert humans["pairs"]["ann vs bob"]["kappa"] == pytest.approx(kappa(ann, bob))  # 0.5
    both = [[a, b] for a, b in zip(ann, bob, strict=True)]
    assert humans["alpha"] == pytest.approx(alpha_nominal(both))
    low, high = detector["kappa"]["ci95"]
    assert low <= detector["kappa"]["value"] <= high

    # controllability: the judge's support against ann's
    judge_support, human = list(SUPPORT.values()), list(ann_support.values())
    support = groups["control"]["support"]["judge"]
    r, p = pearson_with_p(judge_support, human)
    assert (support["pearson"]["value"], support["pearson"]["p"]) == pytest.approx((r, p))
    rho, p_rho = pearson_with_p(ranks(judge_support), ranks(human))
    assert (support["spearman"]["value"], support["spearman"]["p"]) == pytest.approx((rho, p_rho))
    assert "accuracy" not in support and "oppose" not in groups["control"]  # nobody labelled it

    # Debatrix: winners on PanelBench's scale (judge 1, 0, 1; ann 1, 0.5, 0), equal scores a tie
    winner = groups["judge"]["winner"]["judge"]
    argument = groups["judge"]["score:argument"]["judge"]
    assert winner["rmse"]["value"] == pytest.approx(100 * math.sqrt((0 + 0.25 + 1 + 0) / 4))
    assert winner["accuracy"]["value"] == 2 / 4  # ann's d1, bob's d1
    assert argument["rmse"]["value"] == pytest.approx(100 * math.sqrt((0.25 + 0 + 0.25) / 3))
    assert argument["confusion"]["matrix"] == [[0, 0, 0], [1, 1, 1], [0, 0, 0]]
    assert groups["judge"]["winner"]["humans"]["pairs"]["ann vs bob"]["agreement"] == 1.0

    # the same labels and seed give the same report; Markdown and a chart beside it
    again = moot.report.agreement(*runs.values(), out=tmp_path / "again", resamples=100, seed=3)
    assert (tmp_path / "again" / "report.json").read_bytes() == (out / "report.json").read_bytes()
    markdown = (out / "report.md").read_text()
    assert "| label | nominal | 4 | 8 | 0 | 0.625 [" in markdown
    assert "### Confusion: label" in markdown
    assert png_size(out / "chart.png")[0] > 400
    assert "Cohen's κ" in "\n".join(result.lines) and again.exit_code == 0

    # the labels as PanelBench's gold: d1 C1 twice (con, 1), d2 a tie, d3 P3 (pro, 0); the
    # judge's named winners 1, 0, 1 and equal scores (a tie) against them
    moot.eval.panelbench(predictions=[runs["judge"]], gold=tmp_path / "debates.jsonl",
                         labels=runs["judge"], out=tmp_path / "bench")  # fmt: skip
    summary = json.loads((tmp_path / "bench" / "summary.json").read_text())
    (bench,) = summary["frameworks"]
    direct, score = bench["debateart"]["direct"], bench["debateart"]["score"]
    assert direct["final"]["rmse"] == pytest.approx(100 * math.sqrt((0 + 0.25 + 1) / 3))
    assert score["final"]["rmse"] == pytest.approx(100 * math.sqrt((0.25 + 0 + 0.25) / 3))
    assert score["argument"]["rmse"] == pytest.approx(100 * math.sqrt((0.25 + 0 + 0.25) / 3))
    assert bench["debateart"]["columns"] == ["final", "argument"]  # nobody labelled source
    assert summary["labels"] == str(runs["judge"])

    # bad input: one line naming the file and the problem, nothing written
    refused = {
        "none: folder not found": ((runs["judge"],), {"labels": tmp_path / "none"}),
        "ann.jsonl, line 5: not a JSON label record": ((runs["control"],), {}),
        'bob.jsonl, line 5: no item "gone" in this run': ((runs["detector"],), {}),
    }
    with (runs["control"] / "labels" / "ann.jsonl").open("a") as f:
        f.write("{torn\n{}\n")
    with (runs["detector"] / "labels" / "bob.jsonl").open("a") as f:
        f.write(json.dumps({"item": "gone", "field": "label", "value": 1}) + "\n")
    for problem, (given, options) in refused.items():
        with pytest.raises(MootError) as caught:
            moot.report.agreement(*given, out=tmp_path / "bad", **options)
        assert problem in refused_in_one_line(caught.value)
    assert not (tmp_path / "bad").exists()
    two = tmp_path / "two.jsonl"  # the gold file lacks a debate the labels name
    two.write_text("".join((tmp_path / "debates.jsonl").read_text().splitlines(True)[:2]))
    with pytest.raises(MootError) as caught:
        moot.eval.panelbench(predictions=[runs["judge"]], gold=two, labels=runs["judge"],
                             out=tmp_path / "bad")  # fmt: skip
    assert "labels a debate" in refused_in_one_line(caught.value) and "'d3'" in str(caught.value)
