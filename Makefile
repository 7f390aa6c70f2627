# Two commands on a fresh machine: `make book` (build the book) and `make test` (run the tests);
# `make lint` runs ruff and mypy.
# Both create .venv/ once; re-runs reinstall only when pyproject.toml changes. `make book` runs only the
# chapters whose source, parameters, library or package versions changed (`gtbook status` says which),
# and rebuilds the HTML only when a page changed: a second `make book` is a no-op.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= full
# Chapters run at once (each kernel gets cores/JOBS threads): `make book JOBS=4` on 4+ cores.
JOBS ?= 1
# The PyTorch build. CPU by default: PyTorch's CPU index is added when it answers (PyPI's Linux wheel is
# the CUDA build); a local CPU wheel (pip's find-links) works offline. A CUDA user passes e.g.
#   make book TORCH="torch==2.13.0" TORCH_INDEX=https://download.pytorch.org/whl/cu128
TORCH ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: book quick-book test lint venv status clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# PyTorch first, so nothing below pulls another build (see README to choose one).
	if curl -sf -o /dev/null --max-time 5 "$(TORCH_INDEX)/torch/"; then \
	    $(BIN)/python -m pip install -q "$(TORCH)" --extra-index-url "$(TORCH_INDEX)"; \
	else \
	    echo "$(TORCH_INDEX) unreachable: installing $(TORCH) from the configured indexes"; \
	    $(BIN)/python -m pip install -q "$(TORCH)"; \
	fi
	$(BIN)/python -m pip install -q -e ".[book,pretrained,test]"
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/gtbook all --profile $(PROFILE) -j $(JOBS)

quick-book: $(STAMP)
	$(BIN)/gtbook all --profile quick -j $(JOBS)

status: $(STAMP)
	$(BIN)/gtbook status

# The tests build their own quick book in a temporary folder: executed/ and _build/ are never touched.
test: $(STAMP)
	$(BIN)/python -m pytest

# Lint (ruff) and type check (mypy, on gtcore/), both configured in pyproject.toml; CI runs this before the tests.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf executed _build .cache .mypy_cache .ruff_cache
