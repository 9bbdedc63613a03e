"""P.D. throughput: the answer prefix encoded once and reused vs each (answer, partial) pair alone.

Same model, same inputs, one process. Models: random-init GPT-2s with GPT-2's real tokenizer
(``tests/tiny_gpt2.py``), the tiny test shape (1 layer, width 32) and the gpt2-small shape (12
layers, width 768, 12 heads, 1024 positions: GPT-2's real compute, random weights). Inputs: real
DebateQA demo answers (``../shared/data/debateqa/demo_answers.jsonl``, else synthetic text) with
``--partials`` partial answers each, cut from other demo answers (``--partial-words`` words;
DebateQA explanations are at most 300 words). Modes, interleaved per answer in rotating order:

- reuse: `PerspectiveDiversityScorer` (prefix forward once, KV cache repeated over batches of
  ``--batch-size`` partials);
- pairs, batched: each prefix + partial as its own sequence, right-padded, same batch size;
- pairs, one by one: batch size 1 (the simplest implementation);
- released way: how DebateQA's released ``scripts/eval_PD.py`` batches, on the same token ids
  and the same per-token mean (the paper's numbers): every (answer, partial answer) pair of an
  answer right-padded into one batch of up to 20, the model called with ``labels`` (so it also
  computes its own loss), logits over every position, a cross-entropy over every shifted
  position with the context and padding masked out. Last in the ratios: target 4 of issue 19.

Printed: pairs/s per mode, the ratios reuse / baseline, and the largest relative difference
between the modes' perplexities (they must agree within 1e-4).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import _common

DATA = _common.ROOT.parent / "shared" / "data" / "debateqa" / "demo_answers.jsonl"
SHAPES = {
    "tiny (1 layer, width 32)": {"n_layer": 1, "n_embd": 32, "n_head": 2, "n_positions": 1024},
    "gpt2-small shape (12 layers, width 768)": {
        "n_layer": 12,
        "n_embd": 768,
        "n_head": 12,
        "n_positions": 1024,
    },
}


def inputs(answers: int, partials: int, words: int) -> tuple[list[tuple[str, list[str]]], str]:
    """(answer, partial answers) pairs and where the text came from."""
    if DATA.is_file():
        lines = DATA.read_text(encoding="utf-8").splitlines()
        texts = [json.loads(line)["generation"].strip() for line in lines]
        source = f"{DATA.name} (real answers)"
    else:
        texts = [" ".join(f"Sentence {i} of answer {n} weighs one side." for i in range(60))
                 for n in range(200)]  # fmt: skip
        source = "synthetic text (../shared absent)"
    items = []
    for n in range(answers):
        others = texts[answers + n * partials : answers + (n + 1) * partials]
        items.append((texts[n], [" ".join(o.split()[:words]) for o in others]))
    return items, source


class ReleasedWay:
    """The released script's per-pair batching (see the module docstring), same numbers as moot."""

    def __init__(self, scorer: object) -> None:
        self.scorer = scorer  # moot's scorer only for its model and its token ids

    def score(self, answer: str, partials: list[str]) -> object:
        import torch

        scorer = self.scorer
        model, tokenizer = scorer.model, scorer.tokenizer
        turn = f"user: {answer} Please restate.\nassistant:"  # PLAIN_FORMAT (GPT-2)
        prefix = tokenizer(turn)["input_ids"]
        targets = [tokenizer(" " + p)["input_ids"] for p in partials]
        ppl = []
        with torch.no_grad():
            for start in range(0, len(targets), 20):  # the script's batch_size = 20
                chunk = targets[start : start + 20]
                rows = [prefix + t for t in chunk]
                width = max(map(len, rows))
                ids = torch.full((len(rows), width), tokenizer.eos_token_id)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                labels = torch.full((len(rows), width), -100)
                for i, row in enumerate(rows):
                    ids[i, : len(row)] = torch.tensor(row)
                    mask[i, : len(row)] = 1
                    labels[i, len(prefix) : len(row)] = ids[i, len(prefix) : len(row)]
                logits = model(ids, attention_mask=mask, labels=ids).logits
                loss = torch.nn.CrossEntropyLoss(reduction="none")(
                    logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
                ).view(len(rows), -1)
                for i, t in enumerate(chunk):
                    ppl.append(math.exp(float(loss[i].sum()) / len(t)))
        return Result(tuple(ppl))


