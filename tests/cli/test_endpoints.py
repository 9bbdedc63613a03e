"""Several endpoints of one model (`--api-base A,B --api-base C`), through real HTTP.

One `moot debate` run against two healthy scripted servers, one answering 500 to everything and
one port refusing connections: every debate is done, the healthy two share the requests, each
debate's requests go to one of them, the failing ones are taken out, and the ledger names the
endpoint of every call.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

import moot
from moot.testing import Fault, Rule, ScriptedServer, refused_url
from tests.cli.helpers import read_jsonl, run_moot, stdout, write_topics

pytestmark = pytest.mark.subprocess

TOPICS = ["Should zoos be banned?", "Is remote work better?", "Should meat be taxed?"]
ARGUMENT = re.compile(r"Argument [a-z]\d+[ab] holds\.")


def rules(server: str) -> list[Rule]:
    """Argument lists whose arguments no other server (and no other list) repeats."""
    reply = f'{{"arguments": ["Argument {server}{{n}}a holds.", "Argument {server}{{n}}b holds."]}}'
    return [Rule(pattern="list your arguments", reply=reply)]


SECRET = "s3cretPW"


def with_password(url: str) -> str:
    """`url` with a user and password (a proxy's basic auth), which no output may show."""
    return url.replace("http://", f"http://moot:{SECRET}@")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("endpoints")
    topics = write_topics(tmp / "topics.json", TOPICS)
    with (
        refused_url() as refused,  # given with credentials: never shown
        ScriptedServer(rules=rules("a"), latency=0.02) as a,
        ScriptedServer(rules=rules("b"), latency=0.02) as b,
        ScriptedServer(rules=rules("c"), faults=[Fault("500", times=10**6)]) as failing,
    ):
        result = run_moot(
            "debate",
            *("--topics", topics, "--out", tmp / "out", "--model", "openai/scripted"),
            *("--api-base", f"{a.url},{b.url}"),  # commas and a repeated flag
            *("--api-base", failing.url, "--api-base", with_password(refused)),
            *("--arguments-per-stance", 2, "--concurrency", 6, "--no-cache"),
            *("--max-concurrency", 2),  # 2 per endpoint on average
        )
        yield {
            "result": result,
            "out": tmp / "out",
            "healthy": {a.url: a.requests, b.url: b.requests},
            "failing": failing.requests,
            "urls": [a.url, b.url, failing.url, refused],
            "peaks": [a.peak_in_flight, b.peak_in_flight],
        }


def test_every_debate_is_done_despite_a_failing_and_a_refusing_endpoint(run):
    result = run["result"]
    assert result.returncode == 0, result.stderr
    debates = read_jsonl(run["out"] / "debates.jsonl")
    assert len(debates) == 12 and {d["status"] for d in debates} == {"ok"}
    # the refusing endpoint is named once, up front, and the run goes on without it
    assert result.stderr.count(f"note: cannot reach {run['urls'][3]}: connection refused") == 1


def test_requests_spread_and_each_debate_stays_on_one_endpoint(run):
    served: dict[str, set[str]] = defaultdict(set)
    for url, requests in run["healthy"].items():
        ok = [r for r in requests if r.outcome == "ok"]
        assert len(ok) >= 5, f"{url} took {len(ok)} requests: not spread"
        for request in ok:
            text = "\n".join(m["content"] for m in request.body["messages"])
            argument = ARGUMENT.search(text)
            if argument:  # a debate's request (the others list arguments)
                served[argument.group()].add(url)
    assert len(served) == 12
    assert {k: v for k, v in served.items() if len(v) > 1} == {}
    # --max-concurrency 2 with 4 endpoints: 8 in flight to the model, more than the 6 debates
    assert max(run["peaks"]) <= 6


def test_the_failing_endpoints_share_moves_to_the_others(run):
    # taken out after its second failure (cooled down for 30 s): the others take its share
    assert 1 <= len(run["failing"]) <= 4
    assert {r.outcome for r in run["failing"]} == {"500"}


def test_the_ledger_names_the_endpoint_of_every_call_and_no_secret(run):
    manifest = json.loads((run["out"] / "manifest.json").read_text())
    a, b, *_ = run["urls"]
    rows = manifest["ledger"]["by_role"]
    assert rows and all(sum(r["endpoints"].values()) == r["calls"] for r in rows)
    # retried: only what the failing endpoints failed (each out after 2), never a refusal of the
    # client's own (litellm's per-endpoint limit answers 429 instead of queueing: not used)
    assert manifest["ledger"]["total"]["retries"] <= 12
    total = manifest["ledger"]["total"]["endpoints"]
    assert set(total) == {a, b}  # never the failing ones
    healthy = run["healthy"]
    assert total == {url: sum(r.outcome == "ok" for r in healthy[url]) for url in (a, b)}
    # the spec's endpoints, in the order given (commas, then each repeated flag), no credentials
    assert manifest["roles"][0]["api_bases"] == run["urls"]
    result = run["result"]
    files = [p.read_text(errors="replace") for p in Path(run["out"]).rglob("*") if p.is_file()]
    assert not any(SECRET in text for text in [result.stdout, result.stderr, *files])


def test_config_lists_endpoints_and_the_command_line_replaces_them(tmp_path):
    with ScriptedServer() as a, ScriptedServer() as b, ScriptedServer() as c:
        config = tmp_path / "check.yaml"
        config.write_text(json.dumps({"api-base": [a.url, b.url]}))
        both = run_moot("models", "check", "openai/scripted", "--config", config)
        assert both.returncode == 0, both.stderr
        assert [line.split(": ok")[0] for line in both.stdout.splitlines() if ": ok" in line] == [
            f"openai/scripted at {a.url}",
            f"openai/scripted at {b.url}",
        ]
        given = run_moot(
            "models", "check", "openai/scripted", "--config", config, "--api-base", c.url
        )
        assert given.returncode == 0, given.stderr
        assert (len(a.requests), len(b.requests), len(c.requests)) == (1, 1, 1)
        plan = stdout(moot.models.check("openai/scripted", config=config, dry_run=True))
        assert (len(a.requests), len(b.requests)) == (1, 1)  # a plan sends nothing
    assert re.search(r"round trips +2 +0 +2\n", plan)  # one per endpoint, as the check's
    assert re.search(r"check +check +openai/scripted +2 +34 +64 ", plan)


@pytest.mark.parametrize(
    ("endpoints", "problem"),
    [
        (["http://127.0.0.1:9/v1,not-a-url"], "invalid --api-base 'not-a-url'"),
        (["http://127.0.0.1:9/v1,"], "invalid --api-base ''"),
        (["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/"], "is given twice"),
        ([f"htp://u:{SECRET}@127.0.0.1:9/v1?key={SECRET}"], "'htp://127.0.0.1:9/v1?key=***'"),
        # a port or host Python cannot read: one line, not a ValueError's traceback
        (["http://127.0.0.1:99999/v1"], "port out of range"),
        ([f"http://u:{SECRET}@[::1/v1"], "'http://[::1/v1' for 'openai/scripted': invalid ipv6"),
        # sent by no client (the path would be lost after it): refused, never a 404 per call
        ([f"http://127.0.0.1:9/v1,http://127.0.0.1:8/v1?key={SECRET}"], "cannot send a query"),
    ],
)
def test_bad_endpoints_are_one_line_exit_2(endpoints, problem):
    flags = [part for url in endpoints for part in ("--api-base", url)]
    result = run_moot("models", "check", "openai/scripted", *flags)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and problem in result.stderr, result.stderr
    assert SECRET not in result.stderr and "Traceback" not in result.stderr


def test_every_endpoint_refusing_is_one_line_exit_2_without_credentials(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    out = tmp_path / "out"
    with refused_url() as first, refused_url() as second:
        urls = f"{first.replace('http://', f'http://u:{SECRET}@')},{second}"
        args = ("--topics", topics, "--out", out, "--model", "openai/scripted", "--api-base", urls)
        result = run_moot("debate", *args)
    assert result.returncode == 2 and not out.exists()
    assert result.stderr.strip() == f"moot: error: cannot reach {first}: connection refused"


def test_every_endpoint_failing_fails_the_items_cleanly(tmp_path):
    topics = write_topics(tmp_path / "topics.json", TOPICS)
    failing = [Fault("500", times=10**6)]
    with ScriptedServer(faults=failing) as a, ScriptedServer(faults=failing) as b:
        result = run_moot(
            "debate",
            *("--topics", topics, "--out", tmp_path / "out", "--model", "openai/scripted"),
            *("--api-base", f"{a.url},{b.url}", "--max-retries", 1, "--no-cache"),
        )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lists = read_jsonl(tmp_path / "out" / "arguments.jsonl")
    assert len(lists) == 6 and {r["status"] for r in lists} == {"failed"}
    # each error names the endpoint that failed, or says every one is out
    assert all(
        "HTTP 500 from http://127.0.0.1" in r["error"] or "every endpoint" in r["error"]
        for r in lists
    )


def answer_questions(tmp_path: Path, urls: str, *flags: object, count: int = 40):
    """`moot answer` of `count` questions, 2 at a time, over the endpoints `urls`."""
    questions = tmp_path / "questions.jsonl"
    rows = [{"id": f"q{i}", "question": f"Is question {i} a good one?"} for i in range(count)]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return run_moot(
        "answer", "--questions", questions, "--out", tmp_path / "out", "--model", "openai/scripted",
        "--api-base", urls, "--concurrency", 2, "--no-cache", *flags,
    )  # fmt: skip


def test_endpoint_flags_set_the_failures_that_take_it_out_and_how_long_it_stays_out(tmp_path):
    # b fails its first three requests, then answers: out after three failures, back after 2 s
    # (2, not 1: on a loaded machine three failures 1 s apart would not count as one run of them)
    # (the defaults, 2 and 30 s: test_the_failing_endpoints_share_moves_to_the_others)
    with (
        ScriptedServer(rules=[Rule(".", "Fine.")], latency=0.1) as a,
        ScriptedServer(rules=[Rule(".", "Fine.")], latency=0.1, faults=[Fault("500", 3)]) as b,
    ):
        urls = f"{a.url},{b.url}"
        flags = ("--endpoint-max-fails", 3, "--endpoint-cooldown", 2)
        # 100 questions at 0.1 s, 2 at a time: about 5 s of work, so b's 2 s out ends well
        # before the run does
        result = answer_questions(tmp_path, urls, *flags, count=100)
        recovered = b.url
    assert result.returncode == 0, result.stderr
    outcomes = [r.outcome for r in b.requests]
    assert outcomes[:3] == ["500"] * 3, outcomes
    # out for the cooldown after its third failure (a request already routed to it may still
    # arrive), then taking calls again
    times = [r.time for r in b.requests]
    gaps = [i for i in range(3, len(times)) if times[i] - times[i - 1] >= 1.8]
    assert gaps, (outcomes, [round(t - times[0], 2) for t in times])
    back = gaps[0]
    assert outcomes[back:].count("ok") >= 2, outcomes
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["ledger"]["total"]["endpoints"][recovered] == outcomes.count("ok")


def test_an_endpoint_flag_out_of_range_is_exit_2():
    result = run_moot("models", "check", "openai/scripted", "--endpoint-max-fails", "0")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--endpoint-max-fails: must be a positive integer, got 0" in result.stderr


def test_an_endpoint_that_never_answers_is_taken_out_and_no_retry_goes_back_to_it(tmp_path):
    # issue 29, item 14: the deadline (--timeout) is a failure of the endpoint that missed it,
    # so after two it is out; each timed-out request's retry goes to the other endpoint
    hang = [Fault("hang", times=10**6, hang_seconds=60)]
    with (
        ScriptedServer(rules=[Rule(".", "Fine.")]) as healthy,
        ScriptedServer(rules=[Rule(".", "Fine.")], faults=hang) as silent,
    ):
        result = answer_questions(tmp_path, f"{silent.url},{healthy.url}", "--timeout", 2, count=12)
        arrived, answered = silent.arrivals, healthy.url
    assert result.returncode == 0, result.stderr
    # two failures take it out; one more may be on its way while the second is missed (2 items
    # in flight). Each missed deadline is one retry, never to it again. A request can miss its
    # deadline before it reaches the server (litellm's first call in a loaded process), so the
    # server may have seen fewer of them than were sent to it.
    total = json.loads((tmp_path / "out" / "summary.json").read_text())["ledger"]["total"]
    assert 1 <= total["retries"] <= 3 and arrived <= total["retries"], (total, arrived)
    assert total["endpoints"] == {answered: 12}


def test_every_form_of_an_endpoint_list_refuses_what_one_endpoint_refuses(tmp_path):
    # issue 29, item 15: a list in --config, a --router file, one URL or several: one rule
    bad = f"http://127.0.0.1:9/v1?key={SECRET}"
    config = tmp_path / "check.yaml"
    config.write_text(json.dumps({"api-base": ["http://127.0.0.1:8/v1", bad]}))
    routers = []
    for api_base in (bad, "http://127.0.0.1:8/v1,http://127.0.0.1:9/v1"):
        routers.append(tmp_path / f"router{len(routers)}.yaml")
        params = {"model": "openai/scripted", "api_base": api_base}
        routers[-1].write_text(json.dumps({"model_list": [
            {"model_name": "openai/scripted", "litellm_params": params}]}))  # fmt: skip
    cases = [
        (["--api-base", bad], "cannot send a query string"),
        (["--config", config], "cannot send a query string"),
        (["--router", routers[0]], "cannot send a query string"),
        (["--router", routers[1]], "api_base: one URL per deployment"),
    ]
    for flags, problem in cases:
        result = run_moot("models", "check", "openai/scripted", *flags)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and problem in result.stderr, result.stderr
        assert SECRET not in result.stderr
