# Two commands for a reader: `make reproduce` and `make test`. Both bootstrap .venv themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= paper
export PATH := $(CURDIR)/$(BIN):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: reproduce test lint unit nbval lab notebooks status lock clean install

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	@$(PYTHON) -c 'import sys; v=sys.version_info[:2]; sys.exit(0 if (3,11)<=v<(3,13) else "Python 3.11 or 3.12 is required (verl 0.9.1), found %d.%d" % v)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==26.3"
	# CPU torch first, so nothing that depends on torch pulls a CUDA build
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

## Every notebook with the paper profile; artifacts into figures/ (skips unchanged notebooks).
reproduce: $(STAMP)
	$(BIN)/python -m brorl_lib reproduce --profile $(PROFILE)

## Lint, unit tests, then the committed notebooks re-executed and checked by nbval.
test: lint unit nbval

## ruff: lint rules and formatting (configured in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: $(STAMP) sandbox-deps
	$(BIN)/python -m pytest -q tests

## bubblewrap, the code sandbox's isolation: found, else installed (apt-get as root or via sudo), else named.
.PHONY: sandbox-deps
sandbox-deps:
	@command -v bwrap >/dev/null || { \
	  if command -v apt-get >/dev/null && { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then \
	    sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap \
	      || { $$sudo apt-get update -q && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap; }; \
	  else \
	    echo "The code sandbox needs bubblewrap (bwrap): install the package 'bubblewrap'," \
	         "e.g. sudo apt-get install bubblewrap (Debian/Ubuntu) or sudo dnf install bubblewrap (Fedora)" >&2; \
	    exit 1; \
	  fi; }
	@bwrap --version

nbval: $(STAMP)
	$(BIN)/python -m pytest -q --nbval-lax --nbval-current-env notebooks

## Re-execute notebooks/ in place with their defaults (the outputs nbval compares against).
notebooks: $(STAMP)
	$(BIN)/python -m brorl_lib refresh

status: $(STAMP)
	$(BIN)/python -m brorl_lib status

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks

## Rewrite requirements.lock from the current environment.
lock: $(STAMP)
	{ sed -n '1,3p' requirements.lock; $(BIN)/pip freeze --exclude-editable | grep -viE '^(torch|brorl)'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean:
	rm -rf build
