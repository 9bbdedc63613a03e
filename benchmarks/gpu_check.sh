#!/usr/bin/env bash
# moot on a CUDA GPU, end to end, each step printing its figure:
#   1. LoRA SFT of a small model (`moot train sft`; SmolLM2-135M, the embedded model's weights,
#      unless --base says otherwise): steps/s and tokens/s of the trainer, then `moot train merge`;
#   2. generation with that model through vLLM (`moot generate --backend vllm`) and
#   3. batched through transformers (`--backend transformers --batch-size N`): wall time and
#      tokens/s, the marginal rate too (a one-topic run in the same way measures the load;
#      a first one-topic run warms the caches);
#   4. DebateQA P.D. scoring on vLLM (`moot eval pd --backend vllm`) and on transformers: answers/s,
#      and how far the two backends' P.D. lie apart.
# Needs a CUDA GPU and vLLM in the venv (`pip install -e '.[vllm]'`); without either it exits 1
# with one line before doing anything. Every output goes to --out, which an earlier check's
# folder may be (it is replaced), no other existing one.
#
#   benchmarks/gpu_check.sh [--out DIR] [--base SPEC] [--steps N] [--requests N]
#                           [--max-tokens N] [--batch-size N]
set -euo pipefail
cd "$(dirname "$0")/.."

out=runs/gpu-check base=local/smollm2 steps=50 requests=512 max_tokens=256 batch_size=32
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out | --base | --steps | --requests | --max-tokens | --batch-size)
      [ $# -ge 2 ] || { echo "gpu_check: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --out) out=$2 ;; --base) base=$2 ;; --steps) steps=$2 ;; --requests) requests=$2 ;;
        --max-tokens) max_tokens=$2 ;; --batch-size) batch_size=$2 ;;
      esac
      shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
  esac
done
for n in "$steps" "$requests" "$max_tokens" "$batch_size"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check: not a positive integer: $n" >&2; exit 2; }
done
if [ -e "$out" ] && [ ! -e "$out/.gpu-check" ]; then
  echo "gpu_check: $out exists and is not an earlier check's folder: choose another --out" >&2
  exit 2
fi

bin="${VENV:-.venv}/bin"
[ -x "$bin/moot" ] || { echo "gpu_check: no moot in $bin (make setup, or VENV=...)" >&2; exit 1; }
"$bin/python" - <<'PY' || exit 1
import importlib.util, sys
import torch
if not torch.cuda.is_available():
    sys.exit(f"gpu_check: no CUDA GPU: torch {torch.__version__} sees none here")
if importlib.util.find_spec("vllm") is None:
    sys.exit("gpu_check: vllm is not installed here: pip install -e '.[vllm]'")
PY

rm -rf "$out" && mkdir -p "$out" && touch "$out/.gpu-check"
now() { date +%s.%N; }
figure() { "$bin/python" -c "import sys; print(eval(sys.argv[1]))" "$1"; }
"$bin/python" -c "import torch, vllm, transformers; print('gpu_check:', torch.cuda.get_device_name(), \
'x', torch.cuda.device_count(), '| torch', torch.__version__, '| vllm', vllm.__version__, \
'| transformers', transformers.__version__)"

