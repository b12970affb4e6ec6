#!/usr/bin/env bash
# Build the Lambda code asset without Docker: duetime's dependencies as manylinux wheels for the Lambda
# runtime (python3.13, arm64), the duetime package, and the handlers, into one directory (default
# build/lambda). boto3/botocore are left out: the Lambda runtime ships them.
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

deps="$("$PY" - "$ROOT/pyproject.toml" <<'PYEOF'
import sys, tomllib, re
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
skip = {"boto3", "botocore"}
print("\n".join(d for d in deps if re.split(r"[\[<>=!~ ]", d)[0].lower() not in skip))
PYEOF
)"
tmp="$OUT.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
# shellcheck disable=SC2086
"$PY" -m pip install --quiet --disable-pip-version-check --no-compile --target "$tmp" \
  --platform "$PLATFORM" --implementation cp --python-version "$PY_VERSION" --only-binary=:all: \
  $(printf '%s\n' "$deps" | sed "s/.*/'&'/" | xargs) 2>&1 | grep -v "^WARNING: Location" || true
[ -d "$tmp/pydantic" ] || { echo "build_lambda: dependency install failed" >&2; exit 1; }
cp -r "$ROOT/shared/duetime" "$tmp/duetime"
for fn in "$ROOT"/functions/*/; do
  name="$(basename "$fn")"
  mkdir -p "$tmp/functions/$name"
  cp "$fn/handler.py" "$tmp/functions/$name/handler.py"
done
find "$tmp" -name '__pycache__' -type d -prune -exec rm -rf {} +
rm -rf "$OUT"
mv "$tmp" "$OUT"
touch "$OUT/.built"
echo "build_lambda: $(du -sh "$OUT" | cut -f1) in $OUT (python$PY_VERSION, $PLATFORM)"
