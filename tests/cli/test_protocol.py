"""`moot protocol` end to end against the scripted server: who saw what, in which order.

Each turn plan, visibility rule, stop rule and final step runs in process (`moot.protocol`),
and the requests the server received are read back: the prompts say which turns each agent saw.
A malformed protocol is refused in one line before any request; a run killed mid-round resumes
paying only for the calls that were in flight.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import moot
from moot.core.errors import InputError
from moot.testing import Fault, Rule, ScriptedServer
from tests.cli.browser import open_page
from tests.cli.helpers import popen_moot, read_jsonl, run_moot

#: A turn's prompt: who speaks, the round, and every turn it sees as ``[agent@round: text]``.
TURN = (
    "{{ agent }} speaks in round {{ round }} of {{ rounds }} on {{ topic }}."
    "{% for t in transcript %} [{{ t.agent }}@{{ t.round }}{{ '*' if t.own }}: {{ t.text }}]"
    "{% endfor %}{% if summary %} Summary: {{ summary }}{% endif %}"
    "{% if question %} Asked: {{ question }}{% endif %}"
)
SYSTEM = "You are {{ agent }}."


def write_protocol(folder: Path, body: str, **templates: str) -> Path:
    """A protocol file and its templates (``turn.j2`` and ``system.j2`` unless given)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {"turn": TURN, "system": SYSTEM, **templates}.items():
        (folder / f"{name}.j2").write_text(text, encoding="utf-8")
    path = folder / "protocol.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def write_items(folder: Path, *topics: str, **extra: object) -> Path:
    path = folder / "items.jsonl"
    lines = [json.dumps({"topic": topic, **extra}) for topic in topics]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def speaker_rules() -> list[Rule]:
    """Each agent answers with its name and how often it answered (``alice said 0``)."""
    return [
        Rule(f"You are {name}\\.", f"{name} said {{n}}", role="system")
        for name in ("alice", "bob", "carol")
    ]


def run(server: ScriptedServer, protocol: Path, items: Path, out: Path, **extra: object):
    options = {"in_": items, "out": out, "model": "openai/scripted", "api_base": server.url}
    return moot.protocol(protocol=protocol, **options, max_retries=0, concurrency=1, **extra)


def prompts(server: ScriptedServer) -> list[str]:
    """The last message of each request, in the order received."""
    return [r.body["messages"][-1]["content"] for r in server.requests if r.body]


AGENTS = """
agents:
  alice: {system: system.j2}
  bob: {system: system.j2}
"""


def test_round_robin_sees_every_earlier_turn_and_the_conclusion_the_whole_debate(tmp_path):
    protocol = write_protocol(
        tmp_path / "p",
        f"""
name: rr
inputs: [topic]
{AGENTS}
  carol: {{system: system.j2}}
rounds: 2
turns: {{plan: round_robin, order: [alice, bob], template: turn.j2}}
final: {{conclude: {{agent: carol, template: conclude.j2}}}}
outputs: {{sft: {{instruction: "On {{{{ topic }}}}", response: "{{{{ final }}}}"}}}}
""",
        conclude="Conclude on {{ topic }}:"
        "{% for t in transcript %} {{ t.agent }}:{{ t.text }}{% endfor %}",
    )
    items = write_items(tmp_path, "tea")
    with ScriptedServer(rules=speaker_rules()) as server:
        result = run(server, protocol, items, tmp_path / "out")
    assert result.exit_code == 0, str(result)
    assert prompts(server) == [
        "alice speaks in round 0 of 2 on tea.",
        "bob speaks in round 0 of 2 on tea. [alice@0: alice said 0]",
        "alice speaks in round 1 of 2 on tea. [alice@0*: alice said 0] [bob@0: bob said 0]",
        "bob speaks in round 1 of 2 on tea. [alice@0: alice said 0] [bob@0*: bob said 0]"
        " [alice@1: alice said 1]",
        "Conclude on tea: alice:alice said 0 bob:bob said 0 alice:alice said 1 bob:bob said 1",
    ]
    (record,) = read_jsonl(tmp_path / "out" / "transcripts.jsonl")
    assert record["final"] == {"text": "carol said 0"}
    assert record["ended"] == {"by": "rounds", "round": 1}
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "## Protocol" in card and "`conclude.j2` (final.conclude.template)" in card
    (sft,) = read_jsonl(tmp_path / "out" / "sft.jsonl")
    assert sft["messages"] == [
        {"role": "user", "content": "On tea"},
        {"role": "assistant", "content": "carol said 0"},
    ]


