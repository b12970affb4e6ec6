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
# Pid and log files in $RUN are named per port (the default ports keep the plain names), so emulators
# started on other ports (a test's own `make run`) never overwrite the files of the ones on the defaults.
DDB_NAME="dynamodb"; [ "$DDB_PORT" = 8000 ] || DDB_NAME="dynamodb-$DDB_PORT"
LS_NAME="localstack"; [ "$LS_PORT" = 4566 ] || LS_NAME="localstack-$LS_PORT"

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
  # In a session of its own, like LocalStack: a Ctrl-C or hang-up meant for the command in the terminal's
  # process group does not stop it under the command's feet; `run` stops it after the command.
  (cd "$DDB_DIR" && exec setsid java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      -inMemory -port "$DDB_PORT" >"$RUN/$DDB_NAME.log" 2>&1) &
  echo $! >"$RUN/$DDB_NAME.pid"
  STARTED+=("$DDB_NAME")
  wait_for "$DDB_NAME" "$DDB_URL" 60
  log "DynamoDB Local started on $DDB_URL"
}

start_localstack() {
  if answers "$LS_URL/_localstack/health"; then log "LocalStack already answers on $LS_URL (reused)"; return 0; fi
  fetch_localstack
  mkdir -p "$RUN" "$CACHE/localstack-volume"
  GATEWAY_LISTEN="127.0.0.1:$LS_PORT" LOCALSTACK_VOLUME_DIR="$CACHE/localstack-volume" \
    SERVICES=sqs,events,scheduler,sns,cloudwatch,logs,sts,iam SKIP_INFRA_DOWNLOADS=1 \
    DISABLE_EVENTS=1 setsid "$LS_VENV/bin/python" -m localstack.runtime.main >"$RUN/$LS_NAME.log" 2>&1 &
  echo $! >"$RUN/$LS_NAME.pid"
  STARTED+=("$LS_NAME")
  wait_for "$LS_NAME" "$LS_URL/_localstack/health" 120
  log "LocalStack started on $LS_URL"
}

stop_one() {
  local pidfile="$RUN/$1.pid"
  [ -f "$pidfile" ] || return 0
  local pid; pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    # Each emulator leads a session (and process group) of its own: the whole group is signalled, so
    # nothing it started outlives it (the plain kill is for one started by an older version of this script).
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
    log "stopped $1"
  fi
  rm -f "$pidfile"
}

stop_started() {  # what this invocation started, newest first
  local i
  for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop_one "${STARTED[i]}"; done
  STARTED=()
}

CHILD=""  # the pid of run's command while it runs

stop_child() {  # grace-seconds: let run's command stop by itself, then TERM it, then KILL it
  [ -n "$CHILD" ] || return 0
  local i
  for ((i = 0; i < $1 * 5; i++)); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.2; done
  kill -TERM "$CHILD" 2>/dev/null || true
  for ((i = 0; i < 30 * 5; i++)); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$CHILD" 2>/dev/null; then log "the command ignored TERM for 30 s: killed"; kill -KILL "$CHILD"; fi
  wait "$CHILD" 2>/dev/null || true
  CHILD=""
}

on_signal() {  # name number grace: stop run's command, then the emulators; then die of the signal
  trap '' INT TERM HUP  # one clean-up, however many signals follow
  log "SIG$1: stopping the command, then the emulators this run started"
  stop_child "$3"
  stop_started
  trap - "$1" EXIT
  kill -s "$1" "$$"  # the caller sees death by the signal: status 128+number
  exit $((128 + $2))
}

case "${1:-}" in
  fetch) fetch_dynamodb; fetch_localstack ;;
  start) start_dynamodb; start_localstack ;;
  stop) stop_one "$LS_NAME"; stop_one "$DDB_NAME" ;;
  run)
    shift
    # Stop only what this invocation started: emulators that were already running are left running.
    # That happens on exit and on INT, TERM and HUP, the command first: without these traps bash runs
    # the EXIT trap on TERM and leaves the command running (`kill <make's pid>` left `duetime local`
    # serving). GNU make passes TERM to this script alone, so TERM is forwarded at once; INT (Ctrl-C) and
    # HUP (a closed terminal) reach the whole process group, so the command has them already and gets
    # TERM only if it is still running 5 s later.
    trap stop_started EXIT
    trap 'on_signal INT 2 5' INT
    trap 'on_signal TERM 15 0' TERM
    trap 'on_signal HUP 1 5' HUP
    start_dynamodb
    start_localstack
    export AWS_ENDPOINT_URL_DYNAMODB="$DDB_URL" AWS_ENDPOINT_URL_SQS="$LS_URL" \
      AWS_ENDPOINT_URL_SNS="$LS_URL" AWS_ENDPOINT_URL_EVENTS="$LS_URL" \
      AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
      AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
    # The emulators accept requests AWS refuses (DynamoDB Local counts a transaction's 4 MB from the
    # request, not the items): duetime's clients refuse them here as AWS would (adapters/aws_limits.py).
    export DUETIME_STRICT_AWS_LIMITS="${DUETIME_STRICT_AWS_LIMITS:-1}"
    # In the background and waited for, because bash runs a trap only once a foreground command has
    # finished, while a signal interrupts `wait` at once. A background command would ignore SIGINT;
    # `trap - INT QUIT` gives it the defaults back, so Ctrl-C reaches it as if it ran in the foreground.
    (trap - INT QUIT; exec "$@") &
    CHILD=$!
    status=0
    wait "$CHILD" || status=$?
    CHILD=""
    exit "$status"
    ;;
  *) echo "usage: $0 fetch|start|stop|run CMD..." >&2; exit 2 ;;
esac
