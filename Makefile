# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench clean system-deps browser-deps load-deps

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# Debian packages later problems need (stress-ng for interference profiling); best effort:
# without root or a network the project still runs, and the profiler says what is missing.
system-deps:
	@command -v stress-ng >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq stress-ng >/dev/null \
	    || echo "note: could not install stress-ng"; \
	  else echo "note: stress-ng is not installed (sudo apt-get install stress-ng)"; fi; }

# The dashboard's browser test drives Debian's Chromium through chromium-driver. Without root
# or a network it is skipped with a reason, except in CI (CI=true), where it must run.
browser-deps:
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	    apt-get install -y -qq chromium chromium-driver >/dev/null \
	    || echo "note: could not install chromium and chromium-driver"; \
	  else echo "note: chromium is not installed (sudo apt-get install chromium chromium-driver)"; fi; }

# The manager's load test sends its requests with hey, a compiled load generator (a Python
# client costs more CPU than the manager it measures). Skipped with a reason where it cannot
# be had, except in CI.
load-deps:
	@command -v hey >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq hey >/dev/null \
	    || echo "note: could not install hey"; \
	  else echo "note: hey is not installed (sudo apt-get install hey)"; fi; }

demo: $(STAMP) system-deps
	$(BIN)/edgewise demo

# The testbed's tests in one process, then the rest on two pytest-xdist workers (most tests
# wait on emulated devices, whose compute is stretched by sleeping, so two share a 2-core
# host well), then one closing line for both (edgewise/devtools/suite.py).
# TEST_WORKERS=0 runs the rest in one process too.
TEST_WORKERS ?= 2
test: $(STAMP) browser-deps load-deps system-deps
	$(BIN)/python -m edgewise.devtools.suite --workers $(TEST_WORKERS)

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

bench: $(STAMP)
	$(BIN)/edgewise bench runtime

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
