#!/usr/bin/env bash
# Fetch, start and stop the emulators duetime's tests and `make run` use:
#   DynamoDB Local (AWS's own emulator, shipped inside the npm package amplify-dynamodb-simulator)
#   LocalStack in host mode (no Docker) for SQS, EventBridge, SNS, CloudWatch.
# Everything is cached under .cache/ (ignored by git) and reused between runs.
#
#   scripts/emulators.sh fetch            download/install what is missing
#   scripts/emulators.sh start            start what is not already answering; record what we started
#   scripts/emulators.sh stop             stop what an earlier `start` started (pid files in .cache/run)
#   scripts/emulators.sh run CMD...       start what is not running, run CMD, then stop only what this
#                                         invocation started (even when CMD fails)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${DUETIME_CACHE:-$ROOT/.cache}"
RUN="$CACHE/run"
DDB_VERSION="2.9.30"                       # carries DynamoDB Local 1.25.1
DDB_DIR="$CACHE/dynamodb-local-$DDB_VERSION"
LS_VERSION="2026.3.0"
LS_VENV="$CACHE/localstack-$LS_VERSION"
DDB_PORT="${DUETIME_DDB_PORT:-8000}"
LS_PORT="${DUETIME_LOCALSTACK_PORT:-4566}"
DDB_URL="http://127.0.0.1:$DDB_PORT"
LS_URL="http://127.0.0.1:$LS_PORT"

STARTED=()  # what this invocation started (and `run` will stop)

log() { printf 'emulators: %s\n' "$*" >&2; }

fetch_dynamodb() {
  [ -f "$DDB_DIR/DynamoDBLocal.jar" ] && return 0
  log "fetching DynamoDB Local (npm amplify-dynamodb-simulator@$DDB_VERSION)"
  local tmp; tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "amplify-dynamodb-simulator@$DDB_VERSION" >/dev/null && tar xzf ./*.tgz)
  rm -rf "$DDB_DIR"; mkdir -p "$CACHE"
  mv "$tmp/package/emulator" "$DDB_DIR"
  rm -rf "$tmp"
}

fetch_localstack() {
  [ -x "$LS_VENV/bin/python" ] && "$LS_VENV/bin/python" -c 'import localstack.runtime.main' 2>/dev/null && return 0
  log "installing localstack-core $LS_VERSION into $LS_VENV (Python 3.13)"
  rm -rf "$LS_VENV"
  local py
  py="$(PYENV_VERSION=3.13.0 pyenv which python3.13 2>/dev/null || command -v python3.13 || true)"
  [ -n "$py" ] || { log "Python 3.13 is needed for LocalStack and was not found"; exit 1; }
  "$py" -m venv "$LS_VENV"
  "$LS_VENV/bin/pip" install --quiet --disable-pip-version-check \
    "localstack-core[runtime]==$LS_VERSION" 'cbor2<5.8' 'cryptography<44' 'pyopenssl<24.3' \
    'service_identity<25' 'joserfc<1.1'
}

answers() { curl -s -o /dev/null --max-time 2 "$1"; }

wait_for() {  # name url seconds
  local i
  for ((i = 0; i < $3 * 5; i++)); do
    answers "$2" && return 0
    sleep 0.2
  done
  log "$1 did not answer on $2 within $3 s (log: $RUN/$1.log)"; tail -n 20 "$RUN/$1.log" >&2 || true
  return 1
}

start_dynamodb() {
  if answers "$DDB_URL"; then log "DynamoDB Local already answers on $DDB_URL (reused)"; return 0; fi
  fetch_dynamodb
  mkdir -p "$RUN"
  (cd "$DDB_DIR" && exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      -inMemory -port "$DDB_PORT" >"$RUN/dynamodb.log" 2>&1) &
  echo $! >"$RUN/dynamodb.pid"
  STARTED+=(dynamodb)
  wait_for dynamodb "$DDB_URL" 60
  log "DynamoDB Local started on $DDB_URL"
}

start_localstack() {
  if answers "$LS_URL/_localstack/health"; then log "LocalStack already answers on $LS_URL (reused)"; return 0; fi
  fetch_localstack
  mkdir -p "$RUN" "$CACHE/localstack-volume"
  GATEWAY_LISTEN="127.0.0.1:$LS_PORT" LOCALSTACK_VOLUME_DIR="$CACHE/localstack-volume" \
    SERVICES=sqs,events,scheduler,sns,cloudwatch,logs,sts,iam SKIP_INFRA_DOWNLOADS=1 \
    DISABLE_EVENTS=1 setsid "$LS_VENV/bin/python" -m localstack.runtime.main >"$RUN/localstack.log" 2>&1 &
  echo $! >"$RUN/localstack.pid"
  STARTED+=(localstack)
  wait_for localstack "$LS_URL/_localstack/health" 120
  log "LocalStack started on $LS_URL"
}

stop_one() {
  local pidfile="$RUN/$1.pid"
  [ -f "$pidfile" ] || return 0
  local pid; pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    log "stopped $1"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  fetch) fetch_dynamodb; fetch_localstack ;;
  start) start_dynamodb; start_localstack ;;
  stop) stop_one localstack; stop_one dynamodb ;;
  run)
    shift
    # Stop only what this invocation started: emulators that were already running are left running.
    trap 'for name in "${STARTED[@]}"; do stop_one "$name"; done' EXIT
    start_dynamodb
    start_localstack
    export AWS_ENDPOINT_URL_DYNAMODB="$DDB_URL" AWS_ENDPOINT_URL_SQS="$LS_URL" \
      AWS_ENDPOINT_URL_SNS="$LS_URL" AWS_ENDPOINT_URL_EVENTS="$LS_URL" \
      AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
      AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
    "$@"
    ;;
  *) echo "usage: $0 fetch|start|stop|run CMD..." >&2; exit 2 ;;
esac
