# Two commands on a fresh machine (Python 3.11+, Node 22 or 24 (20 still works), the package registries):
#   make synth   set up, then synthesize every environment into cdk.out; fails on any finding or missing context
#   make test    set up, then lint, type-check and run every test (needs a JDK 21+: $JAVA_HOME, else the newest under
#                /usr/lib/jvm; the test engine's jars come from Maven Central through `mvn`, pinned by engine.lock)
# `make help` lists the rest.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# jsii prints a large end-of-life banner on Node 20; the project supports 22 and 24 and still runs on 20.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# CDK's built-in CloudFormation validation plugin duplicates cfn-lint (which `make test` runs) and costs ~4 s.
export CDK_VALIDATION := false
step = @printf '\033[1m==> %s\033[0m\n' "$(1)"

.DEFAULT_GOAL := help
.PHONY: help setup engine engine-lock synth test ruff lint fmt recipes soak bench docs guard baseline cost client client-release pins clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: $(VENV)/.installed node_modules/.installed ## create .venv (uv, hash-checked) and node_modules if missing or stale
	@# The project's own modules too (cheap when up to date): every synth, xdist worker and subprocess starts warm.
	@$(BIN)/python -m compileall -q -j0 app.py infra lambdas ops tests bench >/dev/null

$(VENV)/.installed: requirements.lock requirements-uv.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	$(call step,Python environment $(VENV) from requirements.lock)
	@test -x $(BIN)/python || $(PYTHON) -m venv --without-pip $(VENV)
	@# uv itself comes from PyPI through pip, hash-checked; a machine's pip configuration files (extra indexes,
	@# find-links, constraints) do not apply, its environment (certificates, a mirror's PIP_INDEX_URL) does.
	@test -x $(BIN)/uv || { if $(PYTHON) -m pip --version >/dev/null 2>&1; then pip="$(PYTHON) -m pip --python $(BIN)/python"; \
		else $(BIN)/python -m ensurepip --default-pip >/dev/null && pip="$(BIN)/python -m pip"; fi; \
		PIP_CONFIG_FILE=/dev/null $$pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
		-r requirements-uv.txt; }
	@# Byte-compiled at install (uv does not compile unless asked): PYTHONDONTWRITEBYTECODE, set in many CI runners
	@# and images, would otherwise make every process compile aws-cdk-lib's ~2,900 modules from source (~8 s each).
	@$(BIN)/uv pip sync --quiet --compile-bytecode --python $(BIN)/python --require-hashes requirements.lock requirements-uv.txt
	@touch $@

# checkov in its own environment: it pins a boto3 that the project's boto3 and moto cannot share
# (requirements-checkov.txt). uv from the project's environment installs it, hash-checked.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.lock $(VENV)/.installed
	$(call step,checkov environment $(CHECKOV_VENV) from requirements-checkov.lock)
	@test -x $(CHECKOV_VENV)/bin/python || $(BIN)/uv venv --quiet --python $(BIN)/python $(CHECKOV_VENV)
	@$(BIN)/uv pip sync --quiet --compile-bytecode --python $(CHECKOV_VENV)/bin/python --require-hashes requirements-checkov.lock
	@touch $@

