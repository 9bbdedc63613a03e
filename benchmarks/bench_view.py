"""`moot view` on a 10,000-debate run: time to build the page, its size, time until usable.

A synthetic `moot debate` folder (``debates.jsonl`` of ``--debates`` debates, 2 rounds, turns and
conclusions of ``--chars`` characters, 2% failed; a ``manifest.json`` with a ledger; the owner
mark) is written to a temporary folder, never committed. Then, median of ``--rounds``:

- build: wall time of ``moot view RUN`` in a fresh interpreter (start-up, reading, writing);
- open: headless chromium (Debian's ``/usr/bin/chromium`` through playwright) from
  ``page.goto(file://...)`` until the page's script has drawn the first page of items
  (``body[data-ready]``), in a new tab of one browser;
- search: from typing a word in the search box until the filtered count is shown (the first
  search builds each item's search text);
- open item: from clicking a row until its transcript is drawn.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common

WORDS = [
    "claim",
    "evidence",
    "rebuttal",
    "premise",
    "therefore",
    "however",
    "policy",
    "cost",
    "benefit",
    "risk",
    "data",
]


def write_run(folder: Path, debates: int, chars: int) -> None:
    """A `moot debate` folder of `debates` synthetic debates (2% failed)."""
    rng = random.Random(0)

    def text(n: int) -> str:
        return " ".join(rng.choices(WORDS, k=n // 7))[:n]  # the words average 7 characters

    (folder / ".moot").mkdir(parents=True)
    (folder / ".moot" / "owner.json").write_text('{"command": "moot debate", "version": "0.1.0"}')
    with (folder / "debates.jsonl").open("w", encoding="utf-8") as f:
        for i in range(debates):
            failed = i % 50 == 7
            stance = ("Affirmative", "Negative")[i % 2]
            other = ("Negative", "Affirmative")[i % 2]
            turns = [
                {"speaker": s, "side": side, "round": r, "text": text(chars)}
                for r in range(2)
                for s, side in (("A", stance), ("B", other))
            ]
            record = {
                "id": f"{i:016x}",
                "topic": f"Topic {i // 4}: should {rng.choice(WORDS)} be regulated?",
                "stance": stance,
                "argument": text(80),
                "status": "failed" if failed else "ok",
                "error": "openai/x: HTTP 500 from http://127.0.0.1:1/v1: boom" if failed else None,
                "transcript": turns[:3] if failed else turns,
                "conclusion": None if failed else text(chars),
                "models": {"debater_a": "openai/x", "debater_b": "openai/x"},
                "rounds": 2,
                "shard": "0/1",
            }
            f.write(json.dumps(record) + "\n")
    row = {"role": "debater_a", "stage": "opening", "model": "openai/x", "calls": debates}
    ledger = {"by_role": [row], "total": {"calls": debates}, "unpriced": ["openai/x"]}
    manifest = {"kind": "debatune", "counts": {"debates": debates}, "ledger": ledger}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--debates", type=int, default=10_000)
    parser.add_argument("--chars", type=int, default=1200, help="characters per turn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="500 debates, one round")
    args = parser.parse_args()
    if args.quick:
        args.debates, args.rounds = 500, 1
    sys.path.insert(0, str(_common.ROOT))
    from tests.cli.browser import ARGS, CHROMIUM

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_run(run, args.debates, args.chars)
        size_in = (run / "debates.jsonl").stat().st_size
        moot = [sys.executable, "-m", "moot", "view", str(run), "--quiet"]
        builds = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            subprocess.run(moot, check=True, env=_common.offline_env())
            builds.append(time.perf_counter() - start)
        page_path = run / "view.html"
        size_out = page_path.stat().st_size

        from playwright.sync_api import expect, sync_playwright

        opens, searches, items = [], [], []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
            for _ in range(args.rounds):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                start = time.perf_counter()
                page.goto(page_path.as_uri())
                page.wait_for_selector("body[data-ready='1']", timeout=120_000)
                opens.append(time.perf_counter() - start)
                start = time.perf_counter()
                page.fill("[data-role=search]", "topic 42:")
                expect(page.locator("[data-role=count]")).to_have_text(
                    f"4 of {args.debates} items", timeout=120_000
                )
                searches.append(time.perf_counter() - start - 0.15)  # the input's debounce
                page.fill("[data-role=search]", "")
                start = time.perf_counter()
                page.locator("tr.item-row").nth(3).click()
                page.wait_for_selector("[data-role=detail] .turn")
                items.append(time.perf_counter() - start)
                page.close()
            browser.close()

    med = statistics.median
    print(f"debates: {args.debates}, {args.chars} characters a turn; rounds: {args.rounds}")
    print(f"debates.jsonl: {size_in / 1e6:.1f} MB; view.html: {size_out / 1e6:.1f} MB")
    print(f"build (moot view, fresh interpreter): {med(builds):.2f} s")
    print(f"open until drawn (headless chromium): {med(opens):.2f} s")
    print(f"first search (less the 0.15 s debounce): {med(searches):.2f} s")
    print(f"open an item: {med(items) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
