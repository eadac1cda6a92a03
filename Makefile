# pi-hindsight — one entry point for everything.
#   make demo   install what is needed, start a local Hindsight, show memory carrying across Pi sessions
#   make test   install what is needed and run every test (Python, and the TypeScript shim's beside it)
#   make test-fast  the units, engine and stand-in tests only (under two minutes; tests/README.md)
#   make check  format check, lint, strict types, then the tests (what CI runs)

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
NODE_STAMP := node_modules/.installed-stamp
CLAUDE_STAMP := claude/node_modules/.installed-stamp
CLAUDE_EXE := claude/node_modules/@anthropic-ai/claude-code/bin/claude.exe
# Pi 1.x and the Node 22 it needs (npm's `node` package), in a folder of their own so the root
# node_modules (Pi 0.73.1, TypeScript, tsx) never puts a `node` shim first on PATH.
PI1_STAMP  := pi1/node_modules/.installed-stamp
# torch first and pinned: on these machines 2.13.0 is a CPU wheel on local disk; an unpinned torch
# would pull a multi-GB CUDA build.
TORCH  := torch==2.13.0
UV_PIN := 'uv>=0.9,<1'
UV     := $(VENV)/bin/uv

# Two pytest-xdist workers share one Hindsight (tests/plugins/shared_run.py); WORKERS=0 runs serially.
WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(WORKERS) --dist loadgroup

.PHONY: install demo test test-fast check lint format types test-python test-shim bench clean

# The four installs are independent (one virtualenv, three npm folders): they run side by side,
# each one's output kept together (-O); any failure fails the install. (-q: is any out of date?)
INSTALLS := $(STAMP) $(NODE_STAMP) $(PI1_STAMP) $(CLAUDE_STAMP)
install:
	@$(MAKE) --no-print-directory -q $(INSTALLS) || $(MAKE) --no-print-directory -j4 -O $(INSTALLS)

# The LLM stand-in is a distribution of its own (standin/, not in pi-hindsight's wheel); the demo,
# `server start --llm offline` and the tests need it. pip installs torch (it honours the machine's
# pip configuration, where the CPU wheel is found) and uv; uv installs the other ~220 packages,
# downloading in parallel (pip took most of a fresh install's time), and keeps that torch.
# --compile-bytecode: uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set no
# process writes one either: every sidecar, CLI and Hindsight start then compiled its imports
# anew (~0.6 CPU-s a sidecar, ~4 a Hindsight start; the suite starts well over a thousand).
$(STAMP): pyproject.toml standin/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check $(TORCH) $(UV_PIN)
	$(UV) pip install --quiet --compile-bytecode --python $(PY) -e '.[server,dev]' -e ./standin
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Claude Code for the end-to-end tests (its own folder; tests find it there or at $$CLAUDE_BIN).
# The package's postinstall links the native binary over a placeholder, without network; when
# install scripts are skipped (--ignore-scripts) the placeholder stays, so run it by hand.
$(CLAUDE_STAMP): claude/package.json claude/package-lock.json
	npm ci --prefix claude --no-audit --no-fund --loglevel=error
	test "$$(wc -c < $(CLAUDE_EXE))" -gt 1048576 || (cd claude && node node_modules/@anthropic-ai/claude-code/install.cjs)
	touch $@

$(PI1_STAMP): pi1/package.json pi1/package-lock.json
	npm ci --prefix pi1 --no-audit --no-fund --loglevel=error
	touch $@

demo: install
	$(PY) scripts/demo.py

# The shim's `npm test` (its own temporary dirs, ephemeral ports, no server) runs beside pytest:
# its output is held and shown after pytest's, which stays live; either one failing fails the target.
test: install
	@shim_log=$$(mktemp); npm test --silent > "$$shim_log" 2>&1 & shim=$$!; \
	$(PYTEST); python=$$?; wait $$shim; shim_status=$$?; \
	echo "== npm test (the shim; ran beside pytest) =="; cat "$$shim_log"; rm -f "$$shim_log"; \
	test $$python -eq 0 && test $$shim_status -eq 0

test-python: install
	$(PYTEST)

test-fast: install
	$(PYTEST) -m "not e2e and not slow"

test-shim: install
	npm test --silent

lint: install
	$(PY) -m ruff format --check src standin tests bench scripts conftest.py
	$(PY) -m ruff check src standin tests bench scripts conftest.py

types: install
	$(PY) -m mypy
	npm run --silent typecheck

format: install
	$(PY) -m ruff format src standin tests bench scripts conftest.py
	$(PY) -m ruff check --fix src standin tests bench scripts conftest.py

check: lint types test

# Each prints medians and side-by-side ratios; retain_bench takes ~15 minutes (a 2,000-item drain).
bench: install
	$(PY) bench/sidecar_latency.py
	$(PY) bench/evidence_bench.py
	$(PY) bench/safe_files_bench.py
	$(PY) bench/redaction_bench.py
	$(PY) bench/outbox_durability.py
	$(PY) bench/claude_code_hooks.py
	$(PY) bench/retain_bench.py
	$(PY) bench/team_load.py

clean:
	rm -rf $(VENV) node_modules pi1/node_modules claude/node_modules .mypy_cache .ruff_cache .pytest_cache