def test_simultaneous_rounds_see_the_last_round_and_stop_on_consensus(tmp_path):
    protocol = write_protocol(
        tmp_path / "p",
        f"""
name: sim
inputs: [topic, gold]
gold: gold
{AGENTS}
  carol: {{system: system.j2}}
rounds: 4
turns: {{plan: simultaneous, template: turn.j2}}
visibility: last_round
extract: {{answer: {{pattern: 'ANSWER (\\w+)'}}}}
stop: {{consensus: answer}}
final: {{vote: answer}}
""",
    )
    items = write_items(tmp_path, "tea", gold="x")
    # round 0: x, y, x; round 1: the three agree on x; round 2 would be asked for nothing
    rules = [
        Rule(r"You are bob\..*round 0 ", "ANSWER y", role=None),
        Rule(r"round 0 ", "ANSWER x", role="last"),
        Rule(r"round 1 ", "ANSWER x", role="last"),
    ]
    with ScriptedServer(rules=rules) as server:
        result = run(server, protocol, items, tmp_path / "out")
    assert result.exit_code == 0, str(result)
    seen = prompts(server)
    assert len(seen) == 6  # two rounds of three: consensus after the second
    assert sorted(seen[:3]) == [
        f"{a} speaks in round 0 of 4 on tea." for a in ("alice", "bob", "carol")
    ]
    # each round-1 prompt holds round 0 only, never a turn of its own round
    for prompt in seen[3:]:
        assert prompt.count("@0") == 3 and "@1" not in prompt
    (record,) = read_jsonl(tmp_path / "out" / "transcripts.jsonl")
    assert record["ended"] == {"by": "consensus", "round": 1}
    assert record["final"] == {"answer": "x", "votes": {"x": 3}}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    # round 0's vote is x (2 of 3): right; bob alone was wrong
    assert summary["accuracy"] == {
        "items": 1,
        "final": 1.0,
        "per_round": [1.0, 1.0, 1.0, 1.0],
        "single_agent": pytest.approx(2 / 3),
    }


MODERATED = """
name: mod
inputs: [topic]
agents:
  alice: {system: system.j2}
  bob: {system: system.j2}
  mia: {system: system.j2}
  sam: {system: system.j2}
  jo: {system: system.j2}
rounds: 3
turns:
  plan: moderated
  template: turn.j2
  moderator: {agent: mia, template: pick.j2}
visibility: {summary: {agent: sam, template: summary.j2}}
stop: {judge: {agent: jo, template: stop.j2}}
final:
  verdict:
    agent: jo
    template: verdict.j2
    fields: {winner: {type: choice, values: [alice, bob]}, why: {type: str}}
"""
MODERATED_TEMPLATES = {
    "pick": "Pick in round {{ round }} among {{ agents | join(',') }}. Summary: {{ summary }}",
    "summary": "Summarize round {{ round }}:{% for t in transcript %} {{ t.agent }}:{{ t.text }}"
    "{% endfor %} after: {{ summary }}",
    "stop": "Stop after round {{ round }}?{% for t in transcript %} {{ t.text }}{% endfor %}"
    " Summary: {{ summary }}",
    "verdict": "Verdict:{% for t in transcript %} {{ t.agent }}:{{ t.text }}{% endfor %}",
}


def moderated_rules(stop_after: int | None) -> list[Rule]:
    stop = [Rule(f"Stop after round {stop_after}", '{"stop": true, "reason": "clear"}')]
    return [
        Rule("Pick in round 1", '{"speaker": "bob", "question": "why?"}', role="last"),
        Rule("Pick in round", '{"speaker": "alice", "question": ""}', role="last"),
        Rule("Summarize", "summary {n}", role="last"),
        *(stop if stop_after is not None else []),
        Rule("Stop after", '{"stop": false, "reason": "go on"}', role="last"),
        Rule("Verdict", '{"winner": "bob", "why": "sharper"}', role="last"),
        *speaker_rules(),
    ]