# The inputs: topics with two arguments per side (4 instructions each; one topic for the
# load-only run), DebateQA-shaped partial answers and an answer for each.
"$bin/python" - "$out" "$requests" <<'PY'
import json, sys
from pathlib import Path
out, requests = Path(sys.argv[1]), int(sys.argv[2])
topics = max(1, requests // 4)
rows = [{"topic": f"Should city {i} ban cars from its centre?",
         "Affirmative": {"arguments": [f"Cleaner air for district {i}", "Safer streets"]},
         "Negative": {"arguments": [f"Shops in district {i} lose customers", "Longer trips"]}}
        for i in range(topics)]
partials = [{"id": str(i), "question": row["topic"],
             "partial_answers": [{"point_of_view": arg, "explanation": f"{arg}, as residents say."}
                                 for side in ("Affirmative", "Negative")
                                 for arg in row[side]["arguments"]]}
            for i, row in enumerate(rows)]
answers = [{"id": str(i), "answer": f"On {row['topic']} people disagree: " + "; ".join(
            row["Affirmative"]["arguments"] + row["Negative"]["arguments"])}
           for i, row in enumerate(rows)]
files = {"topics": rows, "topics-one": rows[:1], "partials": partials, "answers": answers}
for stem, records in files.items():
    (out / f"{stem}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
PY

# 1. LoRA SFT
cat >"$out/sft.yaml" <<EOF
model: {base: $base, chat_template: chatml, dtype: auto}
data: {train: $PWD/examples/sft-tiny.jsonl, max_length: 512}
lora: {r: 16, alpha: 32, dropout: 0.05, target_modules: all-linear}
training: {output_dir: $out/sft, method: lora, max_steps: $steps, learning_rate: 1.0e-4,
           per_device_train_batch_size: 4, logging_steps: 10, seed: 0}
EOF
start=$(now)
"$bin/moot" train sft --config "$out/sft.yaml" --quiet
wall=$(figure "$(now) - $start")
"$bin/python" - "$out/sft/manifest.json" "$wall" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
runtime = next(e["train_runtime"] for e in m["log_history"] if "train_runtime" in e)
print(f"sft (LoRA, {m['config']['model']['base']}, {m['device']}): {m['steps']} steps in {runtime:.1f} s: "
      f"{m['steps'] / runtime:.2f} steps/s, {m['tokens_seen'] / runtime:.0f} tokens/s "
      f"({float(sys.argv[2]):.1f} s wall with loading)")
PY
"$bin/moot" train merge --adapter "$out/sft/adapter" --out "$out/model" --quiet
model="$out/model"

# Generation: a command's wall time and the tokens it generated (the model's tokenizer), for
# the whole dataset and for one topic; the difference is the rate without the load.
tokens() {
  "$bin/python" -c "import json, sys; from transformers import AutoTokenizer
t = AutoTokenizer.from_pretrained(sys.argv[1])
print(sum(len(t(r['raw_output'], add_special_tokens=False)['input_ids']) for r in json.load(open(sys.argv[2]))))" \
    "$model" "$1"
}
generate() {  # label, flags...
  local label=$1 run stem walls=() counts=()
  shift
  # the first run warms the caches (vLLM's compiled graphs, the page cache); not counted
  for run in warm one all; do
    if [ "$run" = all ]; then stem=topics; else stem=topics-one; fi
    local start
    start=$(now)
    "$bin/moot" generate --dataset "$out/$stem.jsonl" --model "$model" --no-cache --quiet \
      --out "$out/$label-$run.json" --max-tokens "$max_tokens" --concurrency "$batch_size" \
      --batch-size "$batch_size" "$@"
    walls+=("$(figure "$(now) - $start")")
    counts+=("$(tokens "$out/$label-$run.json")")
  done
  "$bin/python" - "$label" "${counts[@]:1}" "${walls[@]:1}" <<'PY'
import sys
label, (one, full), (one_wall, wall) = sys.argv[1], map(int, sys.argv[2:4]), map(float, sys.argv[4:])
rest = f"{(full - one) / (wall - one_wall):.0f} tokens/s" if wall > one_wall else "n/a (a noisy load)"
print(f"generate ({label}): {full} tokens in {wall:.1f} s wall: {full / wall:.0f} tokens/s; "
      f"without the load (one topic: {one_wall:.1f} s): {rest}")
PY
}
# 2., 3.
generate vllm --backend vllm
generate transformers --backend transformers --device cuda --dtype auto

# 4. P.D. on both backends, the same scorer (the merged model) in float32
pd() {  # label, flags...
  local label=$1 start wall count
  shift
  start=$(now)
  "$bin/moot" eval pd --answers "$out/answers.jsonl" --partial-answers "$out/partials.jsonl" \
    --scorer "$model" --batch-size "$batch_size" --out "$out/pd-$label" --quiet "$@"
  wall=$(figure "$(now) - $start")
  count=$(wc -l <"$out/answers.jsonl")
  figure "f'eval pd ($label): $count answers in {$wall:.1f} s wall: {$count / $wall:.1f} answers/s'"
}
pd vllm --backend vllm
pd transformers --backend transformers --device cuda
"$bin/python" - "$out/pd-vllm/scores.jsonl" "$out/pd-transformers/scores.jsonl" <<'PY'
import json, sys
vllm, hf = ({r["id"]: r["pd"] for r in map(json.loads, open(p))} for p in sys.argv[1:])
worst = max(abs(vllm[i] - hf[i]) / hf[i] for i in hf)
print(f"eval pd: vLLM's P.D. within {worst:.2%} of transformers' on {len(hf)} answers")
PY
