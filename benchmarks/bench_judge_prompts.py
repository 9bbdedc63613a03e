"""Judge prompt sizes per framework on the 100 DebateArt debates (tokens, no real model).

Every framework (debatrix, non-iterative, chronological, dimensional, direct) judges the PanelBench
DebateArt debates through `judge_debates` in this process, against a scripted server (own process,
127.0.0.1, latency 0) that answers every speech analysis and every judgment with the same
~300-word text, so analyses have a realistic, constant size; score and winner extraction get
schema JSON (``constrained=True``). No context window, cache off, temperature 0. Token counts are
moot's own (``cl100k_base``, as the server reports them in ``usage``). Reported per framework:
prompt tokens per debate and the largest single prompt, how the largest prompt grows with the
transcript (quartiles of transcript tokens), and the ratios non-iterative / debatrix last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common

DATA = _common.ROOT.parent / "shared" / "data" / "panelbench" / "debateart.jsonl"
FRAMEWORK_NAMES = ("debatrix", "non-iterative", "chronological", "dimensional", "direct")
BASELINE = "debatrix"
CONCURRENCY = 16  # debates judged at once; the server has latency 0, so this only keeps it busy
LONGEST = 10

# A fixed 50-word paragraph of judge prose, six times: every analysis and judgment is 300 words.
_PARAGRAPH = (
    "The speaker advances a clear case, but the evidence offered for the central claim is thin "
    "and the rebuttal of the opponent's strongest point leaves a gap that a careful judge must "
    "weigh. The clash on the main mechanism favours this side, while the framing of the "
    "motion remains contested. "
)
REPLY = (_PARAGRAPH * 6).strip()


def debateart(path: Path, script: str) -> list[Any] | None:
    """The DebateArt debates in `path`, offline and loopback-guarded; None (told) without them."""
    if not path.is_file():
        print(f"{script}: skipped, {path} not found (PanelBench DebateArt data)")
        return None
    _common.offline_env()
    _common.guard_loopback()
    from moot.core.data.debates import load_debates

    return list(load_debates(path))


def judge_rules(numbered: bool = False) -> list[Any]:
    """The scripted server's rules: `REPLY` to every speech analysis, judgment and panel.

    `numbered` ends each reply with its rule's match count, so no two replies (and no two
    extraction prompts quoting them) are the same request.
    """
    from moot.testing import Rule

    reply = f"{REPLY} ({{n}})" if numbered else REPLY
    # role="system": extraction prompts are a lone user message quoting the reply, never matched
    return [
        Rule(pattern=r"gives Speech", reply=reply, role="system"),
        Rule(pattern=r"Now the debate ends", reply=reply, role="system"),
    ]


def transcript_tokens(debate: Any) -> int:
    """Tokens of a debate's speeches, moot's counter."""
    from moot.core.llm.tokens import count_tokens

    return sum(count_tokens(speech.content) for speech in debate.speeches)


def longest_speech_tokens(debate: Any) -> int:
    """Tokens of a debate's longest speech."""
    from moot.core.llm.tokens import count_tokens

    return max(count_tokens(speech.content) for speech in debate.speeches)


