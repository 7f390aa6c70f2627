# Two commands on a fresh machine: `make book` (build the book) and `make test` (run the tests);
# `make lint` runs ruff and mypy.
# Both create .venv/ once, from the lock file requirements.lock (the exact versions the tests pass with);
# re-runs reinstall only when pyproject.toml or the lock changes. `make book` runs only the chapters
# whose source, parameters, library, package versions or thread count changed (`gtbook status` says
# which), and rebuilds the HTML only when a page changed: a second `make book` is a no-op.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
PROFILE ?= full
# Chapters run at once (each kernel gets cores/JOBS threads): `make book JOBS=4` on 4+ cores.
JOBS ?= 1
# The PyTorch build: the version the lock pins, CPU by default, installed before anything else so that
# nothing pulls another build. It comes from local wheels (pip's find-links) or from TORCH_INDEX only,
# never from PyPI, whose Linux wheel is the multi-GB CUDA build. A CUDA user passes e.g.
#   make book TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH ?= $(shell sed -n 's/^\(torch==[^ ;]*\).*/\1/p' $(LOCK))
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
CPU_INDEX := https://download.pytorch.org/whl/cpu
LOWEST := .venv-lowest

# Chapters at once in the mutation check (`make mutations`, by hand: it runs the quick book once per mutation).
MUTATION_JOBS ?= 2

.PHONY: book quick-book pdf test test-lowest lint venv status lock clean mutations

venv: $(STAMP)

$(STAMP): pyproject.toml gtcore/pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip || echo "pip not upgraded (offline?); continuing"
	@$(MAKE) --no-print-directory gpu-note
	$(MAKE) --no-print-directory TORCH_PIP="$(BIN)/python -m pip" install-torch
	$(BIN)/python -m pip install -q -r $(LOCK) \
	    || { echo "the lock file does not install here (another Python than 3.11?): installing the declared ranges instead"; \
	         $(BIN)/python -m pip install -q -e ./gtcore -e ".[book,pretrained,test]"; }
	$(BIN)/python -m pip install -q --no-deps -e ./gtcore -e .
	touch $(STAMP)

# Say so when the machine has an NVIDIA GPU and the CPU build is chosen (the default).
.PHONY: gpu-note
gpu-note:
	@if [ "$(TORCH_INDEX)" = "$(CPU_INDEX)" ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	    echo "note: this machine has an NVIDIA GPU, and the CPU build of PyTorch is being installed (the default)."; \
	    echo "      For the CUDA build: rm -rf $(VENV) && make book TORCH_INDEX=https://download.pytorch.org/whl/cu128"; \
	fi

# PyTorch alone: the wheel from local wheels (offline) or TORCH_INDEX, never PyPI; then its dependencies
# (from any index). Then check the build: a CUDA wheel where the CPU build was asked for stops here.
.PHONY: install-torch
install-torch:
	$(TORCH_PIP) install -q --no-deps --no-index "$(TORCH)" 2>/dev/null \
	    || $(TORCH_PIP) install -q --no-deps "$(TORCH)" --index-url "$(TORCH_INDEX)" \
	    || { echo "cannot install $(TORCH) from local wheels or $(TORCH_INDEX); see README (PyTorch)"; exit 1; }
	$(TORCH_PIP) install -q "$(TORCH)"  # its dependencies (torch itself is installed: it stays that build)
	@$(subst -m pip,,$(TORCH_PIP)) -c "import sys, torch; cuda = torch.version.cuda; \
	    sys.exit('torch ' + torch.__version__ + ' is a CUDA build but the CPU build was asked for (TORCH_INDEX=$(TORCH_INDEX))') \
	    if cuda and '$(TORCH_INDEX)' == '$(CPU_INDEX)' else print('torch', torch.__version__, 'CUDA ' + cuda if cuda else 'CPU build')"

book: $(STAMP)
	$(BIN)/gtbook all --profile $(PROFILE) -j $(JOBS)

quick-book: $(STAMP)
	$(BIN)/gtbook all --profile quick -j $(JOBS)

# The whole book as one PDF (_build/pdf/gtbook.pdf), printed by headless Chromium after MathJax: needs
# `make book` first and Chromium (`apt-get install chromium`).
pdf: $(STAMP)
	$(BIN)/gtbook pdf

status: $(STAMP)
	$(BIN)/gtbook status -j $(JOBS)

# What the claims can catch: every registered mutation of gtcore against the quick book and its unit
# tests; rewrites book/mutations.json (the page "What the claims can catch" and the report's headline).
mutations: $(STAMP)
	$(BIN)/gtbook mutations -j $(MUTATION_JOBS)

# The tests build their own quick book in a temporary folder: executed/ and _build/ are never touched.
test: $(STAMP)
	$(BIN)/python -m pytest

# The lowest versions pyproject.toml declares, in a fresh .venv-lowest/, and the unit tests (not the
# book builds) against them: every lower bound is one a run has tested. torch is the locked CPU build.
test-lowest:
	rm -rf $(LOWEST)
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install -q --upgrade pip || echo "pip not upgraded (offline?); continuing"
	$(MAKE) --no-print-directory TORCH_PIP="$(LOWEST)/bin/python -m pip" install-torch
	$(LOWEST)/bin/python .ci/lowest_requirements.py > $(LOWEST)/lowest.txt
	$(LOWEST)/bin/python -m pip install -q -r $(LOWEST)/lowest.txt
	$(LOWEST)/bin/python -m pip install -q --no-deps -e ./gtcore -e .
	$(LOWEST)/bin/python -m pip list --format=freeze > $(LOWEST)/installed.txt
	$(LOWEST)/bin/python -m pytest -m "not slow" -p no:cacheprovider -q

# Refresh the lock from pyproject.toml with uv (`pip install uv`), keeping the versions of this machine's
# .venv where they satisfy the ranges; torch resolves against the CPU build (local wheels or the CPU
# index), so the lock names no CUDA package.
LOCK_FIND_LINKS ?= $(shell $(BIN)/python -m pip config get global.find-links 2>/dev/null)
lock:
	$(BIN)/python -m pip freeze --exclude-editable > $(VENV)/freeze.txt
	uv pip compile gtcore/pyproject.toml pyproject.toml --all-extras --no-emit-package gaussian-transformer-core --python-version 3.11.7 -c $(VENV)/freeze.txt \
	    --extra-index-url $(CPU_INDEX) --index-strategy unsafe-best-match \
	    $(if $(LOCK_FIND_LINKS),--find-links $(LOCK_FIND_LINKS)) --no-header --no-annotate -o $(LOCK).tmp
	{ echo "# The exact versions the tests pass with (Python 3.11): make and CI install these. Regenerate with"; \
	  echo "# \`make lock\` after changing pyproject.toml. torch is the CPU build (installed first by make)."; \
	  sed -e 's/^\(torch==[^+ ;]*\)+[a-z0-9]*/\1/' $(LOCK).tmp; } > $(LOCK)
	rm $(LOCK).tmp

# Lint (ruff) and type check (mypy, on gtcore/ and gtbook/), both configured in pyproject.toml; CI runs this before the tests.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf executed _build .cache .mypy_cache .ruff_cache
