# Two commands on a fresh machine (Python 3.11+, Node, the package registries):
#   make synth   set up, then synthesize every environment into cdk.out
#   make test    set up, then lint, type-check and run every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# CDK's built-in CloudFormation validation plugin duplicates cfn-lint (which `make test` runs) and costs ~4 s.
export CDK_VALIDATION := false

.PHONY: setup synth test lint bench docs clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.lock
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements.lock
	@touch $@

node_modules/.installed: package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

synth: setup
	rm -rf cdk.out
	npx cdk synth --quiet
	$(BIN)/python -m infra.report cdk.out

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy lambdas

test: lint
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python -m bench

docs: setup
	PYTHONPATH=lambdas $(BIN)/python -m datamodel.docs --write docs/data-model.md
	$(BIN)/python -m infra.diagram --write README.md

clean:
	rm -rf cdk.out $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