node_modules/.installed: package-lock.json
	@node -e 'const m = +process.versions.node.split(".")[0]; if (m < 20) { console.error(`Node ${process.versions.node}: Node 22 or 24 is required (20 still works)`); process.exit(1) }'
	$(call step,CDK CLI and the tests' IAM oracle from package-lock.json)
	@npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The search engine the tests run against (tests/support/engine_setup.py): the jars engine.lock pins, fetched by Maven
# and checked against their SHA-256, and our launcher compiled with a JDK 21+. `make test` needs it; `make synth` not.
# (Each node kind's JVM class archive is recorded by the first test session's node as it stops, not here: recording it
# costs more CPU than it saves that first session.)
ENGINE := .cache/engine/.installed
SECURED_INPUTS := tests/support/secured/secured.lock tests/support/secured/pom.xml
# The set-up's own modules too: a change to how it installs (the launcher as a jar) reruns it.
SETUP_INPUTS := tests/support/engine_setup.py tests/support/secured_setup.py
$(ENGINE): tests/support/engine/engine.lock tests/support/engine/pom.xml tests/support/engine/NodeLauncher.java $(SECURED_INPUTS) $(SETUP_INPUTS) $(VENV)/.installed
	$(call step,test engine (OpenSearch) from tests/support/engine/engine.lock)
	@$(BIN)/python -m tests.support.engine_setup install
	$(call step,secured test node (OpenSearch + security plugin) from tests/support/secured/secured.lock)
	@$(BIN)/python -m tests.support.secured_setup install
	@touch $@

engine: setup $(ENGINE) ## install the test engine's and the secured node's pinned jars, compile their launcher (JDK 21+)

engine-lock: setup ## after a version change in tests/support/engine/pom.xml or secured/pom.xml: rewrite both locks
	@$(BIN)/python -m tests.support.engine_setup lock
	@$(BIN)/python -m tests.support.secured_setup lock

synth: setup ## synthesize every environment into cdk.out; fails on any cdk-nag finding, error annotation or missing context
	$(call step,cdk synth of every environment (cdk-nag: 5 rule packs))
	@rm -rf cdk.out && mkdir -p .cache
	@# '**' selects every stack (a bare `cdk synth` selects none when stacks sit in stages, and validates nothing);
	@# --no-lookups: synth never calls AWS, missing context fails it. The check then names each problem once with
	@# its fix, and passes on what else the CLI said, less its own report of the same problems and its "Supply a
	@# stack id" line (no CLI flag silences that one).
	@npx cdk synth --quiet --no-lookups '**' > .cache/synth.log 2>&1; status=$$?; \
		$(BIN)/python -m infra.report --check cdk.out --cli-output .cache/synth.log --cli-status $$status

MYPY := $(BIN)/mypy lambdas infra app.py

ruff: setup
	$(call step,ruff)
ifeq ($(CI),true)
	@$(BIN)/ruff format --check . || { echo "formatting differs: run \`make fmt\` and commit the result"; exit 1; }
	@$(BIN)/ruff check .
else
	@$(BIN)/ruff format --quiet .
	@$(BIN)/ruff check --fix --quiet .
endif

lint: ruff
	$(call step,mypy)
	@$(MYPY)

fmt: setup ## format and fix lint in place (`make test` does this too, except in CI, which only checks)
	@$(BIN)/ruff format .
	@$(BIN)/ruff check --fix .

# One pytest worker per core. `--dist loadgroup` runs the tests of each search node kind in one worker
# (tests/support/node_groups.py), so two workers start two JVMs instead of one of each kind each (make test's time:
# docs/benchmarks.md). A run PYTEST_ARGS narrows (to a folder, say) may be mostly one kind's tests, which that would
# put in one worker: it spreads every test (worksteal), each worker starting the nodes it needs.
WORKERS ?= $(shell nproc)
DIST := $(if $(PYTEST_ARGS),worksteal,loadgroup)

# mypy runs beside pytest: a fresh clone's first type check reads the aws-cdk-lib modules the code imports (about 7 s
# of one core: pyproject skips the rest), a warm one takes a second. PYTEST_ARGS narrows the run; `make test` runs
# every test.
test: ruff $(CHECKOV_VENV)/.installed $(ENGINE) ## lint, type-check and run every test (its time: docs/benchmarks.md)
	$(call step,mypy and pytest on every core ($(WORKERS) workers))
	@mkdir -p .cache && { $(MYPY) > .cache/mypy.log 2>&1; echo $$? > .cache/mypy.rc; } & \
		$(BIN)/python -m pytest -n $(WORKERS) --dist $(DIST) $(PYTEST_ARGS); tests=$$?; wait; \
		printf '\033[1m==> mypy\033[0m\n'; cat .cache/mypy.log; \
		test $$tests -eq 0 && test "$$(cat .cache/mypy.rc)" -eq 0

# Applies each README recipe (add an environment, a schema, a table, a read role, ...) to a scratch copy, then all of
# them to one copy, where it runs the whole suite, and plants a finding, an error annotation and a missing context
# value under `make synth`.
recipes: setup $(CHECKOV_VENV)/.installed $(ENGINE) ## prove the README's routine-change recipes and the synth gate on scratch copies (slow)
	$(call step,README recipes and the synth gate on scratch copies)
	@# One recipe at a time: each synthesizes on every core, and the whole suite's run uses every core.
	@$(BIN)/python -m pytest -m recipe -p no:cacheprovider -v -rP tests/recipes

# Flakes show under load: N whole-suite runs, two at once, and every test that failed in any of them.
N ?= 6
soak: lint $(CHECKOV_VENV)/.installed $(ENGINE) ## run the whole suite N times (default 6), two runs at once; list every failure
	$(call step,soak: $(N) whole-suite runs two at a time)
	@$(BIN)/python -m tests.soak $(N)

# Fails on a change that would replace or delete a stateful resource, against the last release's templates
# (release/baseline; BASELINE_REF=<rev> reads them as committed at a revision, e.g. a pull request's base).
guard: synth ## fail on a change that would replace or delete a stateful resource
	$(call step,destructive-change guard against release/baseline)
	@$(BIN)/python -m infra.guard cdk.out $(if $(BASELINE_REF),--baseline-ref $(BASELINE_REF)) \
		$(if $(GITHUB_STEP_SUMMARY),--summary $(GITHUB_STEP_SUMMARY))

# After a release: its templates become the baseline, and the guard's overrides (which applied to it) are emptied.
baseline: synth ## after a release: its templates become the guard's baseline
	@$(BIN)/python -m infra.guard cdk.out --write-baseline

# A registry change is a refdata-client release: bump __version__ in lambdas/refdata/__init__.py as
# `python -m infra.client_version --check` says, then this records it (release/client/registry.json and a generated
# CHANGELOG.md entry; DATE=YYYY-MM-DD puts a date beside its heading).
client-release: setup ## record a refdata-client release of __version__ (release/client: record and changelog)
	@$(BIN)/python -m infra.client_version --release $(if $(DATE),--date $(DATE))

# Monthly cost per environment (docs/cost.md and the README table) from the templates, infra/prices.toml and the
# assumed workload; `.venv/bin/python -m infra.cost --help` lists the what-if flags.
cost: synth ## write the monthly cost estimate (docs/cost.md, README table)
	@$(BIN)/python -m infra.cost cdk.out --write docs/cost.md --readme README.md

# A new source table's logical ids (its table, and the vault its backups create) into the pins of
# tests/infra/test_shipped_config.py, from an in-process build of every stateful stack (README, "Add a source table").
# It adds pins only: a pinned id that changed is refused, named, and left to the pin test.
pins: setup ## after review: pin a new source table's logical ids (never changes a pin)
	@$(BIN)/python -m infra.pins

bench: setup ## run the benchmarks into docs/benchmarks.md (slow)
	@$(BIN)/python -m bench

# The one regeneration command of every routine change (README, "Routine changes").
docs: setup ## regenerate all that config and the registry define: docs/ pages and tables, the diagram, deliver.yml
	$(call step,files generated from config and the schema registry)
	@PYTHONPATH=lambdas $(BIN)/python -m refdata.docs --write docs/data-model.md
	@$(BIN)/python -m infra.generated --write
	@$(MAKE) --no-print-directory synth
	@$(BIN)/python -m infra.diagram --write docs/architecture.md --assembly cdk.out
	@$(BIN)/python -m infra.cost cdk.out --write docs/cost.md --readme README.md

# The package application teams install (README, "For application teams"): lambdas/pyproject.toml, built by its
# backend alone (flit-core, hash-pinned in requirements-client.txt) in its own small environment, without the
# platform's toolchain (no `make setup`: no aws-cdk-lib, no Node); the version check reads config through the few
# distributions its validation needs (requirements-client.txt says which).
# File dates from the last commit, so a build of one commit is byte-identical.
CLIENT_VENV := .venv-client
CLIENT_DIST ?= dist
$(CLIENT_VENV)/.installed: requirements-client.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	$(call step,refdata-client build environment $(CLIENT_VENV) from requirements-client.txt)
	@test -x $(CLIENT_VENV)/bin/python || $(PYTHON) -m venv $(CLIENT_VENV)
	@PIP_CONFIG_FILE=/dev/null $(CLIENT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		--no-compile --require-hashes --no-deps --only-binary=:all: -r requirements-client.txt
	@touch $@

client: $(CLIENT_VENV)/.installed ## check refdata-client's version against the registry's change, build its wheel and sdist into dist/
	$(call step,refdata-client wheel and sdist into $(CLIENT_DIST)/)
	@PYTHONPATH=lambdas:. $(CLIENT_VENV)/bin/python -m infra.client_version --check
	@rm -rf $(CLIENT_DIST) && mkdir -p $(CLIENT_DIST)
	@cd lambdas && SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 315532800) \
		../$(CLIENT_VENV)/bin/python -c 'import sys, flit_core.buildapi as api; \
		[print(f"wrote {sys.argv[2]}/{build(sys.argv[1])}") for build in (api.build_wheel, api.build_sdist)]' \
		$(abspath $(CLIENT_DIST)) $(CLIENT_DIST)

clean: ## remove cdk.out, the environments, node_modules and caches
	rm -rf cdk.out dist $(VENV) $(CHECKOV_VENV) $(CLIENT_VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .cache
