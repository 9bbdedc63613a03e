"""Local generation throughput: greedy requests batched by `LocalModel` vs one at a time.

Same model, same prompts, one process. The model is the tests' tiny random Llama
(``tests/tiny.py``: 1 layer, width 16, a word-level tokenizer; it never says a special token, so
every reply runs its whole budget), in float32 on the CPU. ``--requests`` chat prompts of 3 to
40 words, ``--max-tokens`` new tokens each, greedy, ``--rounds`` times. Modes, alternated on
each chunk of ``--batch-size`` requests (their order reversed every other chunk), so a shared
machine's swings of load fall on both:

- one at a time: ``LocalModel(batch_size=1)``, the requests in turn (what `moot generate` did
  before ``--batch-size``: one ``generate`` call per request under a lock);
- batched: ``LocalModel(batch_size=N)``, every request submitted at once, so its batcher
  left-pads them into ``generate`` calls of up to N rows.

Printed: requests/s per mode (all chunks), the batch sizes used, whether the replies are
identical (they must be), and the ratio batched / one at a time last.
"""

from __future__ import annotations

import argparse

import _common

WORDS = ["zoos", "are", "good", "bad", "animals", "because", "cages", "cost", "research", "care"]


def prompts(count: int) -> list[list[dict[str, str]]]:
    """`count` one-turn chats of 3 to 40 words, varied so rows need left padding."""
    chats = []
    for n in range(count):
        words = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(3 + (n * 13) % 38)]
        chats.append([{"role": "user", "content": " ".join(words)}])
    return chats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=32, help="prompts per round (32)")
    parser.add_argument("--max-tokens", type=int, default=32, help="new tokens each (32)")
    parser.add_argument("--batch-size", type=int, default=8, help="rows per call (8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode (3)")
    parser.add_argument("--quick", action="store_true", help="8 requests, 1 round")
    args = parser.parse_args()
    _common.local_model_env()
    from moot.core.llm.local_hf import LocalModel
    from tests.tiny import tiny_llama

    count, rounds = (8, 1) if args.quick else (args.requests, args.rounds)
    chats = prompts(count)
    params = {"max_tokens": args.max_tokens, "temperature": 0.0}
    print("bench_local_generate: batched vs one-at-a-time greedy generation (tiny Llama, CPU fp32)")
    print(f"machine: {_common.machine_note()}")
    print(f"{count} requests x {args.max_tokens} new tokens, batch size {args.batch_size}")
    with _common.temp_dir("moot-bench-local-") as folder:
        model = str(tiny_llama(folder / "tiny", WORDS, says_words=True))
        models = {
            "one at a time": LocalModel(model),
            "batched": LocalModel(model, batch_size=args.batch_size),
        }

        def one_at_a_time(chunk: list) -> list:
            return [models["one at a time"].generate(chat, params) for chat in chunk]

        def batched(chunk: list) -> list:
            futures = [models["batched"].submit(chat, params) for chat in chunk]
            return [future.result() for future in futures]

        runs = {"one at a time": one_at_a_time, "batched": batched}
        for run in runs.values():  # warm-up: first calls allocate and pick kernels
            run(chats[: args.batch_size])
        # the machine is shared and its load swings within seconds: the modes alternate on
        # each chunk of batch-size requests, so both see the same load
        seconds = dict.fromkeys(runs, 0.0)
        replies: dict[str, list] = {mode: [] for mode in runs}
        step = args.batch_size
        chunks = [chats[i : i + step] for i in range(0, len(chats), step)]
        for index, chunk in enumerate(chunks * rounds):
            order = list(runs) if index % 2 == 0 else list(runs)[::-1]
            for mode in order:
                with _common.Stopwatch() as watch:
                    answered = runs[mode](chunk)
                seconds[mode] += watch.seconds
                if index < len(chunks):
                    replies[mode] += answered
        for mode in runs:
            rate = count * rounds / seconds[mode]
            print(f"  {mode:14s} {rate:8.2f} requests/s ({seconds[mode]:.1f} s in all)")
        sizes = models["batched"].batch_sizes
        print(f"  batch sizes used (size: calls, warm-up included): {dict(sorted(sizes.items()))}")
        same = replies["batched"] == replies["one at a time"]
        print(f"  replies identical: {same}")
        ratio = seconds["one at a time"] / seconds["batched"]
    print(f"\nratio (throughput batched / one at a time, same run): {ratio:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
