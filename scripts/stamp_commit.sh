#!/usr/bin/env bash
# scripts/stamp_commit.sh ASSET_DIR: write the commit the checkout is at into ASSET_DIR/duetime/COMMIT, read by
# duetime.build_info (an asset has no .git): git's answer by the module's own rule (short sha, -dirty for
# uncommitted changes to tracked files), or "unknown". The file is rewritten only when the commit changed, so
# an asset built from unchanged sources is restamped in a moment after a commit (make lambda-assets), and its
# content, and the CDK asset hash with it, change only when the commit does.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
"$PY" - "$ROOT/shared" "$1/duetime/COMMIT" <<'PYEOF'
import sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
from duetime.build_info import UNKNOWN, commit_from_git

target = Path(sys.argv[2])
stamp = (commit_from_git(Path(sys.argv[1])) or UNKNOWN) + "\n"
if not target.is_file() or target.read_text(encoding="utf-8") != stamp:
    target.write_text(stamp, encoding="utf-8")
PYEOF
