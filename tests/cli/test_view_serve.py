"""`moot view --serve` end to end: a judge run followed while it runs, labelled, in chromium.

One judge run against the scripted server (with latency, so it runs for a few seconds), one
served page watching it grow, three labels by keyboard and mouse that survive a reload, the
server's refusals by plain HTTP, Ctrl-C; and the same labels in a page from disk, exported.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import moot
from moot.core.labels import read_labels
from moot.testing import Rule, ScriptedServer
from tests.cli.browser import open_page
from tests.cli.helpers import moot_env, popen_moot, run_moot
from tests.cli.test_report_agreement import alpha_nominal, kappa
from tests.conftest import shared_data

pytestmark = pytest.mark.subprocess

#: A judge's comment that would run script if the page drew it as markup.
HOSTILE = '<img src=x onerror="window.pwned = 1"></script>'
SCORE = Rule(r'"score": <an integer from 1 to 10>', json.dumps({"comment": HOSTILE, "score": 6}))


def wait_for(test, seconds: float = 20.0, shown=None) -> None:
    """Wait until `test()` holds; else fail, with the text of the element `shown`."""
    end = time.monotonic() + seconds
    while not test():
        assert time.monotonic() < end, shown.inner_text() if shown else "waited too long"
        time.sleep(0.05)


def request(url: str, path: str, method: str = "GET", body: bytes | None = None):
    """A plain HTTP request to the server of `url`, `path` sent as is: (status, text)."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    found = reply.status, reply.read().decode()
    conn.close()
    return found


