"""CompQA rubric judging throughput (answers/s): `moot eval compqa` at concurrency 1 vs 32.

The scripted server (own process, 50 ms latency) answers every rubric prompt with a valid score
dict. moot = `evaluate_compqa` (through the run engine, `core/runs.py:run_claimed`, cache
off, judged files and summary written) on real CompQA answers from
``../shared/data/compqa/raw_summaries`` (synthetic answers when that folder is absent).
Concurrency 1 is also how the paper's released script judges (one request at a time). Prints
answers/s and the ratio last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import _common

LATENCY = 0.05
RAW = _common.ROOT.parent / "shared" / "data" / "compqa" / "raw_summaries"


def answer_files(count: int, folder: Path) -> tuple[list, str]:
    """`count` answers as `AnswerFile`s: CompQA's GPT-4 and Llama-3 answers, else synthetic."""
    from moot.graphs.compqa_eval import load_answer_files

    names = [f"{g}_scenario_{s}.json" for g in ("gpt4", "llama3-70b") for s in (1, 2, 3, 4)]
    if all((RAW / name).exists() for name in names):
        files, left = [], count
        for name in names:
            if left <= 0:
                break
            answers = json.loads((RAW / name).read_text(encoding="utf-8"))[:left]
            left -= len(answers)
            (folder / name).write_text(json.dumps(answers), encoding="utf-8")
            files.append(folder / name)
        return load_answer_files(files), f"real answers from {RAW}"
    rows = [
        {
            "object1": f"object {i}",
            "object2": f"rival {i}",
            "aspect": "",
            "comparison": f"Answer {i}: object {i} is lighter, rival {i} cheaper. Best: neither.",
        }
        for i in range(count)
    ]
    path = folder / "synthetic_scenario_1.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return load_answer_files([path]), "synthetic answers (../shared/data absent)"


async def moot_rate(url: str, files: list, concurrency: int) -> float:
    from moot.core import ModelClient, RetryPolicy, Role, parse_spec
    from moot.graphs.compqa_eval import evaluate_compqa
    from moot.graphs.judging import Judging

    role = Role("judge", parse_spec("openai/judge", api_base=url, max_concurrency=64), 0.0)
    client = ModelClient(cache=None, retry=RetryPolicy(attempts=1))
    with _common.temp_dir("moot-bench-compqa-") as out:
        start = time.perf_counter()
        result = await evaluate_compqa(files, Judging(out, role, client, concurrency))
        seconds = time.perf_counter() - start
    overall = result.summary["overall"]
    if overall["n_valid"] != overall["n"]:
        raise RuntimeError(f"judging failed: {overall}")
    return len(result.records) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: few answers")
    args = parser.parse_args()
    _common.offline_env()
    _common.guard_loopback()
    from moot.core.data.compqa import MAXIMA
    from moot.graphs.compqa_eval import AnswerFile
    from moot.testing import Rule

    count = 64 if args.quick else 480
    print("bench_compqa_judge: CompQA rubric judging, answers/s, 50 ms server latency")
    print(f"machine: {_common.machine_note()}")
    with _common.temp_dir("moot-bench-compqa-data-") as folder:
        files, source = answer_files(count, folder)
        print(f"answers: {sum(len(f.answers) for f in files)} {source}")
        serial_count = max(24, count // 8)
        serial_files = [AnswerFile(files[0].path, files[0].answers[:serial_count])]
        warm = [AnswerFile(files[0].path, files[0].answers[-12:])]
        reply = json.dumps({str(n): MAXIMA[n] for n in MAXIMA})
        rules = [Rule(pattern="Comparative answer", reply=reply)]
        with _common.scripted_server(LATENCY, rules=rules) as url:
            asyncio.run(moot_rate(url, warm, 4))  # warm-up: imports, connections
            serial = asyncio.run(moot_rate(url, serial_files, 1))
            parallel = asyncio.run(moot_rate(url, files, 32))
    print(f"after: {_common.machine_note()}")
    print(f"moot, concurrency 1 ({serial_count} answers):  {serial:7.1f} answers/s")
    print(f"moot, concurrency 32 ({count} answers): {parallel:7.1f} answers/s")
    print(f"ratio C=32 / C=1: {parallel / serial:.2f}")


if __name__ == "__main__":
    main()
