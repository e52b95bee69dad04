# Every target works on a fresh machine that has only Python >= 3.11 and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
#: More pytest arguments for `make test`/`verify`, e.g. PYTEST_ARGS='-m "not realcli"'.
PYTEST_ARGS ?=

# Tests and benchmarks start real `ai-sdlc` processes; without bytecode caches each one compiles
# every module again (about 0.25 s of CPU). Some machines set this variable globally.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-cpu test-fast agent-clis verify lint format bench fuzz mutants promise-mutants clean config-docs verdict-docs

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "ai-sdlc needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_RUN): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[demo]'
	touch $@

$(STAMP_DEV): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(STAMP_RUN)

## demo: run the main job on the built-in offline `scripted` provider in a temp project
demo: $(STAMP_RUN)
	$(BIN)/python -m ai_sdlc.demo

## test: run every test (in parallel over the machine's cores); first installs the real agent
## CLIs that are not cached yet (agent-clis; a failed install shows in their tests)
test: $(STAMP_DEV)
	-$(BIN)/python -m tests.e2e.realcli.install
	$(BIN)/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

## test-cpu: every test, recording its CPU (its own and its children's); prints the files by
## CPU, costliest first (bench/suite_cpu.py; docs/testing.md "Where the time goes")
test-cpu: $(STAMP_DEV)
	rm -rf .suite-cpu && mkdir .suite-cpu
	SUITE_CPU_FOLDER=$(abspath .suite-cpu) $(BIN)/python -m pytest -n auto --dist loadgroup -p bench.suite_cpu $(PYTEST_ARGS)
	$(BIN)/python bench/suite_cpu.py .suite-cpu 40

## test-fast: the inner loop: units and in-process tests, without the slow tiers (pytest markers
## e2e, slow, realcli, ray, browser; docs/testing.md)
test-fast: $(STAMP_DEV)
	$(BIN)/python -m pytest -n auto --dist loadgroup -m "not e2e and not slow and not realcli and not ray and not browser"

## agent-clis: install the four real agent CLIs the realcli tests drive (about 1.6 GB, once, into
## ~/.cache/ai-sdlc-tests/tools or $$AI_SDLC_TEST_TOOLS), so that `make test` needs no network
agent-clis: $(STAMP_DEV)
	$(BIN)/python -m tests.e2e.realcli.install

## verify: lint, format check, strict typing, import contracts (pyproject.toml), tests (what CI and reviewers trust)
verify: $(STAMP_DEV)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	-$(BIN)/python -m tests.e2e.realcli.install
	$(BIN)/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

format: $(STAMP_DEV)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

## config-docs: regenerate docs/configuration.md from the config models (a test compares them)
config-docs: $(STAMP_DEV)
	$(BIN)/python -m ai_sdlc.config.docs > docs/configuration.md

## verdict-docs: regenerate docs/verification.md's verdict table from tests/support/verdicts.py
verdict-docs: $(STAMP_DEV)
	$(BIN)/python -m tests.support.verdicts

## bench: the benchmarks under bench/ (print figures and ratios; not part of the test suite)
bench: $(STAMP_DEV)
	$(BIN)/python bench/bench_status.py
	$(BIN)/python bench/bench_resilience.py
	$(BIN)/python bench/bench_startup.py
	$(BIN)/python bench/bench_simplify.py
	$(BIN)/python bench/bench_run.py
	$(BIN)/python bench/bench_edit.py
	$(BIN)/python bench/bench_parallel.py
	$(BIN)/python bench/bench_cluster.py
	$(BIN)/python bench/bench_sandbox.py
	$(BIN)/python bench/bench_worktree_env.py

## fuzz: the property tests as a long random search (HYPOTHESIS_PROFILE=fuzz), with what it tried
fuzz: $(STAMP_DEV)
	HYPOTHESIS_PROFILE=fuzz $(BIN)/python -m pytest -n 0 --hypothesis-show-statistics \
		tests/store/test_store_properties.py tests/resilience/test_resilience_backoff.py tests/resilience/test_resilience_breaker.py \
		tests/verify/test_verify_normalise.py

## mutants: mutation testing of the core (mutmut; docs/testing.md), then the score per module and
## every survivor. MUTANTS narrows it (`make mutants MUTANTS='ai_sdlc.resilience.*'`); results
## are kept in mutants/ and a second run only checks what changed.
MUTANTS ?=
# A TMPDIR of its own, removed after: a mutant's test run killed for its time leaves its temp
# folders (nothing can remove them from a killed process).
mutants: $(STAMP_DEV)
	tmp=$$(mktemp -d -t ai-sdlc-mutants-XXXXXX) && trap 'rm -rf "$$tmp"' EXIT && \
	TMPDIR=$$tmp PATH=$(abspath $(BIN)):$$PATH HYPOTHESIS_PROFILE=mutants nice -n 10 $(BIN)/mutmut run --max-children 2 $(MUTANTS)
	$(BIN)/python tests/mutants_report.py

## promise-mutants: the hand-made promise mutants (tests/promise_mutants.py; docs/testing.md): each
## small plausible bug at a promise must be caught by the test that names it
promise-mutants: $(STAMP_DEV)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python tests/promise_mutants.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache mutants
