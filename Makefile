# AgentSys: `make run` to use it, `make test` to check it. Both set everything up first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock | cksum | cut -d' ' -f1)
# OpenCode (the agents' LLM gateway) comes pinned from npm, like the venv from the lock.
NODE_STAMP := node_modules/.installed-$(shell cat package-lock.json | cksum | cut -d' ' -f1)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Bytecode is written, whatever the machine says: pytest rewrites the asserts of the tests
# and of every plugin's whole package (hypothesis, schemathesis) in each of its processes,
# and keeps the result only where it may write bytecode (collecting the suite: 14 -> 8
# CPU-s a process, and a run starts ten). The repository ignores __pycache__.
unexport PYTHONDONTWRITEBYTECODE

# check --deploy runs with the settings a production deployment uses.
DEPLOY_ENV := DEBUG=false AGENTSYS_HTTPS=true ALLOWED_HOSTS=agentsys.example.org \
	SECRET_KEY=deploy-check-$(shell printf '%064d' 0 | tr 0 x) \
	DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres

.PHONY: setup bytecode run demo chat test slurm-up lint check-deploy bench lock clean

# The venv and OpenCode's npm install side by side: neither waits on the other.
setup:
	@$(MAKE) --no-print-directory -j2 --output-sync=target $(STAMP) $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "AgentSys needs Node.js and npm (for OpenCode): install them, e.g. apt install nodejs npm"; exit 1; }
	@# `npm install` (not ci): the registry mirror serves only this platform's binary, which
	@# npm ci refuses as a lock out of sync; the lock still pins every version and hash.
	npm install --no-audit --no-fund --loglevel=error
	@test -x node_modules/opencode-linux-x64/bin/opencode -o -x node_modules/opencode-linux-arm64/bin/opencode || { echo "npm did not install the OpenCode binary"; exit 1; }
	@rm -f node_modules/.installed-*
	@touch $@

$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "AgentSys needs Python 3.11 or newer")'
	@# A venv whose making was cut off (no pip in it) is made again, not left to fail forever.
	@$(PY) -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv --clear $(VENV)
	@# uv (pinned in the lock) installs the lock's exact set with pip's result (the same
	@# `pip freeze`) in 4 s instead of pip's 54, unpacking in parallel; pip remains where no
	@# uv wheel exists for the platform. Compiled once, on every core: where
	@# PYTHONDONTWRITEBYTECODE is set, nothing would.
	if $(PY) -m pip install --quiet $$(grep -m1 '^uv==' requirements.lock); \
	then $(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements.lock; \
	else $(PY) -m pip install --quiet --no-compile -r requirements.lock; fi
	$(PY) -m compileall -q -j 0 $$($(PY) -c 'import sysconfig as s; print(*{s.get_path("purelib"), s.get_path("platlib")})') > /dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@

# The project's own modules compiled once. Where PYTHONDONTWRITEBYTECODE is set (as on this
# project's CI machines) every Python process would compile them again: ~0.5 s of CPU for each
# runagentd, forkserver, web process and command, hundreds of them in `make test`.
# Named folders, not `.`: compileall would walk the venv's and node_modules' ~50,000 files only
# to exclude them (8 s -> 1.6 s).
bytecode: setup
	$(PY) -m compileall -q -j 0 -x '/(demo_workspace|fixtures)/' *.py \
		$(filter-out node_modules/ __pycache__/,$(wildcard */)) > /dev/null

run: setup bytecode
	$(PY) manage.py serve

# With `make run` going (in another terminal): a whole research loop on the demo workspace.
# `make demo DEMO_ARGS="--llm-usd 0.05"`: with a budget (--llm-tokens, --gpu-hours, --wall-hours too).
demo: setup
	$(PY) manage.py research start --follow $(DEMO_ARGS)

# With `make run` going: chat with the session agent, which starts the demo loop and reports it.
chat: setup
	$(PY) manage.py chat "Which learning rate suits train.py?" --mode wild --wait-reports

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

check-deploy: setup
	env $(DEPLOY_ENV) $(PY) manage.py check --deploy --fail-level WARNING

# The browser tests drive Debian's Chromium through Playwright (no browser download).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "The browser tests need Chromium at $(CHROMIUM)"; exit 1; }
	$(SUDO) apt-get install -y chromium || { $(SUDO) apt-get update && $(SUDO) apt-get install -y chromium; }

# tests/unit first: plain agentsys code, no Django settings, no database (seconds); then
# tests/integration, tests/browser and tests/e2e under pytest-django on TEST_WORKERS workers
# (pytest-xdist, each with its own test database; a module's tests stay on one worker, and the
# modules on the one SLURM cluster, and those on the system PostgreSQL, run one after another
# on one worker each: tests/conftest.py).
# No test restarts the PostgreSQL server the workers share: tests/e2e/test_postgres_restart.py
# restarts one of its own. The static files the browser tests' daphnes serve are collected
# once, before any of them runs: collectstatic rewrites the manifest a running daphne may read.
# Four workers on two cores: the suite mostly waits on the processes it starts (~12.5 min
# instead of ~18 on two). More do not help: with six, the two cores are busy throughout
# (vmstat: 0 % idle) and the suite took as long (835 s against 830 s). The units go out
# longest first (tests/longest_first.py), so the workers end within seconds of each other. `make run`'s stop now writes the embedded PostgreSQL's checkpoint
# while runagentd and the web stop, which kept it within its 5 s under that load (issue 36 §4).
TEST_WORKERS ?= 4
test: lint check-deploy bytecode $(CHROMIUM) slurm-up
	$(PY) manage.py makemigrations --check --dry-run
	$(MAKE) --no-print-directory test-unit
	$(PY) manage.py collectstatic --noinput --verbosity 0
	AGENTSYS_TEST_STATIC_COLLECTED=1 $(PY) -m pytest --ignore=tests/unit -n $(TEST_WORKERS) --dist loadgroup

# A real single-node SLURM (2 fake GPUs) for tests/integration/test_slurm_cluster.py; it needs
# root and apt-get, and without them those tests skip.
slurm-up:
	@if [ "$$(id -u)" != 0 ]; then echo "SLURM tests will skip: scripts/slurm_up.sh needs root"; \
	elif ! command -v apt-get >/dev/null; then echo "SLURM tests will skip: no apt-get"; \
	else scripts/slurm_up.sh; fi

test-unit: setup
	@# Four workers: a third of the units' time waits on the subprocesses they start (61 s -> 52 s).
	$(PY) -m pytest tests/unit -p no:django -W ignore::pytest.PytestConfigWarning -n 4

bench: setup
	@# Only the scripts (a __main__ block): the rest are modules they import.
	@for script in $$(grep -l '__main__' bench/*.py); do $(PY) $$script || exit 1; done

# Re-resolve the pinned set after editing pyproject.toml (needs the package index).
lock:
	rm -rf /tmp/agentsys-lock && $(PYTHON) -m venv /tmp/agentsys-lock
	/tmp/agentsys-lock/bin/pip install --quiet $$($(PYTHON) scripts/pyproject_deps.py)
	/tmp/agentsys-lock/bin/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) staticfiles node_modules
