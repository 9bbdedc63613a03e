"""``--prompts DIR``: a run's own templates over the built-ins, in every model-calling command.

Each command runs in process (`moot.call`) against the scripted server with a folder that
overrides every built-in template and data file by a marked copy: every request the server
receives must carry the mark, so a prompt rendered past the overrides fails. Then: the identity,
the manifest and card, the dry run, two runs side by side, and the refusals.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import moot
from moot.graphs.debatune_debate import PROTOCOL
from moot.prompts import builtin_names, template_source
from moot.testing import Rule, ScriptedServer
from tests.cli.helpers import (
    ARGUMENTS_REPLY,
    command_parsers,
    refused_in_one_line,
    run_moot,
    stdout,
)
from tests.cli.test_answer import REACT_RULES
from tests.cli.test_answer import corpus as answer_corpus
from tests.cli.test_berds import berds_fixture, demo_answers, detector_subset, write_jsonl
from tests.cli.test_compare import questions as compare_questions
from tests.cli.test_dry_run import GIVEN, plan_tables
from tests.cli.test_eval import responses_file
from tests.cli.test_eval_compqa import SCORES, real_answers
from tests.conftest import shared_data
from tests.tiny import tiny_bert

MARK = "OVERRIDE-MARK-7f3a"

#: Model-calling commands whose requests hold no built-in template but the repair rounds':
#: `moot models check` sends a fixed message, `moot eval judge` and `moot protocol` render the
#: templates beside their spec or protocol file (the user's own already).
NO_TEMPLATE = {"models check", "eval judge", "protocol"}


def mark_of(name: str, mark: str = MARK) -> str:
    """What the marked copy of template `name` adds to its text: its own mark."""
    return f"[{mark} {name}]"


def marked(folder: Path, mark: str = MARK) -> Path:
    """Every built-in template and data file under `folder`, each with its mark in its text."""
    for name in builtin_names():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = template_source(name)
        if name.endswith(".j2"):
            path.write_text(f"{text.rstrip()}\n{mark_of(name, mark)}\n", encoding="utf-8")
            continue
        entries = yaml.safe_load(text)
        if not isinstance(entries, list):  # a protocol (moot debate's): its templates are
            continue
        for n, entry in enumerate(entries):
            if isinstance(entry, str):
                entries[n] = f"{entry}{mark} "
            else:
                texts = {k: v for k, v in entry.items() if isinstance(v, str) and k != "name"}
                entry.update({k: f"{v} {mark}" for k, v in texts.items()})
        path.write_text(yaml.safe_dump(entries, sort_keys=False), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    return marked(tmp_path_factory.mktemp("prompts"))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """test_answer.py's: a BM25 index over DebateQA answers, and 3 BERDS questions."""
    return answer_corpus.__wrapped__(tmp_path_factory)


def topics(tmp: Path) -> Path:
    path = tmp / "topics.jsonl"
    path.write_text(json.dumps({"topic": "Should zoos be banned?"}) + "\n", encoding="utf-8")
    return path


def remote(server: ScriptedServer, flag: str = "model") -> dict[str, Any]:
    return {flag: "openai/scripted", "api_base": server.url, "max_retries": 0}


Case = Callable[[Path, ScriptedServer, Any], dict[str, Any]]

