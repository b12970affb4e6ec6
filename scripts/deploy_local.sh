#!/usr/bin/env bash
# make deploy-local: the CDK stack, deployed into LocalStack on this machine, without Docker.
#
#   1. the Lambda asset for this machine (build/lambda-local; `make deploy` ships the arm64 one to AWS)
#   2. the deployed-stack LocalStack (scripts/emulators.sh start-deployed; port DUETIME_DEPLOYED_PORT, 4610),
#      which runs every function as a process under AWS's runtime interface client (localstack/lambda_executor)
#   3. the template, synthesized with -c localstack=true (what LocalStack community cannot create is left
#      out; the api function checks tokens itself) into cdk.out-local/
#   4. cdklocal bootstrap + deploy (the CDK's own tooling, offline)
#   5. a team, and one line once a job can be created through the deployed API:
#        duetime deployed on LocalStack: api=<API Gateway URL> token=<team token>
#
# Then it waits; Ctrl-C, TERM or HUP stops the LocalStack it started (and with it every function).
# With --detach it returns after the line and leaves the stack running (stop it: make localstack-deployed-stop).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${DUETIME_DEPLOYED_PORT:-4610}"
ENDPOINT="http://127.0.0.1:$PORT"
OUT="${DUETIME_DEPLOYED_OUT:-$ROOT/cdk.out-local}"  # the template, logs and outputs.json
EMU="$ROOT/scripts/emulators.sh"
DETACH=0
[ "${1:-}" = "--detach" ] && DETACH=1

log() { printf 'deploy-local: %s\n' "$*" >&2; }

STARTED=0
stop_started() {
  if [ "$STARTED" = 1 ]; then
    STARTED=0
    "$EMU" stop-deployed || true
  fi
}
on_signal() {
  trap - INT TERM HUP
  stop_started
  kill -s "$1" "$$"
}
trap stop_started EXIT
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# Only this LocalStack: endpoints that `make test` sets for the other emulators must not leak in.
for variable in $(compgen -e | grep '^AWS_ENDPOINT_URL' || true); do unset "$variable"; done
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=1 JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1

if curl -s -o /dev/null --max-time 2 "$ENDPOINT/_localstack/health"; then
  log "LocalStack (deployed) already answers on $ENDPOINT (reused, left running)"
else
  STARTED=1
  DUETIME_DEPLOYED_PORT="$PORT" "$EMU" start-deployed
fi

log "synthesizing the template for LocalStack into ${OUT#"$ROOT"/}"
rm -rf "$OUT"
(
  cd "$ROOT/infra/cdk"
  mkdir -p "$OUT"
  CDK_OUTDIR="$OUT" CDK_CONTEXT_JSON='{"localstack": true, "lambda_asset": "build/lambda-local",
    "deletion_protection": false, "allow_private_targets": true, "aws_targets_without_role": true}' \
    "$ROOT/.venv/bin/python" app.py \
    >"$OUT/synth.log" 2>&1 || { tail -n 30 "$OUT/synth.log" >&2; exit 1; }
  [ -x node_modules/.bin/cdklocal ] || npm install --no-save --no-audit --no-fund --silent
  export AWS_ENDPOINT_URL="$ENDPOINT" AWS_ENDPOINT_URL_S3="$ENDPOINT"
  # A stack left by an earlier deploy into this LocalStack is replaced whole: what it deploys starts from empty
  # tables. (LocalStack could not update the worker's alias in place, "Alias already exists"; the stack's
  # alias is named after its version there now, so an in-place update works: `duetime drill upgrade`.)
  if "$ROOT/.venv/bin/python" -c 'import boto3; boto3.client("cloudformation").describe_stacks(StackName="Duetime")' \
    2>/dev/null; then
    log "replacing the Duetime stack an earlier deploy left"
    npx cdklocal destroy --app "$OUT" --force >"$OUT/destroy.log" 2>&1 || { tail -n 30 "$OUT/destroy.log" >&2; exit 1; }
  fi
  log "cdklocal bootstrap and deploy"
  npx cdklocal bootstrap --app "$OUT" >"$OUT/bootstrap.log" 2>&1 || { tail -n 30 "$OUT/bootstrap.log" >&2; exit 1; }
  npx cdklocal deploy --app "$OUT" --require-approval never --outputs-file "$OUT/outputs.json" \
    >"$OUT/deploy.log" 2>&1 || { tail -n 30 "$OUT/deploy.log" >&2; exit 1; }
)
"$ROOT/.venv/bin/duetime" deployed-local ready --outputs "$OUT/outputs.json" --endpoint "$ENDPOINT"

if [ "$DETACH" = 1 ]; then
  STARTED=0  # leave it running
  exit 0
fi
while true; do
  sleep 1 &
  wait $! || true
done
