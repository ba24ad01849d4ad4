# Tandem: `make demo` (the main job on real data, no services needed) and `make test` (the whole suite).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt

test: install
	$(BIN)/python -m pytest

demo: install
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py demo