#: Each command's options for one small run (its items limited where it has many); a command
#: named with more words after ``:`` is a variant that renders other templates.
CASES: dict[str, Case] = {
    "debate": lambda tmp, s, c: {
        "topics": topics(tmp),
        "arguments_per_stance": 1,
        "limit": 1,
        **remote(s),
    },
    "generate": lambda tmp, s, c: {
        "dataset": write_jsonl(tmp / "test.jsonl", [GIVEN]),
        "out": tmp / "responses.json",
        "limit": 1,
        **remote(s),
    },
    "eval controllability": lambda tmp, s, c: {
        "responses": responses_file(tmp / "r.json", [("affirmative", "Zoos must go.")]),
        **remote(s, "judge"),
    },
    "eval quality": lambda tmp, s, c: {
        "responses": responses_file(tmp / "r.json", [("affirmative", "Zoos must go.")]),
        "baseline": responses_file(tmp / "b.json", [("affirmative", "Zoos, no.")]),
        **remote(s, "judge"),
    },
    "eval da": lambda tmp, s, c: {
        "answers": write_jsonl(tmp / "a.jsonl", [{**demo_answers(1)[0], "question": "Q?"}]),
        **remote(s, "judge"),
    },
    "eval berds": lambda tmp, s, c: {
        "retrieved": berds_fixture(tmp)[0],
        "perspectives": berds_fixture(tmp)[1],
        "k": 1,
        "limit": 1,
        **remote(s, "detector"),
    },
    "eval detector": lambda tmp, s, c: {
        "pairs": detector_subset(tmp, 1)[0],
        **remote(s, "detector"),
    },
    "eval compqa": lambda tmp, s, c: {
        "answers": real_answers(tmp)[:1],
        "shots": 1,
        "limit": 1,
        **remote(s, "judge"),
    },
    "judge": lambda tmp, s, c: {
        "debates": write_jsonl(
            tmp / "debates.jsonl",
            [json.loads(shared_data("panelbench", "debateart.jsonl").read_text().splitlines()[0])],
        ),
        "constrained": True,
        **remote(s, "judge"),
    },
    "answer": lambda tmp, s, c: {
        "questions": c["questions"],
        "mode": "rag",
        "index": c["index"],
        "limit": 1,
        **remote(s),
    },
    "curate": lambda tmp, s, c: {
        "questions": c["questions"],
        "docs": c["index"],
        "embedder": f"cls:{tiny_bert(tmp / 'bert')}",  # a real run embeds the POVs: fast
        "documents": 2,
        "limit": 1,
        **remote(s),
    },
    "retrieve": lambda tmp, s, c: {
        "questions": c["questions"],
        "index": c["index"],
        "out": tmp / "retrieved.jsonl",
        "query_expansion": True,
        "limit": 1,
        **remote(s),
    },
    "answer: react": lambda tmp, s, c: {
        "questions": c["questions"],
        "mode": "react-single",
        "prompt": "comprehensive",
        "index": c["index"],
        "limit": 1,
        **remote(s),
    },
    "answer: plain": lambda tmp, s, c: {
        "questions": c["questions"],
        "prompt": "detailed",
        "limit": 1,
        **remote(s),
    },
    "eval berds: one-shot": lambda tmp, s, c: {
        "retrieved": berds_fixture(tmp)[0],
        "perspectives": berds_fixture(tmp)[1],
        "detector_prompt": "one-shot-released",
        "k": 1,
        "limit": 1,
        **remote(s, "detector"),
    },
    "compare": lambda tmp, s, c: {
        "questions": compare_questions(tmp, 1),
        "scenario": 2,
        "generate_arguments": True,
        "constrained": True,
        **remote(s),
    },
    "compare: free text": lambda tmp, s, c: {
        "questions": write_text(tmp / "q.txt", "What is better: ASP or PHP?\n"),
        "scenario": 1,
        **remote(s),
    },
}


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def command_of(case: str) -> str:
    return case.partition(":")[0]


RULES = [
    Rule(pattern="list your arguments", reply=ARGUMENTS_REPLY),
    Rule(pattern="Comparative answer", reply=SCORES),
    Rule(pattern="Task: Generate Points-of-View", reply="Point-of-View 1: Yes. [Document [1]]"),
    Rule(pattern="Generate diverse perspectives", reply='{"It Helps": "it helps"}'),
    Rule(pattern="ASP or PHP", reply='{"object1": "ASP", "object2": "PHP", "aspect": ""}'),
    *REACT_RULES,
]


def model_calling_commands() -> set[str]:
    """Every command with a ``--dry-run`` (it calls a model), from the parser tree."""
    return {" ".join(w) for w, parser in command_parsers().items() if parser.get_default("plan_fn")}


def assert_rendered_from_overrides(messages: list[dict[str, Any]], given: set[str]) -> None:
    """Each message but the model's own turns and the inputs sent as they are (`given`: a
    question in DebateQA's plain mode) holds a mark, and a template's mark comes with the marks
    of the templates it includes: no part of a prompt escaped the overrides."""
    assert MARK in json.dumps(messages)
    for message in messages:
        text = message["content"]
        if message["role"] != "assistant" and text not in given:
            assert MARK in text, message
        for name in builtin_names():
            if name.endswith(".j2") and mark_of(name) in text:
                for included in includes(name):
                    assert mark_of(included) in text, (name, included, message)


def includes(name: str) -> set[str]:
    """The templates the built-in `name` includes by name (a computed name is left out), by
    their paths: a protocol's templates include each other by their names in its folder."""
    import jinja2
    import jinja2.meta

    tree = jinja2.Environment().parse(template_source(name))
    named = {n for n in jinja2.meta.find_referenced_templates(tree) if n is not None}
    folder = name.rpartition("/")[0]
    return {n if n in builtin_names() else f"{folder}/{n}" for n in named}


