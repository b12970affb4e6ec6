# duetime: two commands do all the set-up on a fresh machine.
#   make run    start DynamoDB Local + LocalStack and run duetime locally (Ctrl-C stops everything)
#   make test   lint, type-check and run every test against the emulators (started and stopped here)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
EMU    := ./scripts/emulators.sh

ASSET  := build/lambda
JSII   := JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1

.PHONY: chaos run test check lint typecheck unit venv lambda-assets synth diff deploy emulators-fetch \
	emulators-start emulators-stop clean lambda-assets-local localstack-deployed-start localstack-deployed-stop \
	deploy-local

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

# Extra arguments for duetime local, e.g. make run RUN_ARGS='--port 8081'.
RUN_ARGS ?=
# duetime local's tables are kept on disk (DynamoDB Local's -dbPath; auto: .cache/local-data/dynamodb): jobs
# survive a restart. Deleting the folder (or `make clean`) starts empty.
LOCAL_DATA ?= auto
# Exported for this target, not written before the command: a command that is one plain program is run by
# make itself (no shell between), so the TERM make forwards reaches the emulators script, which stops all.
run: export DUETIME_DDB_DATA = $(LOCAL_DATA)
run: venv
	$(EMU) run $(BIN)/duetime local $(RUN_ARGS)

test: venv
	$(EMU) run $(MAKE) --no-print-directory check

# Fault injection on the local stack (RELIABILITY.md): SEED and MINUTES may be set, e.g. make chaos MINUTES=10.
SEED    ?= 1
MINUTES ?= 5
chaos: venv
	$(EMU) run $(BIN)/duetime chaos --seed $(SEED) --minutes $(MINUTES)

# The upgrade drill on the stack deployed in LocalStack (RELIABILITY.md): FROM (a git ref) deployed, then this
# checkout in place, back, forward, finalize, while jobs are due. About 12 minutes, e.g. make drill-upgrade
# FROM=main~3.
FROM ?= v0.1.0
.PHONY: drill-upgrade
drill-upgrade: venv
	$(JSII) $(BIN)/duetime drill upgrade --from $(FROM)

# What `make test` runs once the emulators answer (useful with `make emulators-start`): the lint, the type
# check and the tier that needs no emulator side by side (each output kept together; they fail fast), then the
# integration tier on INTEGRATION_WORKERS xdist workers, naming its slowest tests. Tests that share a module or
# session fixture, a fixed port or DynamoDB Local's cores run on one worker in turn (their xdist_group); xdist
# hands out the groups first, largest first. Four workers on two cores: most of the tier waits on clocks,
# queues and emulators (BENCHMARKS.md: four against three).
INTEGRATION_WORKERS ?= 4
check: lambda-assets lambda-assets-local browser-deps
	$(MAKE) --no-print-directory -j2 --output-sync=target lint typecheck unit
	$(JSII) $(BIN)/pytest -m integration -n $(INTEGRATION_WORKERS) --dist loadgroup --durations=25

# Debian's Chromium for the console's browser tests (tests/browser), installed with apt when it is missing.
.PHONY: browser-deps screenshots
browser-deps:
	scripts/browser_deps.sh

# The console's screenshots in docs/ (console-*.png), taken in Chromium against a fresh duetime local.
screenshots: venv browser-deps
	$(EMU) run $(BIN)/python scripts/console_screenshots.py

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: venv
	$(BIN)/mypy

# Every test that needs no emulator (unit, infra, the contract suites' twin halves), on every core: the loop
# to run while changing code. `make test` runs these and the integration tier.
unit: venv
	$(JSII) $(BIN)/pytest -m "not integration" -n auto

# The Lambda code asset, built without Docker (manylinux wheels for python3.13 on arm64).
$(ASSET)/.built: pyproject.toml scripts/build_lambda.sh scripts/lambda_modules.py $(shell find shared/duetime functions -name '*.py' -o -path '*/console/*' -type f) | venv
	scripts/build_lambda.sh $(ASSET)

# After a commit that changed no source, the built asset is only restamped with the commit (stamp_commit.sh).
lambda-assets: $(ASSET)/.built
	@scripts/stamp_commit.sh $(ASSET)

# The same asset with wheels for this machine (build/lambda-local), for LocalStack's duetime-process executor,
# which runs the functions as local processes on LocalStack's Python 3.13 (localstack/README.md).
LOCAL_ASSET := build/lambda-local
$(LOCAL_ASSET)/.built: pyproject.toml scripts/build_lambda.sh scripts/lambda_modules.py $(shell find shared/duetime functions -name '*.py' -o -path '*/console/*' -type f) | venv
	LAMBDA_ARCH=local scripts/build_lambda.sh $(LOCAL_ASSET)

lambda-assets-local: $(LOCAL_ASSET)/.built
	@scripts/stamp_commit.sh $(LOCAL_ASSET)

# A second LocalStack to deploy the stack into (port DUETIME_DEPLOYED_PORT, default 4610): Lambda runs real
# handlers without Docker, DynamoDB runs offline; see localstack/README.md.
localstack-deployed-start:
	$(EMU) start-deployed

localstack-deployed-stop:
	$(EMU) stop-deployed

# The CDK stack deployed into that LocalStack (cdklocal, no Docker), a team, and one line:
# "duetime deployed on LocalStack: api=... token=..."; Ctrl-C/TERM stops what it started.
deploy-local: lambda-assets-local
	scripts/deploy_local.sh

# The stack's settings (infra/cdk/README.md) as -c key=value pairs; they reach the synthesis, e.g.
# make deploy CDK_ARGS="-c alert_email=oncall@example.com". diff and deploy take exactly the assembly synth
# wrote: flags of their own go in DIFF_ARGS and DEPLOY_ARGS, where -c is refused (it would change nothing).
CDK_ARGS    ?=
DIFF_ARGS   ?=
DEPLOY_ARGS ?=
CDK_OUT     ?= cdk.out
CDK         := $(JSII) infra/cdk/cdk.sh

# The cloud assembly in $(CDK_OUT)/ (template, staged asset, cdk-nag's report), synthesized by the CDK CLI with
# cdk.json's context, CDK_ARGS and the account and region of the current credentials (if any); cfn-lint.
synth: lambda-assets
	$(CDK) synth $(CDK_OUT) $(CDK_ARGS)
	$(BIN)/cfn-lint --config-file infra/cdk/.cfnlintrc.yaml $(CDK_OUT)/*.template.json

# What deploying would change in the account of the current credentials (cdk diff against the deployed stack).
diff: synth
	$(CDK) diff $(CDK_OUT) $(DIFF_ARGS)

# Deploy to the account of the current credentials (infra/cdk/README.md), once the installation's record says
# this release may replace the one it runs (docs/guide/upgrading.md: no skipped finalize, no rollback past one).
deploy: synth
	$(BIN)/duetime system deploy-check --assembly $(CDK_OUT)
	$(CDK) deploy $(CDK_OUT) $(DEPLOY_ARGS)

emulators-fetch:
	$(EMU) fetch

emulators-start:
	$(EMU) start

emulators-stop:
	$(EMU) stop

clean:
	$(EMU) stop
	$(EMU) stop-deployed
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache build cdk.out cdk.out-local infra/cdk/node_modules