def test_moderated_debate_with_a_running_summary_stops_when_the_judge_says(tmp_path):
    protocol = write_protocol(tmp_path / "p", MODERATED, **MODERATED_TEMPLATES)
    items = write_items(tmp_path, "tea")
    with ScriptedServer(rules=moderated_rules(stop_after=1)) as server:
        result = run(server, protocol, items, tmp_path / "out")
    assert result.exit_code == 0, str(result)
    assert prompts(server) == [
        "Pick in round 0 among alice,bob. Summary:",
        "alice speaks in round 0 of 3 on tea.",
        "Summarize round 0: alice:alice said 0 after:",
        # after a round a step sees what the next round's speaker would: the new summary
        "Stop after round 0? Summary: summary 0",
        "Pick in round 1 among alice,bob. Summary: summary 0",
        # the summary holds round 0; the transcript this round's earlier turns (none)
        "bob speaks in round 1 of 3 on tea. Summary: summary 0 Asked: why?",
        "Summarize round 1: bob:bob said 0 after: summary 0",
        "Stop after round 1? Summary: summary 1",
        "Verdict: alice:alice said 0 bob:bob said 0",
    ]
    (record,) = read_jsonl(tmp_path / "out" / "transcripts.jsonl")
    assert record["ended"] == {"by": "judge", "round": 1}
    assert record["final"] == {"verdict": {"winner": "bob", "why": "sharper"}}
    assert record["summaries"] == ["summary 0", "summary 1"]
    assert [c["step"] for c in record["checks"]] == ["moderator", "stop"] * 2


def test_dry_run_plans_the_calls_a_judge_that_never_stops_makes(tmp_path):
    protocol = write_protocol(tmp_path / "p", MODERATED, **MODERATED_TEMPLATES)
    items = write_items(tmp_path, "tea", "coffee")
    with ScriptedServer(rules=moderated_rules(stop_after=None)) as server:
        plan = run(server, protocol, items, tmp_path / "out", dry_run=True)
        assert not server.requests and not (tmp_path / "out").exists()
        result = run(server, protocol, items, tmp_path / "out")
    assert result.exit_code == 0, str(result)
    planned, ran = Counter(), Counter()  # calls per stage: who speaks is the moderator's
    for row in plan.plan.rows:
        planned[row.stage] += row.calls
    for (_, stage, _), usage in result.ledger.entries.items():
        ran[stage] += usage.calls
    assert planned == ran
    assert ran.total() == len(server.requests) == 2 * (3 * 2 + 2 + 2 + 1)
    assert "moderator picks are counted as the first speaker's" in str(plan)


def test_an_unreadable_verdict_is_recorded_and_the_run_fails(tmp_path):
    protocol = write_protocol(tmp_path / "p", MODERATED, **MODERATED_TEMPLATES)
    items = write_items(tmp_path, "tea")
    rules = [Rule("Verdict", "bob, I think", role="last"), *moderated_rules(stop_after=0)]
    with ScriptedServer(rules=rules) as server:
        with pytest.raises(moot.RunFailed) as failed:
            run(server, protocol, items, tmp_path / "out")
        asked = len(server.requests)
        with pytest.raises(moot.RunFailed) as again:
            run(server, protocol, items, tmp_path / "out")
    assert failed.value.result.exit_code == 1
    assert "final.verdict: no JSON object found in the reply" in str(failed.value)
    (record,) = read_jsonl(tmp_path / "out" / "transcripts.jsonl")
    assert record["status"] == "incomplete" and record["final"] is None
    assert record["failure"]["step"] == "final.verdict" and record["failure"]["raw"]
    assert len(server.requests) == asked and again.value.result.exit_code == 1  # not asked again


#: A well-formed protocol, key by key: each malformed one changes or adds a key.
BASE = {
    "name": "name: bad",
    "inputs": "inputs: [topic]",
    "agents": "agents:\n  alice: {system: system.j2}\n  bob: {}",
    "rounds": "rounds: 2",
    "turns": "turns: {template: turn.j2}",
}


