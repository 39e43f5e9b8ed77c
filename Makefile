# The two set-up commands of the README. Both create .venv on first use and install requirements.txt;
# `make test` also installs requirements-lab.txt (PyTorch, for the labs).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: book test install install-lab bench

book: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash tools/build_book.sh

test: install-lab
	PATH="$(CURDIR)/$(BIN):$$PATH" bash tools/test.sh

bench: install
	$(BIN)/python benchmarks/run.py

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt

# the labs' optional PyTorch extra (the tests run the torch labs; the book does not need it)
install-lab: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-lab.txt

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
