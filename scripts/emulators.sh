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
#   scripts/emulators.sh start-deployed   a second LocalStack, to deploy the stack into (port 4610): it runs
#                                         Lambda functions as local processes (localstack/lambda_executor),
#                                         DynamoDB offline, CloudFormation, API Gateway... (localstack/README.md)
#   scripts/emulators.sh stop-deployed    stop what start-deployed started
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
# Where DynamoDB Local keeps its tables: in memory (the tests: each run starts empty), or on disk when
# DUETIME_DDB_DATA names a folder, `auto` being $CACHE/local-data/<its name> (`make run` and `duetime local`:
# jobs and runs survive a restart).
DDB_DATA="${DUETIME_DDB_DATA:-}"
[ "$DDB_DATA" = auto ] && DDB_DATA="$CACHE/local-data/$DDB_NAME"

# The deployed-stack LocalStack: its own port, pid/log names and filesystem root (state, unzipped code, the
# DynamoDB Local LocalStack runs), so it never shares anything with the one the tests use.
DEP_PORT="${DUETIME_DEPLOYED_PORT:-4610}"
DEP_URL="http://127.0.0.1:$DEP_PORT"
DEP_NAME="localstack-deployed"; [ "$DEP_PORT" = 4610 ] || DEP_NAME="localstack-deployed-$DEP_PORT"
DEP_ROOT="$CACHE/$DEP_NAME"
DEP_SERVICES="lambda,cloudformation,apigateway,s3,dynamodb,sqs,sns,events,logs,iam,sts,ssm,cloudwatch"
AWSLAMBDARIC_VERSION="4.2.2"               # AWS's Lambda runtime interface client, run by the executor
EXECUTOR_SRC="$ROOT/localstack/lambda_executor"
DDB_AGENT_DIR="$CACHE/ddb-local-loader"

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

ls_pip() {  # pip in LocalStack's venv, without this machine's warnings about its missing local indexes
  local out status=0
  out="$("$LS_VENV/bin/pip" --quiet --disable-pip-version-check "$@" 2>&1)" || status=$?
  printf '%s\n' "$out" | grep -v -e '^WARNING: Location' -e '^$' >&2 || true
  return "$status"
}

# The Lambda executor (localstack/lambda_executor) and awslambdaric, in LocalStack's venv. Reinstalled when
# the executor's sources change (a hash of them is kept in the venv).
fetch_lambda_executor() {
  local stamp="$LS_VENV/.duetime-lambda-executor" want
  want="$(cd "$EXECUTOR_SRC" && { echo "awslambdaric==$AWSLAMBDARIC_VERSION"
    find . -name '*.py' -o -name '*.toml' | grep -v -e '/build/' -e '\.egg-info/' | LC_ALL=C sort | xargs cat
  } | sha256sum | cut -d' ' -f1)"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  log "installing awslambdaric $AWSLAMBDARIC_VERSION and the duetime-process Lambda executor into $LS_VENV"
  local tmp; tmp="$(mktemp -d)"
  # Built from a copy, so the build leaves nothing in the working tree.
  cp -r "$EXECUTOR_SRC" "$tmp/src"
  ls_pip install --force-reinstall --no-deps "$tmp/src"
  ls_pip install "awslambdaric==$AWSLAMBDARIC_VERSION"
  rm -rf "$tmp"
  echo "$want" >"$stamp"
}