def protocol_text(**change: str) -> str:
    return "\n".join({**BASE, **change}.values()) + "\n"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"round": "round: 3"}, "round: unknown key (did you mean 'rounds'?)"),
        (
            {"turns": "turns: {template: turn.j2, order: [alice, carol]}"},
            "turns.order[1]: unknown agent 'carol'",
        ),
        ({"turns": "turns: {template: missing.j2}"}, "turns.template: no template 'missing.j2'"),
        (
            {"turns": "turns: {template: typo.j2}"},
            "turns.template (typo.j2): unknown variable 'topc' (did you mean 'topic'?)",
        ),
        ({"turns": "turns: {template: broken.j2}"}, "turns.template (broken.j2): line 1: "),
        (
            {"agents": "agents:\n  alice: {model: $judge}\n  bob: {}"},
            "agents.alice.model: model role $judge is not bound (give --role judge=SPEC)",
        ),
        (
            {"outputs": "outputs: {sft: {instruction: x, response: '{{ final }}'}}"},
            "outputs.sft.response: unknown variable 'final'",
        ),
        ({"final": "final: {vote: answer}"}, "final.vote: unknown extraction 'answer'"),
        (
            {"extract": "extract: {a: {pattern: '(x'}}"},
            "extract.a.pattern: not a regular expression",
        ),
        ({"gold": "gold: answer"}, "gold: 'answer' is not one of the inputs"),
        (
            {"turns": "turns: {template: turn.j2, plan: moderated}"},
            "turns: a moderator is given exactly when the plan is 'moderated'",
        ),
        (
            {"stop": "stop: {judge: {agent: nobody, template: turn.j2}}"},
            "stop.judge.agent: unknown agent 'nobody'",
        ),
        (
            {"inputs": "inputs: [topic, question]"},
            "inputs[1]: 'question' is a step's variable: name the input otherwise",
        ),
        (
            {"agents": "agents:\n  alice: {vars: {round: 1}}\n  bob: {}"},
            "agents.alice.vars.round: a step's variable: name it otherwise",
        ),
        (
            {"turns": "turns: {template: answers.j2}"},
            "turns.template (answers.j2): unknown variable 'answers'",
        ),
    ],
)
def test_a_malformed_protocol_is_refused_in_one_line_before_any_request(tmp_path, change, expected):
    protocol = write_protocol(
        tmp_path / "p",
        protocol_text(**change),
        typo="{{ agent }} on {{ topc }}",
        broken="{{ x }",
        answers="{{ answers }}",
    )
    items = write_items(tmp_path, "tea")
    with ScriptedServer(rules=speaker_rules()) as server, pytest.raises(InputError) as refused:
        run(server, protocol, items, tmp_path / "out")
    message = str(refused.value)
    assert message.startswith(f"{protocol}: {expected}"), message
    assert "\n" not in message
    assert not server.requests and not (tmp_path / "out").exists()


def test_an_input_record_without_a_field_is_refused_naming_its_line(tmp_path):
    protocol = write_protocol(tmp_path / "p", protocol_text())
    items = tmp_path / "items.jsonl"
    items.write_text('{"topic": "tea"}\n{"subject": "coffee"}\n', encoding="utf-8")
    refused = pytest.raises(InputError, match=r"items.jsonl, line 2: no field 'topic'")
    with ScriptedServer(rules=speaker_rules()) as server, refused:
        run(server, protocol, items, tmp_path / "out")
    assert not server.requests


@pytest.mark.subprocess
def test_a_protocol_killed_mid_round_resumes_paying_only_for_the_calls_in_flight(tmp_path):
    protocol = write_protocol(
        tmp_path / "p",
        f"""
name: sim
inputs: [topic]
{AGENTS}
rounds: 2
turns: {{plan: simultaneous, template: turn.j2}}
""",
    )
    items = write_items(tmp_path, "tea")
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    hang = Fault("hang", match=r"You are bob\..*round 1 ", hang_seconds=120)
    with ScriptedServer(rules=speaker_rules(), faults=[hang]) as server:
        args = ["protocol", protocol, "--in", items, "--out", out, "--model", "openai/scripted"]
        args += ["--api-base", server.url, "--max-retries", 0, "--cache", cache]
        process = popen_moot(*args)
        deadline = time.time() + 60
        while time.time() < deadline and len(server.requests) < 3:  # round 0, alice's round 1
            time.sleep(0.05)
        time.sleep(0.3)  # alice's reply reaches the cache
        process.send_signal(signal.SIGKILL)
        process.wait()
        before = len(server.requests)
        result = run_moot(*args)
        again = prompts(server)[before:]
    assert result.returncode == 0, result.stderr
    # only bob's round-1 turn, in flight at the kill, is asked again
    assert len(again) == 1 and again[0].startswith("bob speaks in round 1")
    (record,) = read_jsonl(out / "transcripts.jsonl")
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [
        ("alice", 0),
        ("bob", 0),
        ("alice", 1),
        ("bob", 1),
    ]


HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'


