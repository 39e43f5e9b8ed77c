# The two set-up commands of the README. Both create .venv on first use and install requirements.txt.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: book test install bench

book: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash tools/build_book.sh

test: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash tools/test.sh

bench: install
	$(BIN)/python benchmarks/run.py

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
