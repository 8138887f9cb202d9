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

.PHONY: setup synth test lint bench docs guard baseline cost clean

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

# Fails on a change that would replace or delete a stateful resource, against the last release's templates
# (release/baseline; BASELINE_REF=<rev> reads them as committed at a revision, e.g. a pull request's base).
guard: synth
	$(BIN)/python -m infra.guard cdk.out $(if $(BASELINE_REF),--baseline-ref $(BASELINE_REF)) \
		$(if $(GITHUB_STEP_SUMMARY),--summary $(GITHUB_STEP_SUMMARY))

# After a release: its templates become the baseline, and the guard's overrides (which applied to it) are emptied.
baseline: synth
	$(BIN)/python -m infra.guard cdk.out --write-baseline

# Monthly cost per environment (docs/cost.md and the README table) from the templates, infra/prices.toml and the
# assumed workload; `.venv/bin/python -m infra.cost --help` lists the what-if flags.
cost: synth
	$(BIN)/python -m infra.cost cdk.out --write docs/cost.md --readme README.md

bench: setup
	$(BIN)/python -m bench

docs: setup
	PYTHONPATH=lambdas $(BIN)/python -m datamodel.docs --write docs/data-model.md
	$(BIN)/python -m infra.diagram --write README.md

clean:
	rm -rf cdk.out $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