def logged(path: Path) -> int:
    """The complete lines of a log now."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_a_running_judge_grows_on_the_served_page_and_is_labelled(tmp_path, browser):
    lines = shared_data("panelbench", "debateart.jsonl").read_text(encoding="utf-8").splitlines()
    debates, run = tmp_path / "debates.jsonl", tmp_path / "run"
    debates.write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    env = moot_env(MOOT_CACHE_DIR=str(tmp_path / "cache"))
    judging = (
        "judge", "--debates", debates, "--out", run, "--judge", "openai/scripted",
        "--framework", "dimensional", "--dimensions", "argument", "--concurrency", 1, "--quiet",
    )  # fmt: skip
    with ScriptedServer(rules=[SCORE], latency=0.03) as server:  # ~0.45 s a debate
        judge = popen_moot(*judging, "--api-base", server.url, env=env)
        wait_for(lambda: (run / ".moot" / "owner.json").exists())
        view = subprocess.Popen(
            [sys.executable, "-m", "moot", "view", run, "--serve", "--debates", debates],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        first = view.stdout.readline()
        url = re.fullmatch(r"moot view: (http://127\.0\.0\.1:\d+/[\w-]{32}/) \(Ctrl-C.*\n", first)
        assert url, (first, view.stderr.read() if view.poll() is not None else "")
        url = url.group(1)
        browser.set_offline(False)  # for 127.0.0.1 alone: any other request is cut, and fails
        browser.route(re.compile(r"^(?!http://127\.0\.0\.1:|file:).*"), lambda r: r.abort())
        page = open_page(browser, url)
        # each judgment on the page within two seconds of its line in the log, while the run
        # is killed after two and resumed by its rerun (whose end compacts the log)
        log, seen, killed = run / "judgments.jsonl", [], False
        while judge.poll() is None or not killed or seen[-1][2] < 4:
            count = page.locator("[data-role=count]").inner_text().split(" of ")[0]
            seen.append((time.monotonic(), logged(log), int(count)))
            assert seen[-1][0] - seen[0][0] < 30, seen[-1]
            if not killed and seen[-1][1] >= 2:
                judge.send_signal(signal.SIGKILL)
                assert judge.wait(10) == -signal.SIGKILL
                judge, killed = popen_moot(*judging, "--api-base", server.url, env=env), True
            time.sleep(0.1)
        assert judge.returncode == 0
    for at, written, _ in seen:
        shown = [n for t, _, n in seen if at <= t <= at + 2.0 and n >= written]
        assert shown or at > seen[-1][0] - 2.0, (at, written, seen)
    counts = [n for _, _, n in seen]
    assert counts == sorted(counts) and len(set(counts)) >= 3 and counts[-1] == 4  # it grew
    progress = page.locator("[data-role=progress]")
    wait_for(lambda: "judgments: 4 of 4 (0 failed)" in progress.inner_text(), 5, progress)
    assert "ended" in progress.inner_text()
    assert json.loads((run / ".moot" / "progress.json").read_text())["skipped"] >= 2

    # the server's refusals: no token, a path out of the runs, malformed labels
    token = urlsplit(url).path.strip("/")
    (tmp_path / "outside.txt").write_text("not the run's", encoding="utf-8")
    (run / "leak.txt").symlink_to(tmp_path / "outside.txt")
    refused = {
        "no token": request(url, "/"),
        "another token": request(url, "/" + "x" * len(token) + "/"),
        "no token, a file": request(url, "/files/0/summary.json"),
        "..": request(url, f"/{token}/files/0/../debates.jsonl"),
        "%2e%2e": request(url, f"/{token}/files/0/%2e%2e/debates.jsonl"),
        "symlink out": request(url, f"/{token}/files/0/leak.txt"),
        "label without token": request(url, "/labels", "POST", b"{}"),
    }
    assert {name: status for name, (status, _) in refused.items()} == dict.fromkeys(refused, 403)
    assert "not the run's" not in "".join(text for _, text in refused.values())
    status, text = request(url, f"/{token}/files/0/summary.json")
    assert status == 200 and json.loads(text)["judge"] == "openai/scripted"
    item = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
    pro = item["pro"][0]
    bad = {
        "not JSON": b"{",
        "no such item": {"run": 0, "labeller": "ann", "item": "nope", "field": "winner",
                         "value": pro},
        "no such field": {"run": 0, "labeller": "ann", "item": item["id"], "field": "colour",
                          "value": pro},
        "a value the field does not take": {"run": 0, "labeller": "ann", "item": item["id"],
                                            "field": "winner", "value": "someone"},
        "a bad name": {"run": 0, "labeller": "../x", "item": item["id"], "field": "winner",
                       "value": pro},
        "no such run": {"run": 3, "labeller": "ann", "item": item["id"], "field": "winner",
                        "value": pro},
    }  # fmt: skip
    said = {
        name: request(url, f"/{token}/labels", "POST", b if isinstance(b, bytes) else
                      json.dumps(b).encode())
        for name, b in bad.items()
    }  # fmt: skip
    assert {name: status for name, (status, _) in said.items()} == dict.fromkeys(bad, 400)
    assert 'no item "nope"' in said["no such item"][1]
    assert "someone" in said["a value the field does not take"][1]
    assert all(len(text.strip().splitlines()) == 1 for _, text in said.values())
    assert not (run / "labels").exists() and not (run / "x.jsonl").exists()  # nothing written

    # three labels: two by keyboard, one by mouse with a note; then the page reloaded
    page.fill("[data-role=labeller]", "ann")
    page.locator("[data-role=labeller]").dispatch_event("change")
    rows = page.locator("tr.item-row")
    rows.nth(0).click()
    panel = page.locator("[data-role=labels]")
    judged = panel.locator("tr[data-field='score:argument'] [data-role=judge]")
    assert judged.inner_text() == "0.500"  # the judge's tie on the dimension
    page.keyboard.press("2")  # the winner's second value: the con side
    wait_for(lambda: panel.locator("tr[data-field='score:argument'].active-field").count() == 1)
    page.keyboard.press("3")  # PanelBench's third level: 1, the con side won the dimension
    wait_for(lambda: panel.locator("tr[data-field='score:argument'] button.active").count() == 1)
    second = page.locator("[data-role=detail] strong").first.inner_text()
    page.keyboard.press("n")
    wait_for(lambda: page.locator("[data-role=detail] strong").first.inner_text() != second)
    selected = page.locator("tr.item-row.selected").get_attribute("data-id")
    assert selected == rows.nth(1).get_attribute("data-id")
    page.fill("[data-role=note]", "close call")
    panel.locator("tr[data-field=winner] button").first.click()
    wait_for(lambda: len(labels_in(run)) == 3)
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    page.locator("tr.item-row").nth(0).click()
    assert panel.locator("button.active").count() == 2  # both verdicts of the first item
    page.locator("tr.item-row").nth(1).click()
    assert panel.locator("tr[data-field=winner] button.active").count() == 1
    assert page.locator("[data-role=labelled]", has_text="✓").count() == 2
    assert page.evaluate("window.pwned") is None and page.locator("main img").count() == 0
    assert page.errors == []

    written = labels_in(run)
    ids = [row.get_attribute("data-id") for row in page.locator("tr.item-row").all()[:2]]
    assert [(x["item"], x["field"], x["value"], x.get("note")) for x in written] == [
        (ids[0], "winner", item_side(log, ids[0], "con"), None),
        (ids[0], "score:argument", 1.0, None),
        (ids[1], "winner", item_side(log, ids[1], "pro"), "close call"),
    ]
    assert all(x["labeller"] == "ann" and x["time"].endswith("Z") for x in written)
    assert len(read_labels(run / "labels")) == 3

    # a second labeller, POSTed as the page does; the agreement report on both against the formulas
    for item_id, side in ((ids[0], "con"), (ids[1], "pro")):
        sent = {"run": 0, "labeller": "bob", "item": item_id, "field": "winner",
                "value": item_side(log, item_id, side)}  # fmt: skip
        assert request(url, f"/{token}/labels", "POST", json.dumps(sent).encode())[0] == 200
    sent = {"run": 0, "labeller": "bob", "item": ids[0], "field": "score:argument", "value": 1}
    assert request(url, f"/{token}/labels", "POST", json.dumps(sent).encode())[0] == 200
    moot.report.agreement(run, out=tmp_path / "agreement", resamples=0)
    report = json.loads((tmp_path / "agreement" / "report.json").read_text(encoding="utf-8"))
    (group,) = report["groups"]
    fields = {f["field"]: f for f in group["fields"]}
    ann_winners, bob_winners = ["con", "pro"], ["con", "pro"]  # by side, as the report compares
    humans = fields["winner"]["humans"]
    assert humans["pairs"]["ann vs bob"]["agreement"] == 1.0
    assert humans["pairs"]["ann vs bob"]["kappa"] == pytest.approx(kappa(ann_winners, bob_winners))
    units = [list(unit) for unit in zip(ann_winners, bob_winners, strict=True)]
    assert humans["alpha"] == pytest.approx(alpha_nominal(units))
    argument = fields["score:argument"]["judge"]  # the judge's 0.5 against ann's and bob's 1
    assert argument["pairs"] == 2 and argument["accuracy"]["value"] == 0.0
    assert argument["rmse"]["value"] == pytest.approx(100 * math.sqrt((0.25 + 0.25) / 2))

    taken = run_moot("view", run, "--serve", "--port", urlsplit(url).port, env=env)
    assert taken.returncode == 2 and taken.stdout == ""
    assert taken.stderr.startswith(f"moot: error: port {urlsplit(url).port} on 127.0.0.1: ")
    both = run_moot("view", run, "--serve", "--out", tmp_path / "page.html", env=env)
    assert (both.returncode, both.stderr) == (
        2, "moot: error: --out writes a page; --serve serves it: choose one\n",
    )  # fmt: skip
    view.send_signal(signal.SIGINT)  # Ctrl-C
    assert view.wait(10) == 0, view.stderr.read()
    assert token not in view.stderr.read() + view.stdout.read()  # printed once, in its first line

    # the same run in a page from disk: labels kept in the browser, exported as the same JSONL;
    # its progress as a killed run leaves it (running, not updated since)
    killed = json.loads((run / ".moot" / "progress.json").read_text())
    killed |= {"state": "running", "updated": "2026-01-01T00:00:00.000+00:00"}
    (run / ".moot" / "progress.json").write_text(json.dumps(killed))
    assert run_moot("view", run, "--debates", debates, env=env).returncode == 0
    still = open_page(browser, run / "view.html")
    assert "not updated for" in still.locator("[data-role=state]").inner_text()
    still.fill("[data-role=labeller]", "b/o")  # a name that cannot name a file: asked again
    still.locator("[data-role=labeller]").dispatch_event("change")
    still.locator("tr.item-row").nth(2).click()
    still.keyboard.press("1")
    assert "Your name first" in still.locator("[data-role=label-message]").inner_text()
    still.fill("[data-role=labeller]", "bo")
    still.locator("[data-role=labeller]").dispatch_event("change")
    still.locator("tr.item-row").nth(2).click()
    still.keyboard.press("1")
    wait_for(lambda: still.locator("tr[data-field=winner] button.active").count() == 1)
    with still.expect_download() as download:
        still.click("[data-role=export]")
    exported = tmp_path / "export" / "bo.jsonl"
    exported.parent.mkdir()
    download.value.save_as(exported)
    assert download.value.suggested_filename == "bo.jsonl"
    [line] = read_labels(exported.parent)
    assert (line["field"], line["labeller"]) == ("winner", "bo")


def labels_in(run: Path) -> list[dict]:
    path = run / "labels" / "ann.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def item_side(log: Path, item: str, side: str) -> str:
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["id"] == item:
            return record[side][0]
    raise AssertionError(item)