def test_every_model_calling_command_is_covered():
    assert model_calling_commands() == {*map(command_of, CASES), "run", *NO_TEMPLATE}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_request_of_every_command_is_rendered_from_the_overrides(
    case, prompts, corpus, tmp_path
):
    command = command_of(case)
    questions = {q["question"] for q in corpus["berds"]}  # `moot answer`'s, sent as they are
    with ScriptedServer(rules=RULES) as server:
        options = {"out": tmp_path / "out"} | CASES[case](tmp_path, server, corpus)
        try:  # the scripted replies may not read as a judgment: what was sent is the test
            result = moot.call(command, **options, prompts=prompts, cache=tmp_path / "c.sqlite")
        except moot.RunFailed as failed:
            result = failed.result
        chats = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert chats, command
    for request in chats:
        assert_rendered_from_overrides(request.body["messages"], questions)
    assert set(result.prompts) == set(builtin_names()) - {PROTOCOL}  # every one differs


def test_a_recipe_stage_takes_prompts_and_its_manifest_lists_them(prompts, tmp_path):
    with ScriptedServer(rules=RULES) as server:
        stage = {"command": "debate", "topics": str(topics(tmp_path)), "prompts": str(prompts)}
        stage |= {
            k.replace("_", "-"): v for k, v in CASES["debate"](tmp_path, server, None).items()
        }
        stage["topics"] = str(stage["topics"])
        recipe = tmp_path / "loop.yaml"
        recipe.write_text(yaml.safe_dump({"stages": {"gen": stage}}), encoding="utf-8")
        moot.run(recipe, out=tmp_path / "run")
        chats = [r for r in server.requests if r.path == "/v1/chat/completions"]
    assert chats and all(MARK in json.dumps(r.body["messages"]) for r in chats)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    listed = manifest["stages"]["gen"]["prompt_overrides"]
    assert set(listed) == set(builtin_names()) - {PROTOCOL}


