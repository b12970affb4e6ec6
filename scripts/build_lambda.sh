#!/usr/bin/env bash
# Build the Lambda code asset without Docker: duetime's dependencies as manylinux wheels for the Lambda
# runtime (python3.13, arm64), the part of the duetime package the handlers import (scripts/lambda_modules.py:
# not the CLI, the in-memory twin, the capacity model or duetime local), and the handlers, into one directory
# (default build/lambda).
#
# The asset carries no AWS SDK of its own. Lambda's Python runtimes ship the SDK for Python and its
# dependencies, and the function's directory comes first on sys.path: a botocore in the asset (aws-xray-sdk
# pulls one in) would shadow the runtime's and pair the runtime's boto3 with another botocore. So whatever
# pulls them in, the packages in LEFT_TO_RUNTIME are removed after the install, and the functions' imports
# of them (duetime's boto3, X-Ray's botocore patching, croniter's dateutil) get the runtime's consistent set.
# urllib3, which the runtime ships too, stays: duetime calls untrusted HTTP targets with it, so the asset
# carries one with the decompression-bomb fixes (pyproject.toml's floor, the one floor of the repository),
# while the python3.13 runtime has shipped 1.26 (github.com/aws/aws-lambda-base-images/issues/359); botocore
# takes any urllib3 2.x but 2.2.0.
#
# LAMBDA_ARCH=x86_64 (or =local, this machine's architecture) builds the wheels for another architecture,
# by default into build/lambda-local: the asset for LocalStack's duetime-process executor, which runs the
# functions on this machine's Python 3.13 whatever architecture they declare (localstack/README.md).
# arm64 stays the default: it is what the stack deploys to AWS.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCH="${LAMBDA_ARCH:-arm64}"
if [ "$ARCH" = local ]; then
  case "$(uname -m)" in aarch64 | arm64) ARCH=arm64 ;; *) ARCH="$(uname -m)" ;; esac
fi
case "$ARCH" in
  arm64) DEFAULT_PLATFORM=manylinux2014_aarch64 DEFAULT_OUT="$ROOT/build/lambda" ;;
  x86_64) DEFAULT_PLATFORM=manylinux2014_x86_64 DEFAULT_OUT="$ROOT/build/lambda-local" ;;
  *) echo "build_lambda: LAMBDA_ARCH must be arm64, x86_64 or local (got $ARCH)" >&2; exit 2 ;;
esac
OUT="${1:-$DEFAULT_OUT}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
PY_VERSION="${LAMBDA_PYTHON_VERSION:-3.13}"
PLATFORM="${LAMBDA_PLATFORM:-$DEFAULT_PLATFORM}"

# What the python3.13 runtime ships (distribution names), the SDK and its dependencies, urllib3 excepted.
LEFT_TO_RUNTIME="boto3 botocore s3transfer jmespath python-dateutil six"

deps="$("$PY" - "$ROOT/pyproject.toml" <<'PYEOF'
import sys, tomllib
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))
PYEOF
)"

# Removes the named distributions from an install target: the files their RECORD lists, then the directories
# that leaves empty. (Their scripts, listed as ../../bin/..., go with the whole bin/ directory.)
remove_distributions() {
  "$PY" - "$@" <<'PYEOF'
import re, sys
from importlib.metadata import distributions
from pathlib import Path

target, names = Path(sys.argv[1]), set(sys.argv[2:])
for dist in distributions(path=[str(target)]):
    if re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower() not in names:
        continue
    files = [target / f for f in dist.files or () if not str(f).startswith("..")]
    for path in files:
        path.unlink(missing_ok=True)
    directories = {parent for path in files for parent in path.parents if target in parent.parents}
    for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
PYEOF
}
tmp="$OUT.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
# shellcheck disable=SC2086
"$PY" -m pip install --quiet --disable-pip-version-check --no-compile --target "$tmp" \
  --platform "$PLATFORM" --implementation cp --python-version "$PY_VERSION" --only-binary=:all: \
  $(printf '%s\n' "$deps" | sed "s/.*/'&'/" | xargs) 2>&1 | grep -v "^WARNING: Location" || true
[ -d "$tmp/pydantic" ] || { echo "build_lambda: dependency install failed" >&2; exit 1; }
# shellcheck disable=SC2086
remove_distributions "$tmp" $LEFT_TO_RUNTIME
rm -rf "$tmp/bin"  # console scripts, pointing at this machine's Python
"$PY" "$ROOT/scripts/lambda_modules.py" --copy-to "$tmp"  # what the handlers import, no more
"$ROOT/scripts/stamp_commit.sh" "$tmp"  # the commit it is built from (duetime.build_info)
for fn in "$ROOT"/functions/*/; do
  name="$(basename "$fn")"
  mkdir -p "$tmp/functions/$name"
  cp "$fn"/*.py "$tmp/functions/$name/"  # each function's handlers (the poller's: handler.py, helper.py)
done
find "$tmp" -name '__pycache__' -type d -prune -exec rm -rf {} +
rm -rf "$OUT"
mv "$tmp" "$OUT"
touch "$OUT/.built"
echo "build_lambda: $(du -sh "$OUT" | cut -f1) in $OUT (python$PY_VERSION, $PLATFORM; left to the runtime:" \
  "${LEFT_TO_RUNTIME// /, })"