@pytest.mark.subprocess
def test_moot_view_shows_the_transcript_summaries_checks_and_verdict_as_text(tmp_path, browser):
    protocol = write_protocol(tmp_path / "p", MODERATED, **MODERATED_TEMPLATES)
    items = write_items(tmp_path, "tea", HOSTILE)
    with ScriptedServer(rules=moderated_rules(stop_after=1)) as server:
        run(server, protocol, items, tmp_path / "out")
    moot.view(tmp_path / "out", out=tmp_path / "page.html")
    page = open_page(browser, tmp_path / "page.html")
    page.click("[data-tab^='Items']")
    rows = page.locator("tr.item-row")
    assert rows.count() == 2
    rows.nth(1).click()
    detail = page.locator("[data-role=detail]").inner_text()
    for shown in ("Round 2 · bob", "Asked: why?", "Running summary", "after round 2", "sharper"):
        assert shown in detail, shown
    assert HOSTILE in detail  # drawn as text
    assert page.evaluate("window.pwned") is None and page.errors == []


def test_a_protocol_is_a_stage_of_a_recipe(tmp_path):
    protocol = write_protocol(
        tmp_path / "p",
        protocol_text(outputs="outputs: {sft: {instruction: '{{ topic }}', response: x}}"),
    )
    items = write_items(tmp_path, "tea")
    with ScriptedServer(rules=speaker_rules()) as server:
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(
            f"stages:\n  talk:\n    command: protocol\n    protocol: {protocol}\n"
            f"    in: {items}\n    model: openai/scripted\n    api_base: {server.url}\n",
            encoding="utf-8",
        )
        result = moot.run(recipe=recipe, out=tmp_path / "run")
    assert result.exit_code == 0, str(result)
    assert len(server.requests) == 4  # two rounds of alice and bob
    (record,) = read_jsonl(tmp_path / "run" / "talk" / "transcripts.jsonl")
    assert [t["agent"] for t in record["turns"]] == ["alice", "bob", "alice", "bob"]
    assert result.stages["talk"].outputs["sft"].exists()


def test_a_protocol_built_in_python_is_saved_and_run_as_its_file_is(tmp_path):
    from moot.agents.protocol_spec import Agent, Protocol, Turns

    folder = tmp_path / "p"
    write_protocol(folder, "unused: true\n")
    built = Protocol(
        name="built",
        inputs=["topic"],
        agents={"alice": Agent(system="system.j2"), "bob": Agent(system="system.j2")},
        rounds=1,
        turns=Turns(template="turn.j2"),
        base=folder,
    )
    with pytest.raises(InputError, match="beside its templates"):
        built.save(tmp_path / "elsewhere.yaml")
    path = built.save(folder / "built.yaml")
    with ScriptedServer(rules=speaker_rules()) as server:
        result = run(server, path, write_items(tmp_path, "tea"), tmp_path / "out")
    assert result.exit_code == 0 and len(server.requests) == 2


def test_moot_protocol_debatune_sends_what_moot_debate_sends(tmp_path):
    # the requests `moot debate` sent for these two arguments (tests/graphs/test_debatune_debate.py)
    recorded = Path(__file__).parents[1] / "graphs" / "data" / "debatune_requests.json"
    debate = json.loads(recorded.read_text(encoding="utf-8"))["2"]
    items = tmp_path / "arguments.jsonl"
    rows = [("Affirmative", "Cages harm animals."), ("Negative", "Zoos save species.")]
    topic = "Should zoos be banned?"
    items.write_text(
        "".join(json.dumps({"topic": topic, "stance": s, "argument": a}) + "\n" for s, a in rows),
        encoding="utf-8",
    )
    with ScriptedServer(rules=[Rule("AI:", "Turn {n} text.", role="last")]) as server:
        result = run(server, "debatune", items, tmp_path / "out")
    assert result.exit_code == 0, str(result)
    sent = [{k: r.body[k] for k in ("messages", "max_tokens")} for r in server.requests]
    assert sent == [{k: r[k] for k in ("messages", "max_tokens")} for r in debate]
    assert len(read_jsonl(tmp_path / "out" / "sft.jsonl")) == 2


def test_a_dry_run_says_how_long_the_rate_limits_make_the_run_and_waits_for_none(tmp_path):
    protocol = write_protocol(tmp_path / "p", protocol_text())
    items = write_items(tmp_path, *(f"topic {n}" for n in range(6)))
    with ScriptedServer(rules=speaker_rules()) as server:
        started = time.monotonic()
        plan = run(server, protocol, items, tmp_path / "out", dry_run=True, rpm=4)
        assert time.monotonic() - started < 30 and not server.requests
    # 6 items, 2 rounds of alice and bob: 24 calls at 4 a minute
    assert plan.plan.limited_minutes() == {"openai/scripted": 6.0}
    assert "limits: openai/scripted needs about 6.0 min at its --rpm/--tpm" in str(plan)