def one_override(folder: Path, name: str, line: str) -> Path:
    """`folder` overriding the built-in `name` alone, by its text and `line`."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{template_source(name).rstrip()}\n{line}\n", encoding="utf-8")
    return folder


def test_the_identity_manifest_card_and_dry_run_take_the_overrides(tmp_path):
    """A debate under an override: its manifest and card list it, its dry run plans its tokens,
    and its folder refuses a rerun with other prompts (or none) as any other change."""
    words = " ".join(["extra"] * 200)
    mine = one_override(tmp_path / "mine", "debatune/turn.j2", f"ONE {words}")
    other = one_override(tmp_path / "other", "debatune/turn.j2", "TWO")
    out = tmp_path / "out"
    with ScriptedServer(rules=RULES) as server:
        options = {"out": out, **CASES["debate"](tmp_path, server, None)}
        plain = plan_tables(stdout(moot.debate(**options, dry_run=True)))[1]
        planned = plan_tables(stdout(moot.debate(**options, prompts=mine, dry_run=True)))[1]
        result = moot.debate(**options, prompts=mine)
        sent = len(server.requests)
        for given in (other, None):
            with pytest.raises(moot.MootError) as refused:
                moot.debate(**options, prompts=given)
            assert "different configuration" in refused_in_one_line(refused.value)
        again = moot.debate(**options, prompts=mine)
        assert len(server.requests) == sent and again.exit_code == 0  # the same run: done
    turns = [r for r in server.requests if "ONE extra" in json.dumps(r.body)]
    assert turns and not any("TWO" in json.dumps(r.body) for r in server.requests)
    for key, row in planned.items():  # the override's 200 words in every turn's prompt
        more = row[2] - plain[key][2]
        assert more >= 150 * row[1] if key[1] in ("opening", "rebuttal", "critique") else more == 0
    digest = result.prompts["debatune/turn.j2"]
    assert result.prompts == {"debatune/turn.j2": digest}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["prompt_overrides"] == {"debatune/turn.j2": digest}
    card = (out / "README.md").read_text()
    assert f"| `prompts/debatune/turn.j2` | `{digest}` |" in card
    assert "deviates from the paper" in card


def test_two_runs_side_by_side_each_render_their_own(tmp_path):
    """The Python API runs commands at once in one process: each reads its own overrides."""
    folders = {n: one_override(tmp_path / n, "debatune/turn.j2", f"RUN-{n}") for n in "ab"}

    async def both(servers: dict[str, ScriptedServer]) -> None:
        runs = [
            moot.adebate(**CASES["debate"](tmp_path, servers[n], None), prompts=folders[n],
                         out=tmp_path / f"out-{n}", cache=tmp_path / f"{n}.sqlite")
            for n in "ab"
        ]  # fmt: skip
        await asyncio.gather(*runs)

    with ScriptedServer(rules=RULES) as a, ScriptedServer(rules=RULES) as b:
        asyncio.run(both({"a": a, "b": b}))
    for n, server, other in (("a", a, "RUN-b"), ("b", b, "RUN-a")):
        sent = [json.dumps(r.body) for r in server.requests]
        assert any(f"RUN-{n}" in text for text in sent) and not any(other in t for t in sent)


@pytest.mark.subprocess
def test_a_wrong_override_is_one_line_before_any_request(tmp_path):
    """Each refusal: one line naming the file, exit 2, nothing sent, nothing written."""
    turn = template_source("debatune/turn.j2")
    cases = {
        "missing": (None, "--prompts {dir}: folder not found"),
        "debatune/tunr.j2": (turn, "{dir}/debatune/tunr.j2: no built-in template of that name "
                             "(did you mean 'debatune/turn.j2'?)"),
        "debatune/turn.j2": ("{% if %}", "{dir}/debatune/turn.j2: not a valid Jinja template"),
        "debatune/arguments.j2": ("{{ topic | shout }}", "No filter named 'shout'"),
        "debatune/conclusion.j2": (
            "{{ topic }} {{ mood }}",
            "{dir}/debatune/conclusion.j2: uses mood, which debatune/conclusion.j2 is not given",
        ),
        "debatune/instructions.yaml": ("- 'Argue {mood}'\n", "entry 0: uses {{mood}}; the"),
        "debatrix/dimensions_bp.yaml": ("a: [1", "{dir}/debatrix/dimensions_bp.yaml: not valid"),
        "debatune/protocol.yaml": ("name: mine\n", "a protocol is not overridden: override its"),
        "debatrix/dimensions_1v1.yaml": (
            "- name: x\n", "entry 0: expected mappings with keys name, weight"
        ),
    }  # fmt: skip
    with ScriptedServer(rules=RULES) as server:
        for name, (text, problem) in cases.items():
            folder = tmp_path / "p" / name.replace("/", "_")
            if text is not None:
                (folder / name).parent.mkdir(parents=True)
                (folder / name).write_text(text, encoding="utf-8")
            out = tmp_path / "out"
            options = ["--topics", topics(tmp_path), "--out", out, "--prompts", folder]
            done = run_moot("debate", *options, "--api-base", server.url, "--model", "openai/m")
            assert done.returncode == 2, (name, done.stderr)
            (line,) = done.stderr.splitlines()
            assert problem.format(dir=folder) in line, line
            assert not out.exists() and not server.requests
        planned = run_moot("debate", *options, "--dry-run")  # the dry run refuses it too
        assert planned.returncode == 2 and problem.format(dir=folder) in planned.stderr


def test_export_copies_the_built_ins_which_override_nothing_until_edited(tmp_path):
    folder = tmp_path / "p"
    result = moot.templates.export(folder=folder, names=["debatune", "core/repair.j2"])
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    expected = [n for n in builtin_names() if n.startswith("debatune/")] + ["core/repair.j2"]
    assert names == sorted(expected)
    assert stdout(result).startswith(f"{len(expected)} built-in templates in {folder}")
    assert all((folder / n).read_text() == template_source(n) for n in names)
    with ScriptedServer(rules=RULES) as server:
        done = moot.debate(**CASES["debate"](tmp_path, server, None), out=tmp_path / "o",
                           prompts=folder)  # fmt: skip
    assert done.prompts == {}  # copies as shipped replace nothing: the paper's own prompts
    (folder / "debatune/turn.j2").write_text("edited")
    with pytest.raises(moot.MootError) as refused:  # export never replaces an edited file
        moot.templates.export(folder=folder, names=["debatune/turn.j2"])
    assert "exists and differs from the built-in" in refused_in_one_line(refused.value)
    with pytest.raises(moot.MootError) as refused:
        moot.templates.export(folder=folder, names=["debatun"])
    assert "did you mean 'debatune/" in refused_in_one_line(refused.value)


@pytest.mark.slow  # a tiny GPT-2 scores in process (its prompt never reaches a server): 12 s
@pytest.mark.torch
def test_eval_pd_scores_with_the_overridden_turn_and_claims_it(tmp_path):
    from tests.cli.test_pd import _inputs
    from tests.tiny_gpt2 import tiny_gpt2

    answers, partials = _inputs(tmp_path)
    options = {"answers": answers, "partial_answers": partials, "max_length": 64, "limit": 1}
    options["scorer"] = tiny_gpt2(tmp_path / "gpt2", n_positions=128, initializer_range=0.1)
    mine = one_override(tmp_path / "p", "debateqa/perspective_diversity.j2", "Think twice.")
    scores = {}
    for name, prompts in (("plain", None), ("mine", mine)):
        moot.eval.pd(**options, out=tmp_path / name, prompts=prompts)
        scores[name] = json.loads((tmp_path / name / "scores.jsonl").read_text())["pd"]
    assert scores["mine"] != pytest.approx(scores["plain"])
    with pytest.raises(moot.MootError) as refused:  # its folder is claimed for those prompts
        moot.eval.pd(**options, out=tmp_path / "mine")
    assert "another scorer or settings" in refused_in_one_line(refused.value)