async def judge(url: str, debates: Sequence[Any], framework: str, out: Path) -> list[dict]:
    """Judge `debates` with `framework`; return the records of ``judgments.jsonl``."""
    from moot.agents.debatrix_judges import FRAMEWORKS
    from moot.core import ModelClient, RetryPolicy, Role, parse_spec
    from moot.graphs.debatrix_run import JudgeSettings, judge_debates

    # no context_window: nothing is condensed or refused, so every prompt is sent whole
    spec = parse_spec("openai/scripted", api_base=url, max_concurrency=64)
    settings = JudgeSettings(Role("judge", spec, 0.0), FRAMEWORKS[framework], constrained=True)
    client = ModelClient(cache=None, retry=RetryPolicy(attempts=1))
    summary = await judge_debates(debates, out, settings, client, concurrency=CONCURRENCY)
    if summary.count("complete") != len(debates) or summary.parse_failures:
        raise RuntimeError(
            f"{framework}: {summary.count('complete')}/{len(debates)} complete, "
            f"{summary.parse_failures} parse failures"
        )
    lines = (out / "judgments.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def mean(values: Sequence[float]) -> float:
    return statistics.fmean(values)


def quartiles(ids_by_length: Sequence[str]) -> list[list[str]]:
    """Four groups of debate ids, shortest transcripts first (sizes differ by at most one)."""
    count = len(ids_by_length)
    groups: list[list[str]] = [[], [], [], []]
    for rank, debate_id in enumerate(ids_by_length):
        groups[rank * 4 // count].append(debate_id)
    return groups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--debates", type=int, help="judge only the first N debates (default: all)")
    parser.add_argument("--data", type=Path, default=DATA, help="PanelBench DebateArt JSONL")
    args = parser.parse_args()
    loaded = debateart(args.data, "bench_judge_prompts")
    if loaded is None:
        return 2
    from moot.core.llm.tokens import count_tokens, encoding_available

    debates = loaded[: args.debates]
    if len(debates) < 4:
        raise SystemExit("bench_judge_prompts: need at least 4 debates for quartiles")
    lengths = {d.id: transcript_tokens(d) for d in debates}
    debates_by_id = {d.id: d for d in debates}
    by_length = sorted(lengths, key=lambda i: (lengths[i], i))
    print("bench_judge_prompts: judge prompt tokens per framework, scripted judge, no window")
    print(f"machine: {_common.machine_note()}")
    counter = "cl100k_base" if encoding_available() else "approximate (len/4)"
    print(
        f"{len(debates)} debates from {args.data.name}, {counter} tokens; every analysis and "
        f"judgment reply: {len(REPLY.split())} words = {count_tokens(REPLY)} tokens"
    )
    print(
        f"transcript tokens: min {min(lengths.values())}, median "
        f"{statistics.median(lengths.values()):.0f}, max {max(lengths.values())}; speeches "
        f"{min(len(d.speeches) for d in debates)}-{max(len(d.speeches) for d in debates)}"
    )

    rules = judge_rules()
    usage: dict[str, dict[str, dict[str, int]]] = {}
    with (
        _common.temp_dir("moot-bench-prompts-") as folder,
        _common.scripted_server(0.0, rules=rules) as url,
        _common.Stopwatch() as total,
    ):
        for name in FRAMEWORK_NAMES:
            with _common.Stopwatch() as watch:
                records = asyncio.run(judge(url, debates, name, folder / name))
            usage[name] = {r["debate"]: r["usage"] for r in records}
            print(f"  {name}: {len(records)} judgments in {watch.seconds:.1f} s", flush=True)
    print(f"after: {_common.machine_note()}")
    print(f"runtime: {total.seconds:.1f} s for {len(FRAMEWORK_NAMES)} frameworks")

    def largest(name: str, ids: Sequence[str]) -> list[int]:
        return [usage[name][i]["largest_prompt"] for i in ids]

    print("\n(1) prompt tokens per debate and largest single prompt")
    print(
        f"{'framework':<14} {'calls/debate':>12} {'prompt tok/debate':>18} "
        f"{'largest mean':>13} {'largest max':>12}"
    )
    for name in FRAMEWORK_NAMES:
        calls = mean([u["calls"] for u in usage[name].values()])
        prompt = mean([u["prompt_tokens"] for u in usage[name].values()])
        big = largest(name, by_length)
        print(f"{name:<14} {calls:12.1f} {prompt:18.0f} {mean(big):13.0f} {max(big):12d}")

    groups = quartiles(by_length)
    print("\n(2) mean largest prompt by transcript-length quartile (Q1 shortest)")
    spans = [f"{lengths[g[0]]}-{lengths[g[-1]]}" for g in groups]
    print(f"{'transcript tok':<14} " + " ".join(f"{s:>12}" for s in spans) + f" {'Q4/Q1':>7}")
    mean_transcript = [mean([lengths[i] for i in g]) for g in groups]
    print(
        f"{'  (mean)':<14} "
        + " ".join(f"{m:12.0f}" for m in mean_transcript)
        + f" {mean_transcript[3] / mean_transcript[0]:7.2f}"
    )
    # what else grows across the quartiles: debatrix's prompts hold one raw speech plus analyses
    speeches = [mean([len(debates_by_id[i].speeches) for i in g]) for g in groups]
    longest_speech = [mean([longest_speech_tokens(debates_by_id[i]) for i in g]) for g in groups]
    print(f"{'  (speeches)':<14} " + " ".join(f"{m:12.1f}" for m in speeches))
    print(
        f"{'  (top speech)':<14} "
        + " ".join(f"{m:12.0f}" for m in longest_speech)
        + f" {longest_speech[3] / longest_speech[0]:7.2f}"
    )
    for name in FRAMEWORK_NAMES:
        means = [mean(largest(name, g)) for g in groups]
        row = " ".join(f"{m:12.0f}" for m in means)
        print(f"{name:<14} {row} {means[3] / means[0]:7.2f}")

    longest = by_length[-LONGEST:]
    other = "non-iterative"
    ratio_max = max(largest(other, by_length)) / max(largest(BASELINE, by_length))
    ratio_long = mean(largest(other, longest)) / mean(largest(BASELINE, longest))
    print(f"\n(3) ratios against {BASELINE} (same run)")
    print(f"ratio {other} / {BASELINE}, max largest prompt: {ratio_max:.2f}")
    print(
        f"ratio {other} / {BASELINE}, mean largest prompt on the {len(longest)} longest "
        f"transcripts: {ratio_long:.2f}"
    )
    per_debate = [mean([u["prompt_tokens"] for u in usage[n].values()]) for n in (other, BASELINE)]
    print(
        f"ratio {other} / {BASELINE}, prompt tokens per debate: {per_debate[0] / per_debate[1]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
