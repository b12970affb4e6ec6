# duetime: two commands do all the set-up on a fresh machine.
#   make run    start DynamoDB Local + LocalStack and run duetime locally (Ctrl-C stops everything)
#   make test   lint, type-check and run every test against the emulators (started and stopped here)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EMU    := ./scripts/emulators.sh

.PHONY: run test check lint typecheck unit venv emulators-fetch emulators-start emulators-stop clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

run: venv
	$(EMU) run $(BIN)/duetime local

test: venv
	$(EMU) run $(MAKE) --no-print-directory check

# What `make test` runs once the emulators answer (useful with `make emulators-start`).
check: lint typecheck
	$(BIN)/pytest

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests/unit

emulators-fetch:
	$(EMU) fetch

emulators-start:
	$(EMU) start

emulators-stop:
	$(EMU) stop

clean:
	$(EMU) stop
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache
