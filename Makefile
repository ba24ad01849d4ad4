# Tandem: `make demo` (the main job on real data, no services needed) and `make test` (the whole suite).
# Both create .venv/ with python3 and install requirements-dev.txt (again whenever a requirements file changes).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo serve test install

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

# The whole suite. Integration and browser tests need PostgreSQL, Redis and Debian chromium
# (.ci/run starts/installs them); DATABASE_URL and CELERY_BROKER_URL default to the local servers
# (webapp/settings/test.py). The run fails with a clear message if one is missing.
test: $(STAMP)
	$(BIN)/python -m pytest

# Migrate, create the demo operator (its password is printed), import a real cluster from data/,
# run every engine's demo step, then serve http://127.0.0.1:8000 and the workers (queues cpu,gpu and control) until Ctrl-C.
# Embedded defaults: SQLite and the filesystem broker under var/, no services needed.
demo: $(STAMP)
	$(BIN)/python manage.py demo $(DEMO_ARGS)

# Start the dashboard's web server and workers again (after `make demo DEMO_ARGS=--no-serve`,
# or after stopping the demo) without redoing the demo or changing the password.
serve: $(STAMP)
	$(BIN)/python manage.py serve $(SERVE_ARGS)