@dataclasses.dataclass(frozen=True)
class Result:
    perplexities: tuple[float, ...]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--answers", type=int, default=6, help="answers per shape (default 6)")
    parser.add_argument("--partials", type=int, default=4, help="partial answers per answer")
    parser.add_argument("--partial-words", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="2 answers, tiny shape only")
    parser.add_argument(
        "--shapes", default="tiny,gpt2-small", help="tiny, gpt2-small or both (default both)"
    )
    args = parser.parse_args()
    _common.local_model_env()
    from moot.core.metrics.perspective_diversity import PerspectiveDiversityScorer
    from tests.tiny_gpt2 import tiny_gpt2

    count = 2 if args.quick else args.answers
    items, source = inputs(count, args.partials, args.partial_words)
    wanted = ["tiny"] if args.quick else args.shapes.split(",")
    shapes = {name: shape for name, shape in SHAPES.items() if name.split(" ")[0] in wanted}
    print("bench_pd: P.D. throughput, prefix reuse vs per-pair scoring (mean variant, CPU fp32)")
    print(f"machine: {_common.machine_note()}")
    print(
        f"{len(items)} answers x {args.partials} partial answers ({args.partial_words} words) "
        f"from {source}; batch size {args.batch_size}"
    )
    ratios = []
    with _common.temp_dir("moot-bench-pd-") as folder:
        for name, shape in shapes.items():
            model = tiny_gpt2(folder / str(shape["n_layer"]), **shape)
            scorers = {
                "reuse": PerspectiveDiversityScorer(str(model), batch_size=args.batch_size),
                "pairs, batched": PerspectiveDiversityScorer(
                    str(model), batch_size=args.batch_size, reuse_prefix=False
                ),
                "pairs, one by one": PerspectiveDiversityScorer(
                    str(model), batch_size=1, reuse_prefix=False
                ),
            }
            scorers["released way"] = ReleasedWay(scorers["pairs, batched"])
            for scorer in scorers.values():  # warm-up: first calls allocate and pick kernels
                scorer.score(*items[0])
            seconds = dict.fromkeys(scorers, 0.0)
            results: dict[str, list] = {mode: [] for mode in scorers}
            modes = list(scorers)
            for index, (answer, partials) in enumerate(items):
                turn = index % len(modes)
                for mode in modes[turn:] + modes[:turn]:  # rotate the order
                    with _common.Stopwatch() as watch:
                        results[mode].append(scorers[mode].score(answer, partials))
                    seconds[mode] += watch.seconds
            pairs = sum(len(p) for _, p in items)
            context = [r.context_tokens for r in results["reuse"]]
            print(f"\n{name}: context tokens {min(context)}-{max(context)}")
            for mode in scorers:
                print(f"  {mode:18s} {pairs / seconds[mode]:8.2f} pairs/s ({seconds[mode]:.1f} s)")
            worst = max(
                abs(a - b) / b
                for mode in modes[1:]
                for ra, rb in zip(results["reuse"], results[mode], strict=True)
                for a, b in zip(ra.perplexities, rb.perplexities, strict=True)
            )
            print(f"  largest relative difference in perplexity between modes: {worst:.1e}")
            for mode in modes[1:]:
                ratios.append((name, mode, seconds[mode] / seconds["reuse"]))
    print("\nratios (throughput of reuse / baseline, same run):")
    for name, mode, ratio in ratios:
        print(f"  {name}: reuse / {mode} = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