# LocalStack's DynamoDB runs DynamoDB Local from <FILESYSTEM_ROOT>/var/lib/localstack/lib/dynamodb-local/2/
# (localstack/services/dynamodb/packages.py) and would download it, Java 21 and a java agent at first use.
# It finds DynamoDBLocal.jar there and skips the download: the jar and its native libraries are linked from
# the DynamoDB Local the tests use, and the agent it passes as -javaagent (ddb-local-loader-0.1.jar) is a
# do-nothing one built here. LocalStack's real agent only lifts CreateTable's limit of 20 global secondary
# indexes to 100; AWS's default quota is 20, so doing nothing is closer to AWS. Java 17 from PATH runs it.
fetch_dynamodb_for_localstack() {
  local lib="$DEP_ROOT/var/lib/localstack/lib/dynamodb-local/2" agent="$DDB_AGENT_DIR/ddb-local-loader-0.1.jar"
  if [ ! -f "$agent" ]; then
    log "building a do-nothing $agent (javac + jar)"
    local tmp; tmp="$(mktemp -d)"
    mkdir -p "$tmp/src/duetime" "$tmp/classes" "$DDB_AGENT_DIR"
    cat >"$tmp/src/duetime/NoopAgent.java" <<'JAVA'
package duetime;

/** Stands in for LocalStack's ddb-local-loader agent, which DynamoDB Local is started with. */
public final class NoopAgent {
    private NoopAgent() {}

    public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
JAVA
    printf 'Premain-Class: duetime.NoopAgent\n' >"$tmp/manifest.txt"
    javac --release 11 -d "$tmp/classes" "$tmp/src/duetime/NoopAgent.java"
    jar --create --file "$agent.tmp" --manifest "$tmp/manifest.txt" -C "$tmp/classes" .
    mv "$agent.tmp" "$agent"
    rm -rf "$tmp"
  fi
  mkdir -p "$lib"
  ln -sfn "$DDB_DIR/DynamoDBLocal.jar" "$lib/DynamoDBLocal.jar"
  ln -sfn "$DDB_DIR/DynamoDBLocal_lib" "$lib/DynamoDBLocal_lib"
  ln -sfn "$agent" "$lib/ddb-local-loader-0.1.jar"
}

fetch_deployed() { fetch_dynamodb; fetch_localstack; fetch_lambda_executor; fetch_dynamodb_for_localstack; }

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

locked_start() {  # name function: one start of an emulator at a time, across invocations of this script
  # Two runs started at once (two `make test`s, a test's `make run` beside the suite) both saw nothing
  # answering and both started an emulator on one port: both said "started", the pid file kept the one
  # that failed to bind (a JVM that lives on without its port), and a `stop` left the serving one running.
  # The lock is let go once the function returns, so the second finds the first's emulator answering and
  # reuses it (and leaves its stopping to whoever started it).
  mkdir -p "$RUN"
  local fd status=0
  exec {fd}>"$RUN/$1.lock"
  flock "$fd"
  "$2" || status=$?
  flock -u "$fd"
  exec {fd}>&-
  return "$status"
}

start_dynamodb() {
  if answers "$DDB_URL"; then log "DynamoDB Local already answers on $DDB_URL (reused)"; return 0; fi
  fetch_dynamodb
  mkdir -p "$RUN"
  # In a session of its own, like LocalStack: a Ctrl-C or hang-up meant for the command in the terminal's
  # process group does not stop it under the command's feet; `run` stops it after the command.
  local storage=(-inMemory)
  if [ -n "$DDB_DATA" ]; then mkdir -p "$DDB_DATA"; storage=(-dbPath "$DDB_DATA" -sharedDb); fi
  (cd "$DDB_DIR" && exec setsid java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
      "${storage[@]}" -port "$DDB_PORT" >"$RUN/$DDB_NAME.log" 2>&1) &
  echo $! >"$RUN/$DDB_NAME.pid"
  STARTED+=("$DDB_NAME")
  wait_for "$DDB_NAME" "$DDB_URL" 60
  log "DynamoDB Local started on $DDB_URL${DDB_DATA:+ (its tables kept in $DDB_DATA)}"
}

start_localstack() {
  if answers "$LS_URL/_localstack/health"; then log "LocalStack already answers on $LS_URL (reused)"; return 0; fi
  fetch_localstack
  # A volume and a temporary folder per LocalStack: run on the host, it keeps its services' state under the
  # temporary folder (CloudWatch's metrics in <tmp>/localstack/state/cloudwatch/metrics.db, localstack/config.py
  # `dirs.data`), and one started on another port (a test's, another checkout's) must not pull that from
  # under the one on 4566 ("unable to open database file").
  mkdir -p "$RUN" "$CACHE/$LS_NAME-volume" "$CACHE/$LS_NAME-tmp"
  TMPDIR="$CACHE/$LS_NAME-tmp" GATEWAY_LISTEN="127.0.0.1:$LS_PORT" LOCALSTACK_VOLUME_DIR="$CACHE/$LS_NAME-volume" \
    SERVICES=sqs,events,scheduler,sns,cloudwatch,logs,sts,iam,stepfunctions SKIP_INFRA_DOWNLOADS=1 \
    SQS_DISABLE_CLOUDWATCH_METRICS="${SQS_DISABLE_CLOUDWATCH_METRICS:-1}" DISABLE_EVENTS=1 \
    setsid "$LS_VENV/bin/python" -m localstack.runtime.main >"$RUN/$LS_NAME.log" 2>&1 &
  echo $! >"$RUN/$LS_NAME.pid"
  STARTED+=("$LS_NAME")
  wait_for "$LS_NAME" "$LS_URL/_localstack/health" 120
  log "LocalStack started on $LS_URL"
}

start_deployed() {
  if answers "$DEP_URL/_localstack/health"; then
    log "LocalStack (deployed) already answers on $DEP_URL (reused; restart it to pick up executor changes)"
    return 0
  fi
  fetch_deployed
  rm -rf "$DEP_ROOT/tmp"  # unzipped code and runtime temp dirs of an earlier run
  mkdir -p "$RUN" "$DEP_ROOT/tmp"
  # Endpoints set for clients (`run` sets some) stay out of LocalStack's environment.
  local unset=() v
  for v in $(compgen -e | grep '^AWS_ENDPOINT_URL' || true); do unset+=(-u "$v"); done
  # OVERRIDE_IN_DOCKER=0: these machines have /.dockerenv, and LocalStack would ignore FILESYSTEM_ROOT.
  # TMPDIR: LocalStack unzips function code under it. DNS_ADDRESS=0: no DNS server (none is needed).
  # DISABLE_BOTO_RETRIES=1: LocalStack's internal client waits 60 s for an async invocation and retries it
  # (same request id) while the first still runs: a 135 s poller invocation ran up to nine times at once.
  # DUETIME_SQS_LONG_POLLING=1 and a 0 s poll interval: the SQS event source mapping long-polls with five
  # concurrent batches, as AWS's does, instead of LocalStack's short polls with backoff, one batch at a time
  # (localstack/lambda_executor/duetime_lambda_executor/sqs_event_source.py).
  env ${unset[@]+"${unset[@]}"} OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT="$DEP_ROOT" TMPDIR="$DEP_ROOT/tmp" \
    GATEWAY_LISTEN="127.0.0.1:$DEP_PORT" SERVICES="$DEP_SERVICES" LAMBDA_RUNTIME_EXECUTOR=duetime-process \
    SKIP_SSL_CERT_DOWNLOAD=1 DISABLE_EVENTS=1 DNS_ADDRESS=0 DISABLE_BOTO_RETRIES=1 \
    SQS_DISABLE_CLOUDWATCH_METRICS="${SQS_DISABLE_CLOUDWATCH_METRICS:-1}" \
    DUETIME_SQS_LONG_POLLING=1 LAMBDA_EVENT_SOURCE_MAPPING_POLL_INTERVAL_SEC=0 \
    setsid "$LS_VENV/bin/python" -m localstack.runtime.main \
    >"$RUN/$DEP_NAME.log" 2>&1 &
  echo $! >"$RUN/$DEP_NAME.pid"
  STARTED+=("$DEP_NAME")
  wait_for "$DEP_NAME" "$DEP_URL/_localstack/health" 120
  log "LocalStack (deployed) started on $DEP_URL"
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
  fetch) fetch_deployed ;;  # all: DynamoDB Local, LocalStack, and what start-deployed adds to them
  start) locked_start "$DDB_NAME" start_dynamodb; locked_start "$LS_NAME" start_localstack ;;
  stop) stop_one "$LS_NAME"; stop_one "$DDB_NAME" ;;
  start-deployed) locked_start "$DEP_NAME" start_deployed ;;
  stop-deployed) stop_one "$DEP_NAME" ;;
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
    locked_start "$DDB_NAME" start_dynamodb
    locked_start "$LS_NAME" start_localstack
    export AWS_ENDPOINT_URL_DYNAMODB="$DDB_URL" AWS_ENDPOINT_URL_SQS="$LS_URL" \
      AWS_ENDPOINT_URL_SNS="$LS_URL" AWS_ENDPOINT_URL_EVENTBRIDGE="$LS_URL" AWS_ENDPOINT_URL_SFN="$LS_URL" \
      AWS_ENDPOINT_URL_STS="$LS_URL" \
      AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
      AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
    # The emulators accept requests AWS refuses (DynamoDB Local counts a transaction's 4 MB from the
    # request, not the items): duetime's clients refuse them here as AWS would (adapters/aws/aws_limits.py).
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
  *) echo "usage: $0 fetch|start|stop|run CMD...|start-deployed|stop-deployed" >&2; exit 2 ;;
esac
