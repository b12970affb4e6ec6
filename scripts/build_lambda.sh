#!/usr/bin/env bash
# Build the Lambda code asset without Docker: duetime's dependencies as manylinux wheels for the Lambda
# runtime (python3.13, arm64), the duetime package, and the handlers, into one directory (default
# build/lambda). boto3/botocore are left out: the Lambda runtime ships them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/build/lambda}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
PY_VERSION="${LAMBDA_PYTHON_VERSION:-3.13}"
PLATFORM="${LAMBDA_PLATFORM:-manylinux2014_aarch64}"

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
